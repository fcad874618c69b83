import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace-base";

import { loadProto, serviceClient } from "../src/index.js";
import { internalProtos } from "../src/protos.js";
import { Tracing } from "../src/tracing.js";

const HOST_TRACE = "0af7651916cd43dd8448eb211c80319c";
const HOST_SPAN = "b7ad6b7169203331";
const TRACEPARENT = `00-${HOST_TRACE}-${HOST_SPAN}-01`;
const ASKED = { TRACEPARENT, TETHER_HOST_SERVICES: "served" };
const kv = loadProto(fileURLToPath(new URL("../../examples/proto/kv.proto", import.meta.url)));
const KV = serviceClient(kv, "proto.KV");
/** Keeps what it is given (OpenTelemetry's in-memory exporter forgets it on shutdown). */
class Kept implements SpanExporter {
  readonly spans: ReadableSpan[] = [];
  export(spans: ReadableSpan[], done: (result: { code: number }) => void): void {
    this.spans.push(...spans);
    done({ code: 0 });
  }
  async shutdown(): Promise<void> {}
}

const noBroker = { hostServices: () => Promise.reject(new Error("no host here")) };

type Unary = (request: object, metadata: grpc.Metadata, callback: (e: grpc.ServiceError | null, v?: { value: Buffer }) => void) => void;
const get = (client: grpc.Client, key: string, metadata = new grpc.Metadata()): Promise<Buffer> =>
  new Promise((resolve, reject) =>
    (client as unknown as { Get: Unary }).Get({ key }, metadata, (e, v) => (e ? reject(e) : resolve(v?.value ?? Buffer.alloc(0)))),
  );

test("without the OpenTelemetry packages, a plugin the host asks for traces traces nothing", async () => {
  const missing = () => Promise.reject(Object.assign(new Error("Cannot find package '@opentelemetry/api'"), { code: "ERR_MODULE_NOT_FOUND" }));
  assert.equal(await Tracing.start(noBroker, ASKED, { load: missing }), undefined);
});

test("without a TRACEPARENT or host services, a plugin traces nothing", async () => {
  assert.equal(await Tracing.start(noBroker, { TETHER_HOST_SERVICES: "served" }), undefined);
  assert.equal(await Tracing.start(noBroker, { TRACEPARENT, TETHER_HOST_SERVICES: "none" }), undefined);
  assert.equal(await Tracing.start(noBroker, { TRACEPARENT }), undefined);
});

