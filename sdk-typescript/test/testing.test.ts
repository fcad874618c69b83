import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";

import { ConfigurationError, StopReason, config, loadProto, secrets, serviceClient, type GRPCBroker } from "../src/index.js";
import { FakeHost, TestKitError, fakeHost, parseHandshakeLine, type FakeHostOptions } from "../src/testing/index.js";

const kv = loadProto(fileURLToPath(new URL("../../examples/proto/kv.proto", import.meta.url)));
const counter = loadProto(fileURLToPath(new URL("../../examples/proto/counter.proto", import.meta.url)));
const KV = serviceClient(kv, "proto.KV");
const Counter = serviceClient(counter, "proto.Counter");
const AddHelper = serviceClient(counter, "proto.AddHelper");
const MODES = ["default", "multiplexed"] as const;

type Done<T> = grpc.sendUnaryData<T>;

/** The plugin's KV: `Get{key}` answers the granted secret `key` (`config:NAME`: config file NAME). */
const grantedKv: grpc.UntypedServiceImplementation = {
  Get: (call: grpc.ServerUnaryCall<{ key: string }, unknown>, done: Done<{ value: Buffer }>) => {
    const { key } = call.request;
    try {
      const value = key.startsWith("config:") ? config.readBytes(key.slice("config:".length)) : secrets.readBytes(key);
      done(null, { value });
    } catch (e) {
      done({ code: grpc.status.FAILED_PRECONDITION, details: `${(e as Error).name}: ${(e as Error).message}` });
    }
  },
  Put: (_call: unknown, done: Done<object>) => done({ code: grpc.status.UNIMPLEMENTED, details: "read-only" }),
};

/** The plugin's Counter: `Put` asks the host's AddHelper (on `add_server`, 0: the host services) for the new sum. */
function callingCounter(broker: GRPCBroker): grpc.UntypedServiceImplementation {
  const values = new Map<string, number>();
  return {
    Put: async (call: grpc.ServerUnaryCall<{ add_server: number; key: string; value: number }, unknown>, done: Done<object>) => {
      const { add_server, key, value } = call.request;
      try {
        const helper = add_server === 0 ? await broker.hostServices(AddHelper) : await broker.dial(add_server, AddHelper);
        try {
          const reply = await unary<{ r: number }>(helper, "Sum", { a: values.get(key) ?? 0, b: value });
          values.set(key, reply.r);
        } finally {
          helper.close();
        }
        done(null, {});
      } catch (e) {
        done({ code: grpc.status.UNAVAILABLE, details: (e as Error).message });
      }
    },
    Get: (call: grpc.ServerUnaryCall<{ key: string }, unknown>, done: Done<{ value: number }>) =>
      done(null, { value: values.get(call.request.key) ?? 0 }),
  };
}

/** The host's AddHelper, counting its calls. */
function adder(calls: number[] = []): { service: grpc.ServiceClientConstructor; implementation: grpc.UntypedServiceImplementation } {
  return {
    service: AddHelper,
    implementation: {
      Sum: (call: grpc.ServerUnaryCall<{ a: number; b: number }, unknown>, done: Done<{ r: number }>) => {
        calls.push(call.request.b);
        done(null, { r: call.request.a + call.request.b });
      },
    },
  };
}

function unary<T>(client: grpc.Client, method: string, request: object): Promise<T> {
  type Method = (request: object, done: (e: grpc.ServiceError | null, reply?: T) => void) => void;
  const call = (client as unknown as Record<string, Method>)[method];
  assert.ok(call, `no method ${method}`);
  return new Promise((resolve, reject) => call.call(client, request, (e, reply) => (e ? reject(e) : resolve(reply as T))));
}

/** Open unix socket handles of this process (listeners and connections). */
function pipes(): number {
  return process.getActiveResourcesInfo().filter((r) => r === "PipeWrap").length;
}

/** The multiplexed mode's relay directories (the plugin's dials) in the temporary directory. */
function relays(): string[] {
  return readdirSync(tmpdir()).filter((name) => name.startsWith("tether-relay-"));
}

/** Polls `condition` (handles that close a turn after their close() call, with no event to await) for up to 2 s. */
async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 2_000;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

test("the plugin's own secrets.read and config.read find what the fake host granted", async (t) => {
  const host = fakeHost(t, { secrets: { token: "s3cret" }, config: { "settings.json": Buffer.from('{"a":1}') } });
  await host.serve([{ service: KV, implementation: grantedKv }]);
  const client = host.client(KV);
  assert.deepEqual(await unary(client, "Get", { key: "token" }), { value: Buffer.from("s3cret") });
  assert.deepEqual(await unary(client, "Get", { key: "config:settings.json" }), { value: Buffer.from('{"a":1}') });
  assert.equal(host.secrets.read("token"), "s3cret", "the host's view of the same files");
});

