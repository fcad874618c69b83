import { test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

import { loadProto, serviceClient, PROTO_LOADER_OPTIONS, SDK_PROTO_DIR } from "../src/protos.js";
import { describe, serveReflection } from "../src/reflection.js";

const here = (p: string): string => fileURLToPath(new URL(p, import.meta.url));

test("reflection describes exactly the served services, with their files' descriptors", () => {
  const counter = loadProto(here("../../examples/proto/counter.proto"));
  const Counter = serviceClient(counter, "proto.Counter");
  const { names, pkg } = describe([{ service: Counter, implementation: {} }]);
  // AddHelper is in the same file but not served: not listed.
  assert.deepEqual(names, ["proto.Counter"]);
  assert.ok(Object.keys(pkg).length >= 2);
  for (const type of Object.values(pkg)) {
    assert.ok(Array.isArray((type as protoLoader.MessageTypeDefinition<object, object>).fileDescriptorProtos));
  }
});

test("a server with reflection answers list_services with the served services", async () => {
  const counter = loadProto(here("../../examples/proto/counter.proto"));
  const Counter = serviceClient(counter, "proto.Counter");
  const server = new grpc.Server();
  server.addService(Counter.service, { Get: () => undefined, Put: () => undefined });
  serveReflection(server, [{ service: Counter, implementation: {} }]);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  const reflection = grpc.loadPackageDefinition(
    protoLoader.loadSync(here("../../node_modules/@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto"), {
      ...PROTO_LOADER_OPTIONS,
      includeDirs: [SDK_PROTO_DIR],
    }),
  );
  const Client = serviceClient(reflection, "grpc.reflection.v1.ServerReflection");
  const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  type Response = { list_services_response?: { service: { name: string }[] } };
  const call = (client as unknown as { ServerReflectionInfo(): grpc.ClientDuplexStream<object, Response> }).ServerReflectionInfo();
  const answer = new Promise<string[]>((resolve) =>
    call.once("data", (r: Response) => resolve((r.list_services_response?.service ?? []).map((s) => s.name))),
  );
  const ended = new Promise<void>((resolve) => {
    call.on("error", () => resolve()); // the server's end or a cancel: either ends the call
    call.on("end", () => resolve());
  });
  call.resume();
  call.write({ list_services: "" });
  const listed = await answer;
  call.end();
  await ended;
  client.close();
  server.forceShutdown();
  assert.ok(listed.includes("proto.Counter"), `${listed}`);
  assert.ok(!listed.includes("proto.AddHelper"), `${listed}`);
});
