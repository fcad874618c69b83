/** A plugin for the test kit's launch tests: KV whose `Get{key}` answers the granted secret `key`. */

import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";

import { Plugin, loadProto, secrets, serviceClient } from "../src/index.js";

const kv = loadProto(fileURLToPath(new URL("../../examples/proto/kv.proto", import.meta.url)));
const plugin = new Plugin({ cookieKey: "GRANTED_PLUGIN", cookieValue: "hello" });
plugin.addService(serviceClient(kv, "proto.KV"), {
  Get: (call: grpc.ServerUnaryCall<{ key: string }, unknown>, done: grpc.sendUnaryData<{ value: Buffer }>) => {
    try {
      done(null, { value: secrets.readBytes(call.request.key) });
    } catch (e) {
      done({ code: grpc.status.FAILED_PRECONDITION, details: (e as Error).message });
    }
  },
  Put: (_call: unknown, done: grpc.sendUnaryData<object>) => done({ code: grpc.status.UNIMPLEMENTED, details: "read-only" }),
});
await plugin.serve();
