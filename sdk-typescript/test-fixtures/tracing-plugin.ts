/**
 * A plugin for the SDK's tracing tests: KV in memory, where `Get("tracing")` answers `on` when
 * the SDK set up OpenTelemetry (its API's global registry exists), else `off`.
 */

import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";

import { Plugin, loadProto, serviceClient } from "../src/index.js";

const kv = loadProto(fileURLToPath(new URL("../../examples/proto/kv.proto", import.meta.url)));
const values = new Map<string, Buffer>();

/** Whether OpenTelemetry's API registered its globals (it does when a provider is set). */
function otelRegistered(): boolean {
  return Object.getOwnPropertySymbols(globalThis).some((s) => s.description?.startsWith("opentelemetry.js.api"));
}

const plugin = new Plugin({ cookieKey: "BASIC_PLUGIN", cookieValue: "hello", appVersions: [1] });
plugin.addService(serviceClient(kv, "proto.KV"), {
  Put: (call: grpc.ServerUnaryCall<{ key: string; value: Buffer }, unknown>, done: grpc.sendUnaryData<object>) => {
    values.set(call.request.key, call.request.value);
    done(null, {});
  },
  Get: (call: grpc.ServerUnaryCall<{ key: string }, unknown>, done: grpc.sendUnaryData<{ value: Buffer }>) => {
    if (call.request.key === "tracing") {
      done(null, { value: Buffer.from(otelRegistered() ? "on" : "off") });
      return;
    }
    const value = values.get(call.request.key);
    if (value === undefined) done({ code: grpc.status.NOT_FOUND, details: "no such key" });
    else done(null, { value });
  },
});
await plugin.serve();
