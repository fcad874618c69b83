/**
 * Counter plugin: go-plugin's `examples/bidirectional` plugin, written with the tether
 * TypeScript SDK — a plugin that calls back into its host through `plugin.GRPCBroker`.
 *
 * Serves `proto.Counter` (app version 1, cookie `BASIC_PLUGIN=hello`). `Put{add_server, key,
 * value}` dials the host's `AddHelper` on broker id `add_server`, asks it for
 * `Sum(current, value)` and stores the result; `add_server` 0 (an id go-plugin never hands out)
 * means the `AddHelper` a tether host registered as a host service. `Get{key}` returns the
 * stored number (0 for a key never put). Each number lives in `kv_<key>` in the working
 * directory as `{"Value":N}`, like go-plugin's example, so the Go, Rust, Python and TypeScript
 * counter plugins share their files.
 *
 *     export COUNTER_PLUGIN="node sdk-typescript/dist/examples/counter.js"
 *     target/debug/counter-host put c 5 && target/debug/counter-host put c 7
 *     target/debug/counter-host get c   # prints 12
 */

import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";

import { Plugin, loadProto, serviceClient, type GRPCBroker } from "../src/index.js";
import { pathFor } from "./kv-path.js";

const counter = loadProto(fileURLToPath(new URL("../../examples/proto/counter.proto", import.meta.url)));
const Counter = serviceClient(counter, "proto.Counter");
const AddHelper = serviceClient(counter, "proto.AddHelper");

interface AddHelperClient extends grpc.Client {
  Sum(request: { a: number; b: number }, callback: (error: grpc.ServiceError | null, response?: { r: number }) => void): void;
}

async function read(key: string): Promise<number> {
  try {
    const stored = JSON.parse(await readFile(pathFor(key), "utf8")) as { Value?: unknown };
    return Number(stored.Value ?? 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return 0;
    throw e;
  }
}

function counterService(broker: GRPCBroker): grpc.UntypedServiceImplementation {
  return {
    Get: async (call: grpc.ServerUnaryCall<{ key: string }, unknown>, done: grpc.sendUnaryData<{ value: number }>) => {
      try {
        done(null, { value: await read(call.request.key) });
      } catch (e) {
        done(e as grpc.ServiceError);
      }
    },
    Put: async (
      call: grpc.ServerUnaryCall<{ add_server: number; key: string; value: number }, unknown>,
      done: grpc.sendUnaryData<object>,
    ) => {
      try {
        const { add_server, key, value } = call.request;
        const current = await read(key);
        // A fresh id per call, as go-plugin's example does: close the client after the call,
        // which also ends what the dial set up (closing a host-services client leaves their
        // shared connection open).
        const helper =
          add_server === 0
            ? await broker.hostServices<AddHelperClient>(AddHelper)
            : await broker.dial<AddHelperClient>(add_server, AddHelper);
        let total: number;
        try {
          total = await new Promise<number>((resolve, reject) =>
            helper.Sum({ a: current, b: value }, (error, response) => (error ? reject(error) : resolve(response?.r ?? 0))),
          );
        } finally {
          helper.close();
        }
        await writeFile(pathFor(key), JSON.stringify({ Value: total }));
        done(null, {});
      } catch (e) {
        const err = e as grpc.ServiceError;
        done({ code: err.code ?? grpc.status.UNAVAILABLE, details: `reaching the host's AddHelper: ${err.message}` });
      }
    },
  };
}

const plugin = new Plugin({ cookieKey: "BASIC_PLUGIN", cookieValue: "hello", appVersions: [1] });
plugin.addService(Counter, counterService(plugin.broker()));
await plugin.serve();