test("a secret the fake host did not grant is the SDK's NotGrantedError, saying what to grant", async (t) => {
  const host = fakeHost(t, { secrets: { token: "s3cret" } });
  await host.serve([{ service: KV, implementation: grantedKv }]);
  await assert.rejects(unary(host.client(KV), "Get", { key: "password" }), (thrown: unknown) => {
    const e = thrown as grpc.ServiceError;
    assert.equal(e.code, grpc.status.FAILED_PRECONDITION);
    assert.match(e.details, /^NotGrantedError: secret "password" is not available to this plugin: the host delivered other secrets, not this one/);
    assert.match(e.details, /grant it in the grants file/);
    assert.doesNotMatch(e.details, /s3cret/);
    return true;
  });
});

test("with nothing granted, a secret's error says the host granted none", async (t) => {
  const host = fakeHost(t);
  await host.serve([{ service: KV, implementation: grantedKv }]);
  await assert.rejects(unary(host.client(KV), "Get", { key: "token" }), {
    details: /^NotGrantedError: .*the host delivered no secrets \(TETHER_SECRETS_DIR is not set\)/,
  });
});

for (const mode of MODES) {
  test(`a callback the fake host serves on a broker id is dialled by the plugin over AutoMTLS (${mode} mode)`, async (t) => {
    const host = fakeHost(t, { broker: mode });
    const sent: number[] = [];
    const before = host.acceptAndServe([adder(sent)]); // served once the plugin is
    await host.serve([{ service: Counter, implementation: callingCounter(host.broker) }]);
    assert.equal(host.broker.mode, mode, "the plugin's broker runs in the mode the host offered");
    const after = host.acceptAndServe([adder(sent)]);
    assert.notEqual(before, after);
    const client = host.client(Counter);
    await unary(client, "Put", { add_server: before, key: "n", value: 5 });
    await unary(client, "Put", { add_server: after, key: "n", value: 7 });
    assert.deepEqual(await unary(client, "Get", { key: "n" }), { value: 12 });
    assert.deepEqual(sent, [5, 7], "each id's service answered once");
  });

  test(`host services are reached without an id (${mode} mode)`, async (t) => {
    const sent: number[] = [];
    const host = fakeHost(t, { broker: mode, hostServices: [adder(sent)] });
    await host.serve([{ service: Counter, implementation: callingCounter(host.broker) }]);
    const client = host.client(Counter);
    await unary(client, "Put", { add_server: 0, key: "n", value: 2 });
    await unary(client, "Put", { add_server: 0, key: "n", value: 3 });
    assert.deepEqual(await unary(client, "Get", { key: "n" }), { value: 5 });
    assert.deepEqual(sent, [2, 3]);
  });

  test(`without host services the plugin's request for them fails at once, saying so (${mode} mode)`, async (t) => {
    const host = fakeHost(t, { broker: mode, plugin: { dialTimeoutMs: 10_000 } });
    await host.serve([{ service: Counter, implementation: callingCounter(host.broker) }]);
    const asked = Date.now();
    await assert.rejects(unary(host.client(Counter), "Put", { add_server: 0, key: "n", value: 1 }), {
      code: grpc.status.UNAVAILABLE,
      details: /serves no host services \(the host said so at launch, TETHER_HOST_SERVICES=none\)/,
    });
    assert.ok(Date.now() - asked < 1_000, "failed at once, not after the dial timeout");
  });

  test(`close stops the plugin with Shutdown and leaves no socket, directory, secret file or variable behind (${mode} mode)`, async () => {
    const variables = ["TETHER_SECRETS_DIR", "TETHER_CONFIG_DIR", "TETHER_HOST_SERVICES"];
    const environment = variables.map((name) => process.env[name]);
    const handles = pipes();
    const relaysBefore = relays();
    const options: FakeHostOptions = { broker: mode, secrets: { token: "s3cret" }, hostServices: [adder()] };
    const host = new FakeHost(options);
    const secretsDir = process.env.TETHER_SECRETS_DIR;
    assert.ok(secretsDir?.startsWith(host.dir), "the secrets are delivered in the host's directory while it is open");
    assert.ok(existsSync(`${secretsDir}/token`));
    await host.serve([
      { service: Counter, implementation: callingCounter(host.broker) },
      { service: KV, implementation: grantedKv },
    ]);
    const id = host.acceptAndServe([adder()]);
    await unary(host.client(Counter), "Put", { add_server: id, key: "n", value: 1 });
    await unary(host.client(Counter), "Put", { add_server: 0, key: "n", value: 1 });
    await unary(host.client(KV), "Get", { key: "token" });
    assert.ok(pipes() > handles, "the test opened sockets for close to close");

    assert.equal(await host.close(), StopReason.ShutdownRequested);
    assert.equal(existsSync(host.dir), false, "the host's directory (sockets, secrets) is removed");
    assert.deepEqual(
      variables.map((name) => process.env[name]),
      environment,
      "the launch variables are as they were",
    );
    assert.deepEqual(relays(), relaysBefore, "no relay directory of the plugin's dials is left");
    await until(() => pipes() <= handles, "every socket of the plugin and the host to close");
    assert.equal(await host.close(), undefined, "closing twice does nothing");
  });
}

