/**
 * Plugin-to-plugin calls through a tether host (docs/PROTOCOL.md §10.3).
 *
 * A tether catalog host (`Supervisor`) serves every plugin the host service
 * `tether.plugins.v1.Plugins`. `Open{plugin}` asks it for a connection to another plugin of its
 * catalog: when the operator's grants let this plugin call that one (`calls = ["NAME"]` under
 * `[plugins.THIS]`), the host starts it if needed and serves a relay to it under a broker id on
 * this plugin's broker, which `GRPCBroker.openPlugin` then dials. The plugin never learns the
 * other's address, certificate, secrets or config.
 *
 * @module
 */

import * as grpc from "@grpc/grpc-js";

import { PluginRefusedError } from "./errors.js";
import { internalProtos } from "./protos.js";

/**
 * Asks the host's `Plugins/Open` (on a client of its host services, `host`) for a connection
 * to catalog plugin `plugin`; resolves to the broker id of the relay the host serves.
 *
 * @throws {PluginRefusedError} with the host's status code and message when it does not open
 *   one (`PERMISSION_DENIED`: not granted, the message names the grants line to add).
 */
export function openBrokerId(host: grpc.Client, plugin: string): Promise<number> {
  const open = internalProtos().plugins.service.Open;
  if (open === undefined) throw new Error("tether.plugins.v1.Plugins has no Open method");
  return new Promise((resolve, reject) => {
    host.makeUnaryRequest<{ plugin: string }, { broker_id: number }>(
      open.path,
      open.requestSerialize,
      open.responseDeserialize,
      { plugin },
      (error, response) => {
        if (error) {
          const code = error.code ?? grpc.status.UNKNOWN;
          reject(new PluginRefusedError(plugin, code, error.details ?? error.message, grpc.status[code] ?? String(code)));
        } else {
          resolve(response?.broker_id ?? 0);
        }
      },
    );
  });
}
