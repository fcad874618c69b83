#!/usr/bin/env node
/**
 * A plugin that calls another plugin of its host's catalog through the host
 * (`broker.openPlugin`, docs/PROTOCOL.md §10.3), written with the tether TypeScript SDK.
 *
 * Serves `proto.KV` (app version 1, cookie `BASIC_PLUGIN=hello`):
 *
 * - `Get "PLUGIN:KEY"` opens a connection to catalog plugin `PLUGIN` through the host and
 *   answers what that plugin's `proto.KV/Get KEY` answers. The host relays the call only when
 *   the operator's grants let this plugin call that one (`calls = ["PLUGIN"]` under
 *   `[plugins.THIS]`); a refusal comes back with the host's status code and message, which
 *   names the grants line to add.
 * - `Put` stores nothing (`UNIMPLEMENTED`).
 *
 * `tests/tests/plugin_calls.rs` runs it (`dist/examples/caller.js`) as plugin `a` of a
 * `Supervisor`'s catalog.
 */

import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";

import { Plugin, PluginRefusedError, loadProto, serviceClient } from "../src/index.js";

const kv = loadProto(fileURLToPath(new URL("../../examples/proto/kv.proto", import.meta.url)));
const KV = serviceClient(kv, "proto.KV");

type KVClient = grpc.Client & {
  Get(request: { key: string }, done: (error: grpc.ServiceError | null, response?: { value: Buffer }) => void): void;
};

const plugin = new Plugin({ cookieKey: "BASIC_PLUGIN", cookieValue: "hello", appVersions: [1] });
const broker = plugin.broker();
plugin.addService(KV, {
  Get: async (call: grpc.ServerUnaryCall<{ key: string }, unknown>, done: grpc.sendUnaryData<{ value: Buffer }>) => {
    const [name, ...rest] = call.request.key.split(":");
    if (name === undefined || rest.length === 0) {
      done({ code: grpc.status.INVALID_ARGUMENT, details: "expected PLUGIN:KEY" });
      return;
    }
    let other: KVClient;
    try {
      other = await broker.openPlugin<KVClient>(name, KV);
    } catch (e) {
      // e.g. not granted: the host's PERMISSION_DENIED names the grants line to add
      if (e instanceof PluginRefusedError) done({ code: e.code, details: e.details });
      else done({ code: grpc.status.UNAVAILABLE, details: String(e) });
      return;
    }
    other.Get({ key: rest.join(":") }, (error, response) => {
      other.close();
      if (error) done({ code: error.code, details: error.details }); // its answer, as it is
      else done(null, response);
    });
  },
  Put: (_call: unknown, done: grpc.sendUnaryData<object>) => {
    done({ code: grpc.status.UNIMPLEMENTED, details: "the caller plugin stores nothing" });
  },
});
await plugin.serve();
