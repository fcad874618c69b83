/** A plugin for the SDK's own serve tests: KV in memory; `Put` prints a line to stdout. */

import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";

import { Plugin, loadProto, serviceClient } from "../src/index.js";

const kv = loadProto(fileURLToPath(new URL("../../examples/proto/kv.proto", import.meta.url)));
const values = new Map<string, Buffer>();
const plugin = new Plugin({ cookieKey: "BASIC_PLUGIN", cookieValue: "hello", appVersions: [1, 2] });
plugin.addService(serviceClient(kv, "proto.KV"), {
  Put: (call: grpc.ServerUnaryCall<{ key: string; value: Buffer }, unknown>, done: grpc.sendUnaryData<object>) => {
    values.set(call.request.key, call.request.value);
    console.log(`stored ${call.request.key}`);
    done(null, {});
  },
  Get: (call: grpc.ServerUnaryCall<{ key: string }, unknown>, done: grpc.sendUnaryData<{ value: Buffer }>) => {
    const value = values.get(call.request.key);
    if (value === undefined) done({ code: grpc.status.NOT_FOUND, details: "no such key" });
    else done(null, { value });
  },
});
await plugin.serve();
