// `broker.openPlugin` against a host whose host services include a `tether.plugins.v1.Plugins`
// that grants plugin `b` only, as a tether `Supervisor` would (default broker mode): the
// granted call reaches the service the host announces for `b`, a refusal is a
// `PluginRefusedError` keeping the host's code and text. The real host and its grants are
// exercised by tests/tests/plugin_calls.rs, which runs examples/caller.ts under a Supervisor.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";

import { GRPCBroker } from "../src/broker.js";
import { HOST_SERVICES_ID } from "../src/broker-stream.js";
import { GrpcBrokerError, PluginRefusedError } from "../src/errors.js";
import { internalProtos } from "../src/protos.js";

const REFUSAL = 'plugin `a` may not call plugin `c`: not granted; add `calls = ["c"]` under `[plugins.a]` at g.toml:1';

function bind(server: grpc.Server, socket: string): Promise<void> {
  return new Promise((resolve, reject) =>
    server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())),
  );
}

function check(client: grpc.Client): Promise<unknown> {
  const health = client as grpc.Client & {
    Check(request: object, done: (error: grpc.ServiceError | null, response?: unknown) => void): void;
  };
  return new Promise((resolve, reject) => health.Check({}, (e, r) => (e ? reject(e) : resolve(r))));
}

test("a granted plugin is reached on the broker id the host opens; a refusal keeps the host's code and text", async () => {
  const broker = new GRPCBroker();
  const dir = mkdtempSync(path.join(tmpdir(), "tether-plugins-test-"));
  broker.connect({ pinned: undefined, socketDir: dir, mux: undefined });
  const b = new grpc.Server();
  b.addService(internalProtos().health.service, {
    Check: (_call: unknown, done: grpc.sendUnaryData<{ status: number }>) => done(null, { status: 1 }),
  });
  const host = new grpc.Server();
  let next = 0;
  host.addService(internalProtos().plugins.service, {
    Open: (call: grpc.ServerUnaryCall<{ plugin: string }, unknown>, done: grpc.sendUnaryData<{ broker_id: number }>) => {
      if (call.request.plugin !== "b") {
        done({ code: grpc.status.PERMISSION_DENIED, details: REFUSAL });
        return;
      }
      next += 1; // a fresh id per Open, each announcement dialled once
      broker.receive({ service_id: next, network: "unix", address: path.join(dir, "b.sock") });
      done(null, { broker_id: next });
    },
  });
  try {
    await bind(b, path.join(dir, "b.sock"));
    await bind(host, path.join(dir, "host.sock"));
    broker.receive({ service_id: HOST_SERVICES_ID, network: "unix", address: path.join(dir, "host.sock") });
    for (let i = 0; i < 2; i++) {
      const client = await broker.openPlugin("b", internalProtos().health, { timeoutMs: 1000 });
      assert.deepEqual(await check(client), { status: 1 });
      client.close();
    }
    await assert.rejects(broker.openPlugin("c", internalProtos().health), (e: unknown) => {
      assert.ok(e instanceof PluginRefusedError && e instanceof GrpcBrokerError, String(e));
      assert.deepEqual([e.plugin, e.code, e.details], ["c", grpc.status.PERMISSION_DENIED, REFUSAL]);
      assert.equal(e.message, `the host did not open a connection to plugin "c": ${REFUSAL} (PERMISSION_DENIED)`);
      return true;
    });
  } finally {
    await broker.close();
    b.forceShutdown();
    host.forceShutdown();
    rmSync(dir, { recursive: true, force: true });
  }
});