test("close fails, naming the file, when the plugin leaves something in its socket directory", async () => {
  const host = new FakeHost();
  const stray: grpc.UntypedServiceImplementation = {
    ...grantedKv,
    Put: (_call: unknown, done: Done<object>) => {
      writeFileSync(path.join(host.dir, "run", "stray.sock"), "");
      done(null, {});
    },
  };
  await host.serve([{ service: KV, implementation: stray }]);
  await unary(host.client(KV), "Put", { key: "k", value: Buffer.from("v") });
  await assert.rejects(host.close(), (e: unknown) => e instanceof TestKitError && /the plugin left stray\.sock in its socket directory/.test(e.message));
  assert.equal(existsSync(host.dir), false, "removed all the same");
});

test("a second fake host while one is open is refused, saying to close the first", async () => {
  const first = new FakeHost();
  try {
    assert.throws(() => new FakeHost(), (e: unknown) => e instanceof TestKitError && /is open in this process.*close it first/.test(e.message));
  } finally {
    await first.close();
  }
  await new FakeHost().close(); // once it is closed, another may open
});

test("a plugin that fails to start makes serve reject with its own error, and close still cleans up", async () => {
  const host = new FakeHost();
  const twice = [
    { service: KV, implementation: grantedKv },
    { service: KV, implementation: grantedKv },
  ];
  await assert.rejects(host.serve(twice), (e: unknown) => e instanceof ConfigurationError && /proto\.KV is served more than once/.test(e.message));
  await assert.rejects(host.close(), ConfigurationError);
  assert.equal(existsSync(host.dir), false);
  await new FakeHost().close(); // the failed one is no longer open
});

test("a granted name that could name another file is refused before anything is delivered", async () => {
  const delivered = process.env.TETHER_SECRETS_DIR;
  for (const name of ["", ".", "..", "a/b", "a\0b"]) {
    assert.throws(() => new FakeHost({ secrets: { [name]: "x" } }), /names must be non-empty, not '\.' or '\.\.', and contain no '\/' or NUL/, JSON.stringify(name));
  }
  assert.equal(process.env.TETHER_SECRETS_DIR, delivered);
  await new FakeHost().close(); // none of them stayed open
});

test("handshake lines are read as a host reads them", () => {
  assert.deepEqual(parseHandshakeLine("1|2|unix|/run/p.sock|grpc|AQID|true\n"), {
    appVersion: 2,
    network: "unix",
    address: "/run/p.sock",
    serverCert: Buffer.from([1, 2, 3]),
    multiplex: true,
  });
  assert.deepEqual(parseHandshakeLine("1|1|tcp|127.0.0.1:1234|grpc|"), {
    appVersion: 1,
    network: "tcp",
    address: "127.0.0.1:1234",
    serverCert: undefined,
    multiplex: undefined,
  });
  for (const [line, why] of [
    ["1|1|unix|/p|grpc", /5 fields, expected 6 or 7/],
    ["2|1|unix|/p|grpc|", /core protocol version "2"/],
    ["1|1|unix|/p|netrpc|", /protocol "netrpc", expected grpc/],
    ["1|1|pipe|/p|grpc|", /network "pipe"/],
    ["1|1|unix|/p|grpc|AQ==", /not unpadded standard base64/],
    ["1|1|unix|/p|grpc||yes", /multiplexing field "yes"/],
  ] as const) {
    assert.throws(() => parseHandshakeLine(line), (e: unknown) => e instanceof TestKitError && why.test(e.message), line);
  }
});

test("the package exports the kit as tether-plugin/testing", async () => {
  const entry = "tether-plugin/testing"; // resolved through package.json's exports, as a user's import is
  const kit = (await import(entry)) as Record<string, unknown>;
  assert.equal(kit.FakeHost, FakeHost, "the same module as dist/src/testing/index.js");
  assert.equal(typeof kit.launchPlugin, "function");
});
