import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";

import {
  DEFAULT_SHUTDOWN_GRACE_MS,
  derToPem,
  generateIdentity,
  loadProto,
  serviceClient,
  type Identity,
} from "../src/index.js";
import { internalProtos } from "../src/protos.js";

const FIXTURE = fileURLToPath(new URL("../test-fixtures/stdio-plugin.js", import.meta.url));
const kv = loadProto(fileURLToPath(new URL("../../examples/proto/kv.proto", import.meta.url)));

interface Started {
  child: ChildProcess;
  fields: string[];
  exited: Promise<number | null>;
  tmp: string;
}

/** Starts the fixture as a host would and reads its handshake line. */
async function start(env: Record<string, string>): Promise<Started> {
  const tmp = mkdtempSync(path.join(tmpdir(), "tether-serve-test-"));
  const child = spawn(process.execPath, [FIXTURE], {
    env: { PATH: process.env.PATH ?? "", TMPDIR: tmp, BASIC_PLUGIN: "hello", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const line = await new Promise<string>((resolve, reject) => {
    let text = "";
    child.stdout?.on("data", (d: Buffer) => {
      text += d.toString();
      if (text.includes("\n")) resolve(text.split("\n")[0] ?? "");
    });
    child.once("exit", (code) => reject(new Error(`the plugin exited (${code}) before its handshake`)));
  });
  return { child, fields: line.split("|"), exited, tmp };
}

function credentials(host: Identity, pluginCertField: string): grpc.ChannelCredentials {
  const der = Buffer.from(pluginCertField, "base64");
  return grpc.credentials.createSsl(Buffer.from(derToPem(der)), Buffer.from(host.keyPem), Buffer.from(host.certPem), {
    checkServerIdentity: (_h, cert) => (cert.raw.equals(der) ? undefined : new Error("not the plugin's certificate")),
  });
}

const OPTIONS = { "grpc.ssl_target_name_override": "localhost", "grpc.default_authority": "localhost" };
const unary = <T>(client: grpc.Client, method: string, request: object): Promise<T> =>
  new Promise((resolve, reject) =>
    (client as unknown as Record<string, (r: object, cb: (e: Error | null, v: T) => void) => void>)[method]?.call(client, request, (e, v) =>
      e ? reject(e) : resolve(v),
    ),
  );

test("a host over pinned AutoMTLS: health, calls, stdout over GRPCStdio, Shutdown ends it with 0 and removes its socket", async () => {
  const host = generateIdentity();
  const plugin = await start({ PLUGIN_PROTOCOL_VERSIONS: "1,2,3", PLUGIN_CLIENT_CERT: host.certPem });
  const [core, app, network, address, protocol, cert, mux] = plugin.fields;
  assert.deepEqual([core, app, network, protocol, mux], ["1", "2", "unix", "grpc", undefined]);
  assert.ok(cert !== undefined && !cert.endsWith("="), "base64 without padding");
  const target = `unix:${address}`;
  const creds = credentials(host, cert);

  const health = new (internalProtos().health)(target, creds, OPTIONS);
  assert.deepEqual(await unary(health, "Check", { service: "plugin" }), { status: 1 });

  const stdio = new (internalProtos().stdio)(target, creds, OPTIONS);
  const stream = (stdio as unknown as { StreamStdio(r: object): grpc.ClientReadableStream<{ channel: number; data: Buffer }> }).StreamStdio({});
  await new Promise((resolve) => stream.once("metadata", resolve));
  const printed = new Promise<{ channel: number; data: Buffer }>((resolve) => stream.once("data", resolve));

  const client = new (serviceClient(kv, "proto.KV"))(target, creds, OPTIONS);
  await unary(client, "Put", { key: "a", value: Buffer.from("1") });
  assert.deepEqual(await unary(client, "Get", { key: "a" }), { value: Buffer.from("1") });
  const line = await printed;
  assert.equal(line.channel, 1);
  assert.equal(line.data.toString(), "stored a\n");

  // Another certificate than the host's is refused.
  const stranger = new (internalProtos().health)(target, credentials(generateIdentity(), cert), { ...OPTIONS, "grpc.max_reconnect_backoff_ms": 100 });
  await assert.rejects(unary(stranger, "Check", { service: "plugin" }, ), /UNAVAILABLE/);
  stranger.close();

  stream.on("error", () => {}); // cancelled when the plugin stops
  await unary(new (internalProtos().controller)(target, creds, OPTIONS), "Shutdown", {});
  assert.equal(await plugin.exited, 0);
  assert.equal(existsSync(address ?? ""), false, "the socket is removed");
  assert.equal(existsSync(path.dirname(address ?? "")), false, "its private directory too");
  for (const c of [health, stdio, client]) c.close();
  rmSync(plugin.tmp, { recursive: true, force: true });
});

test("Shutdown ends the plugin at once, not after the grace period, while the host keeps its broker streams open", async () => {
  const plugin = await start({ PLUGIN_PROTOCOL_VERSIONS: "1" });
  const target = `unix:${plugin.fields[3]}`;
  const insecure = grpc.credentials.createInsecure();
  type Broker = { StartStream(): grpc.ClientDuplexStream<object, object> };
  const broker = new (internalProtos().broker)(target, insecure, OPTIONS);
  // Like a tether host: its StartStream stays open (its own half too) until the plugin is gone.
  const held = (broker as unknown as Broker).StartStream();
  held.on("error", () => {});
  held.on("data", () => {});
  // A call after it on the same connection: once answered, the plugin has the held stream.
  const health = new (internalProtos().health)(target, insecure, OPTIONS);
  assert.deepEqual(await unary(health, "Check", { service: "plugin" }), { status: 1 });
  // Like tether conformance's probe: a second StartStream the host ends at once.
  const probe = (broker as unknown as Broker).StartStream();
  probe.on("error", () => {});
  probe.on("data", () => {});
  probe.end();
  // Answered once the plugin has handled both (streams of one connection, in order).
  await new Promise((resolve) => probe.once("status", resolve));

  const asked = Date.now();
  await unary(new (internalProtos().controller)(target, insecure, OPTIONS), "Shutdown", {});
  assert.equal(await plugin.exited, 0);
  const took = Date.now() - asked;
  // Measured to the exit event. Before: the held stream (answered, but half open on the
  // host's side) and the probe (which made the broker forget the held one) kept the plugin
  // for the whole grace.
  assert.ok(took < DEFAULT_SHUTDOWN_GRACE_MS / 2, `exited ${took} ms after Shutdown (grace ${DEFAULT_SHUTDOWN_GRACE_MS} ms)`);
  broker.close();
  health.close();
  rmSync(plugin.tmp, { recursive: true, force: true });
});

test("the seventh handshake field is printed only when the host offered multiplexing", async () => {
  for (const [offer, expected] of [["true", "true"], ["false", "false"]] as const) {
    const plugin = await start({ PLUGIN_PROTOCOL_VERSIONS: "1", PLUGIN_MULTIPLEX_GRPC: offer });
    assert.equal(plugin.fields.length, 7);
    assert.equal(plugin.fields[6], expected);
    assert.equal(plugin.fields[5], "", "plaintext without PLUGIN_CLIENT_CERT");
    plugin.child.kill("SIGTERM");
    assert.equal(await plugin.exited, 0);
    rmSync(plugin.tmp, { recursive: true, force: true });
  }
});

test("started without the cookie, a plugin prints go-plugin's message to stderr, nothing to stdout, and exits 1", async () => {
  const child = spawn(process.execPath, [FIXTURE], { env: { PATH: process.env.PATH ?? "" }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  const code = await new Promise((resolve) => child.once("close", resolve));
  assert.equal(code, 1);
  assert.equal(out, "");
  assert.match(err, /^This binary is a plugin\. These are not meant to be executed directly\./);
});
