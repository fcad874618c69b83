import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";

import { loadProto, serviceClient } from "../src/index.js";
import { LaunchedPlugin, TestKitError, launchPlugin } from "../src/testing/index.js";

const FIXTURE = fileURLToPath(new URL("../test-fixtures/granted-plugin.js", import.meta.url));
const KV = serviceClient(loadProto(fileURLToPath(new URL("../../examples/proto/kv.proto", import.meta.url))), "proto.KV");
const COOKIE = { key: "GRANTED_PLUGIN", value: "hello" };

function get(client: grpc.Client, key: string): Promise<Buffer> {
  const kv = client as grpc.Client & {
    Get(r: { key: string }, done: (e: grpc.ServiceError | null, reply?: { value: Buffer }) => void): void;
  };
  return new Promise((resolve, reject) => kv.Get({ key }, (e, reply) => (e ? reject(e) : resolve(reply?.value ?? Buffer.alloc(0)))));
}

test("a launched plugin reads the secret granted to its process and stops cleanly on Shutdown", async (t) => {
  // launchPlugin: a failed assertion below still ends the plugin (else the test file never exits).
  const plugin = await launchPlugin(t, [process.execPath, FIXTURE], { cookie: COOKIE, secrets: { token: "s3cret" } });
  assert.equal(plugin.handshake.network, "unix");
  assert.ok(plugin.handshake.serverCert !== undefined, "AutoMTLS");
  const client = plugin.client(KV);
  assert.deepEqual(await get(client, "token"), Buffer.from("s3cret"));
  await assert.rejects(get(client, "password"), { code: grpc.status.FAILED_PRECONDITION, details: /the host delivered other secrets, not this one/ });
  assert.equal(await plugin.shutdown(), 0);
  assert.equal(existsSync(plugin.dir), false, "the launch's directory (sockets, secret files) is removed");
  assert.notEqual(plugin.child.exitCode, null, "the process has exited");
});

test("a plugin that exits before its handshake fails the launch with its stderr, escaped", async () => {
  const script = "process.stderr.write('boom \\x1b[31mred'); process.exit(3)";
  await assert.rejects(LaunchedPlugin.start([process.execPath, "-e", script], { cookie: COOKIE }), (e: unknown) => {
    assert.ok(e instanceof TestKitError);
    assert.match(e.message, /exited \(status 3\) before its handshake line; its stderr: "boom \\u001b\[31mred"/);
    assert.doesNotMatch(e.message, /\x1b/, "no raw escape character reaches a terminal");
    return true;
  });
});

test("launchPlugin kills a plugin the test did not shut down when the test ends", async (t) => {
  let launched: LaunchedPlugin | undefined;
  await t.test("launches", async (inner) => {
    launched = await launchPlugin(inner, [process.execPath, FIXTURE], { cookie: COOKIE });
    assert.deepEqual(await get(launched.client(KV), "x").catch((e: grpc.ServiceError) => e.code), grpc.status.FAILED_PRECONDITION);
  });
  assert.ok(launched !== undefined);
  assert.notEqual(launched.child.signalCode ?? launched.child.exitCode, null, "killed at the end of its test");
  assert.equal(existsSync(launched.dir), false);
});