/** Starts the tracing fixture as a tether host asking for traces would, plaintext; reads its address. */
async function launch(nodeArgs: string[]): Promise<{ client: grpc.Client; stop: () => Promise<number | null>; stderr: () => string }> {
  const tmp = mkdtempSync(path.join(tmpdir(), "tether-tracing-test-"));
  const fixture = fileURLToPath(new URL("../test-fixtures/tracing-plugin.js", import.meta.url));
  const child = spawn(process.execPath, [...nodeArgs, fixture], {
    env: { PATH: process.env.PATH ?? "", TMPDIR: tmp, BASIC_PLUGIN: "hello", PLUGIN_PROTOCOL_VERSIONS: "1", ...ASKED },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const line = await new Promise<string>((resolve, reject) => {
    let text = "";
    child.stdout?.on("data", (d: Buffer) => {
      text += d.toString();
      if (text.includes("\n")) resolve(text.split("\n")[0] ?? "");
    });
    child.once("exit", (code) => reject(new Error(`the plugin exited (${code}) before its handshake: ${stderr}`)));
  });
  const address = line.split("|")[3];
  const client = new KV(`unix:${address}`, grpc.credentials.createInsecure(), { "grpc.default_authority": "localhost" });
  const stop = async (): Promise<number | null> => {
    const controller = new (internalProtos().controller)(`unix:${address}`, grpc.credentials.createInsecure(), {
      "grpc.default_authority": "localhost",
    });
    await new Promise((resolve) => (controller as unknown as { Shutdown(r: object, cb: () => void): void }).Shutdown({}, () => resolve(null)));
    client.close();
    controller.close();
    const code = await exited;
    rmSync(tmp, { recursive: true, force: true });
    return code;
  };
  return { client, stop, stderr: () => stderr };
}

test("without the OpenTelemetry packages, a plugin asked for traces serves as before", async () => {
  const hide = fileURLToPath(new URL("../test-fixtures/hide-opentelemetry-register.js", import.meta.url));
  const plugin = await launch(["--import", hide]);
  const metadata = new grpc.Metadata();
  metadata.set("traceparent", TRACEPARENT);
  await assert.rejects(get(plugin.client, "k", metadata), { code: grpc.status.NOT_FOUND });
  assert.equal((await get(plugin.client, "tracing")).toString(), "off");
  assert.equal(await plugin.stop(), 0);
  assert.doesNotMatch(plugin.stderr(), /ERROR|Error/);
});

test("with the OpenTelemetry packages, the same launch is traced", async () => {
  const plugin = await launch([]);
  assert.equal((await get(plugin.client, "tracing")).toString(), "on");
  // No host serves the relay here: the spans find no host, and the stop does not wait for them
  // longer than SPAN_FLUSH_TIMEOUT_MS.
  assert.equal(await plugin.stop(), 0);
});

/** A grpc-js server on loopback TCP serving `entries`. */
async function serve(entries: { service: grpc.ServiceClientConstructor; implementation: grpc.UntypedServiceImplementation }[]) {
  const server = new grpc.Server();
  for (const { service, implementation } of entries) server.addService(service.service, implementation);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return { server, target: `127.0.0.1:${port}` };
}

test("a served call continues the caller's trace, and a call it makes after an await carries it on", async () => {
  const memory = new Kept();
  const tracing = await Tracing.start(noBroker, ASKED, { exporter: memory });
  assert.ok(tracing !== undefined);
  const callback = await serve(
    tracing.serve([{ service: KV, implementation: { Get: (_c: unknown, done: grpc.sendUnaryData<object>) => done(null, { value: Buffer.from("cb") }) } }]) as never,
  );
  const back = new KV(callback.target, grpc.credentials.createInsecure(), { interceptors: [tracing.clientInterceptor] });
  const plugin = await serve(
    tracing.serve([
      {
        service: KV,
        implementation: {
          Get: async (call: grpc.ServerUnaryCall<{ key: string }, unknown>, done: grpc.sendUnaryData<object>) => {
            await new Promise((resolve) => setImmediate(resolve));
            const value = await get(back, "cb");
            if (call.request.key === "missing") done({ code: grpc.status.NOT_FOUND, details: "no such key" });
            else done(null, { value });
          },
        },
      },
    ]) as never,
  );
  const host = new KV(plugin.target, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  metadata.set("traceparent", TRACEPARENT);
  assert.equal((await get(host, "k", metadata)).toString(), "cb");
  await assert.rejects(get(host, "missing", metadata), { code: grpc.status.NOT_FOUND });
  host.close();
  back.close();
  plugin.server.forceShutdown();
  callback.server.forceShutdown();
  await tracing.close();

  const spans = memory.spans;
  const describe = spans.map((s) => `${s.name} kind=${s.kind} parent=${s.parentSpanContext?.spanId}`).join("\n");
  const fromHost = spans.filter((s) => s.kind === SpanKind.SERVER && s.parentSpanContext?.spanId === HOST_SPAN);
  assert.equal(fromHost.length, 2, describe);
  const codes: string[] = [];
  for (const served of fromHost) {
    assert.equal(served.name, "proto.KV/Get");
    assert.equal(served.spanContext().traceId, HOST_TRACE);
    assert.equal(served.attributes["rpc.system.name"], "grpc");
    assert.equal(served.attributes["rpc.method"], "proto.KV/Get");
    // NOT_FOUND is the caller's mistake, not the server's failure.
    assert.notEqual(served.status.code, SpanStatusCode.ERROR);
    codes.push(String(served.attributes["rpc.response.status_code"]));
    const call = only(spans, (s) => s.kind === SpanKind.CLIENT && s.parentSpanContext?.spanId === served.spanContext().spanId, describe);
    assert.equal(call.spanContext().traceId, HOST_TRACE);
    assert.equal(call.attributes["rpc.response.status_code"], "OK");
    const answered = only(spans, (s) => s.kind === SpanKind.SERVER && s.parentSpanContext?.spanId === call.spanContext().spanId, describe);
    assert.equal(answered.spanContext().traceId, HOST_TRACE);
  }
  assert.deepEqual(codes.sort(), ["NOT_FOUND", "OK"]);
  assert.equal(spans.length, 6, describe);
});

test("the start-up span is a child of the host's launch span", async () => {
  const memory = new Kept();
  const tracing = await Tracing.start(noBroker, ASKED, { exporter: memory });
  assert.ok(tracing !== undefined);
  tracing.startSpan().end();
  await tracing.close();
  const [started] = memory.spans;
  assert.equal(started?.name, "tether.plugin.start");
  assert.equal(started?.spanContext().traceId, HOST_TRACE);
  assert.equal(started?.parentSpanContext?.spanId, HOST_SPAN);
});

function only(spans: ReadableSpan[], predicate: (s: ReadableSpan) => boolean, describe: string): ReadableSpan {
  const found = spans.filter(predicate);
  assert.equal(found.length, 1, describe);
  return found[0] as ReadableSpan;
}
