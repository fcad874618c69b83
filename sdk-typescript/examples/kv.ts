/**
 * KV plugin: go-plugin's `examples/grpc` plugin, written with the tether TypeScript SDK.
 *
 * Serves `proto.KV` (app version 1, cookie `BASIC_PLUGIN=hello`). `Put{key, value}` writes the
 * value to `kv_<key>` in the working directory; `Get{key}` reads it back (`NOT_FOUND` for a key
 * never put; keys that could name another file are `INVALID_ARGUMENT`).
 *
 *     npm run build
 *     KV_PLUGIN="node sdk-typescript/dist/examples/kv.js" target/debug/kv-host put a 1
 */

import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";

import { Plugin, loadProto, serviceClient } from "../src/index.js";
import { pathFor } from "./kv-path.js";

const kv = loadProto(fileURLToPath(new URL("../../examples/proto/kv.proto", import.meta.url)));

type Call<T> = grpc.ServerUnaryCall<T, unknown>;
type Done<T> = grpc.sendUnaryData<T>;

const plugin = new Plugin({ cookieKey: "BASIC_PLUGIN", cookieValue: "hello", appVersions: [1] });
plugin.addService(serviceClient(kv, "proto.KV"), {
  Put: async (call: Call<{ key: string; value: Buffer }>, done: Done<object>) => {
    try {
      await writeFile(pathFor(call.request.key), call.request.value);
      done(null, {});
    } catch (e) {
      const err = e as Error & { code?: unknown };
      done({ code: typeof err.code === "number" ? err.code : grpc.status.INTERNAL, details: err.message });
    }
  },
  Get: async (call: Call<{ key: string }>, done: Done<{ value: Buffer }>) => {
    try {
      done(null, { value: await readFile(pathFor(call.request.key)) });
    } catch (e) {
      const err = e as Error & { code?: unknown };
      if (typeof err.code === "number") done({ code: err.code, details: err.message });
      else if (err.code === "ENOENT") done({ code: grpc.status.NOT_FOUND, details: `no value for key ${JSON.stringify(call.request.key)}` });
      else done({ code: grpc.status.INTERNAL, details: `reading the value of ${JSON.stringify(call.request.key)}: ${err.message}` });
    }
  },
});
await plugin.serve();
