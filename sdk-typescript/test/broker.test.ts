import { test } from "node:test";
import assert from "node:assert/strict";
import { PassThrough, Duplex } from "node:stream";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";

import { dialTarget } from "../src/announcements.js";
import { GRPCBroker } from "../src/broker.js";
import { HOST_SERVICES_ID, type ConnInfo } from "../src/broker-stream.js";
import { GrpcBrokerError } from "../src/errors.js";
import { MuxRouter } from "../src/mux.js";
import { Session, type YamuxStream } from "../src/yamux.js";
import { internalProtos } from "../src/protos.js";

/** Polls `condition` (state another side changes without an event to await) for up to 2 s. */
async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 2_000;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

function connected(broker: GRPCBroker, mux?: MuxRouter): string {
  const dir = mkdtempSync(path.join(tmpdir(), "tether-broker-test-"));
  broker.connect({ pinned: undefined, socketDir: dir, mux });
  return dir;
}

test("host services fail at once when the host announced it serves none", async () => {
  const broker = new GRPCBroker({ dialTimeoutMs: 10_000 });
  const dir = connected(broker);
  broker.receive({ service_id: HOST_SERVICES_ID, network: "", address: "" });
  const started = Date.now();
  await assert.rejects(broker.hostServices(internalProtos().health), (e: unknown) => {
    assert.ok(e instanceof GrpcBrokerError);
    assert.match(e.message, /serves no host services \(the host announced that it serves none\)/);
    return true;
  });
  assert.ok(Date.now() - started < 1000, "failed fast");
  await broker.close();
  rmSync(dir, { recursive: true, force: true });
});

test("host services fail at once when the host said at launch that it serves none", async () => {
  const broker = new GRPCBroker({ dialTimeoutMs: 10_000 });
  const dir = connected(broker);
  process.env.TETHER_HOST_SERVICES = "none";
  const started = Date.now();
  try {
    await assert.rejects(broker.hostServices(internalProtos().health), /serves no host services \(the host said so at launch, TETHER_HOST_SERVICES=none\)/);
  } finally {
    delete process.env.TETHER_HOST_SERVICES;
  }
  assert.ok(Date.now() - started < 1000, "failed fast");
  await broker.close();
  rmSync(dir, { recursive: true, force: true });
});

test("a dial names the id and the broker stream's state when nothing is announced in time", async () => {
  const broker = new GRPCBroker();
  const dir = connected(broker);
  await assert.rejects(broker.dial(7, internalProtos().health, { timeoutMs: 50 }), /broker id 7: no connection info from the host within 50 ms \(broker stream not open/);
  await broker.close();
  rmSync(dir, { recursive: true, force: true });
});

test("unclaimed announcements expire; each announcement is dialled once", async () => {
  const broker = new GRPCBroker({ unclaimedTtlMs: 30 });
  const dir = connected(broker);
  const info: ConnInfo = { service_id: 3, network: "unix", address: path.join(dir, "x.sock") };
  broker.receive(info);
  await new Promise((r) => setTimeout(r, 60));
  await assert.rejects(broker.dial(3, internalProtos().health, { timeoutMs: 20 }), /no connection info/);
  broker.receive(info);
  const client = await broker.dial(3, internalProtos().health, { timeoutMs: 20 });
  client.close();
  await assert.rejects(broker.dial(3, internalProtos().health, { timeoutMs: 20 }), /no connection info/);
  await broker.close();
  rmSync(dir, { recursive: true, force: true });
});

test("only local addresses are dialled", () => {
  assert.equal(dialTarget(1, { service_id: 1, network: "unix", address: "/run/a.sock" }), "unix:/run/a.sock");
  assert.equal(dialTarget(1, { service_id: 1, network: "tcp", address: "127.0.0.1:1234" }), "127.0.0.1:1234");
  assert.throws(() => dialTarget(1, { service_id: 1, network: "tcp", address: "10.0.0.1:1234" }), /refusing to dial/);
  assert.throws(() => dialTarget(1, { service_id: 1, network: "unix", address: "relative.sock" }), /refusing to dial/);
});

/** A plugin-side broker in multiplexed mode, and the host's yamux session and broker stream. */
function multiplexed(onHostStream: (stream: YamuxStream) => void = () => undefined): {
  broker: GRPCBroker;
  hostStreams: YamuxStream[];
  sent: ConnInfo[];
  dir: string;
  host: Session;
  mux: MuxRouter;
} {
  const aToB = new PassThrough();
  const bToA = new PassThrough();
  const end = (readable: PassThrough, writable: PassThrough): Duplex =>
    new Duplex({
      read() {},
      write(chunk, _e, cb) {
        writable.write(chunk);
        cb();
      },
      construct(cb) {
        readable.on("data", (d) => this.push(d));
        cb();
      },
    });
  const hostStreams: YamuxStream[] = [];
  const host = new Session(end(bToA, aToB), { client: true, onStream: (s) => {
    hostStreams.push(s);
    onHostStream(s);
  } });
  const mux = new MuxRouter(() => assert.fail("no main connection in this test"));
  mux.start(end(aToB, bToA));
  const broker = new GRPCBroker({ dialTimeoutMs: 200 });
  const dir = connected(broker, mux);
  // A fake StartStream call that records what the plugin sends.
  const sent: ConnInfo[] = [];
  const call = Object.assign(new PassThrough({ objectMode: true }), { cancelled: false, end: () => undefined });
  call.on("data", (info: ConnInfo) => sent.push(info));
  broker.startStreamHandler()(call as never);
  return { broker, hostStreams, sent, dir, host, mux };
}

test("a late knock acknowledgement opens and drops a stream, so the next dial's stream reaches its own id", async () => {
  const { broker, hostStreams, sent, dir, host, mux } = multiplexed();
  // The dial for id 4 gives up: the host never answers in time.
  await assert.rejects(broker.dial(4, internalProtos().health, { timeoutMs: 30 }), /did not acknowledge the knock/);
  assert.deepEqual(sent.map((i) => [i.service_id, i.knock?.knock, i.knock?.ack]), [[4, true, false]]);
  // Its acknowledgement arrives late: the host (like go-plugin's) now hands the next stream it
  // accepts to id 4's listener.
  broker.receive({ service_id: 4, network: "", address: "", knock: { knock: true, ack: true, error: "" } });
  // The next dial, for id 5, is acknowledged in time.
  const dialing = broker.dial(5, internalProtos().health, { timeoutMs: 1000 });
  await until(() => sent.length >= 2, "the knock for id 5");
  assert.deepEqual(sent.map((i) => [i.service_id, i.knock?.knock, i.knock?.ack]), [
    [4, true, false],
    [5, true, false],
  ]);
  broker.receive({ service_id: 5, network: "", address: "", knock: { knock: true, ack: true, error: "" } });
  const client = await dialing;
  await until(() => hostStreams.length >= 2, "two streams at the host (the dropped one, then id 5's)");
  // The host routes streams in acknowledgement order: the first to id 4, the second to id 5.
  const [for4, for5] = hostStreams as [YamuxStream, YamuxStream];
  if (!for4.destroyed) await new Promise<void>((resolve) => for4.once("close", () => resolve()));
  assert.ok(for4.destroyed, "the stream for the late acknowledgement was dropped: nothing is served on it");
  // id 5's stream is the one its dial's gRPC connection runs on (HTTP/2 preface first).
  const first = await new Promise<Buffer>((resolve) => for5.once("data", resolve));
  assert.equal(first.subarray(0, 3).toString(), "PRI");
  client.close();
  await broker.close();
  mux.close();
  host.close();
  rmSync(dir, { recursive: true, force: true });
});

test("a refused knock is retried until the host serves the id (go-plugin's 'no listener' race)", async () => {
  const { broker, hostStreams, sent, dir, host } = multiplexed();
  const dialing = broker.dial(5, internalProtos().health, { timeoutMs: 1000 });
  const answer = (error: string): void =>
    broker.receive({ service_id: 5, network: "", address: "", knock: { knock: true, ack: true, error } });
  await new Promise((r) => setImmediate(r));
  answer("no listener for id 5");
  while (sent.length < 2) await new Promise((r) => setTimeout(r, 5));
  answer("");
  const client = await dialing;
  assert.equal(hostStreams.length, 1, "one stream, opened after the accepted knock");
  client.close();
  await broker.close();
  host.close();
  rmSync(dir, { recursive: true, force: true });
});

test("a knock for an id not yet served is answered once it is", async () => {
  const { broker, sent, dir, host } = multiplexed();
  broker.receive({ service_id: 9, network: "", address: "", knock: { knock: true, ack: false, error: "" } });
  assert.equal(sent.length, 0);
  const served = await broker.acceptAndServe(9, []);
  assert.deepEqual(sent.map((i) => [i.service_id, i.knock?.ack, i.knock?.error]), [[9, true, ""]]);
  await served.stop(0);
  await broker.close();
  host.close();
  rmSync(dir, { recursive: true, force: true });
});

test("when a second StartStream ends, announcements still reach the host on the first", async () => {
  const broker = new GRPCBroker();
  const dir = connected(broker);
  const fakeCall = (): { call: PassThrough & { cancelled: boolean }; sent: ConnInfo[]; ended: () => boolean } => {
    const sent: ConnInfo[] = [];
    let ended = false;
    const call = Object.assign(new PassThrough({ objectMode: true }), { cancelled: false });
    call.write = ((info: ConnInfo) => {
      sent.push(info);
      return true;
    }) as typeof call.write;
    call.end = (() => {
      ended = true;
      return call;
    }) as typeof call.end;
    broker.startStreamHandler()(call as never);
    return { call, sent, ended: () => ended };
  };
  const first = fakeCall();
  const second = fakeCall();
  second.call.emit("end"); // the host (e.g. a conformance probe) ends the second stream
  const served = await broker.acceptAndServe(broker.nextId(), []);
  assert.equal(first.sent.length, 1, "announced on the stream still open");
  assert.equal(first.sent[0]?.service_id, served.id);
  await served.stop(0);
  await broker.close();
  assert.ok(first.ended(), "closing the broker ends every open StartStream");
  rmSync(dir, { recursive: true, force: true });
});

/** grpc-js's health service answering SERVING, standing in for a host's AddHelper. */
function healthServer(): grpc.Server {
  const server = new grpc.Server();
  server.addService(internalProtos().health.service, {
    Check: (_call: unknown, done: grpc.sendUnaryData<{ status: number }>) => done(null, { status: 1 }),
  });
  return server;
}

function check(client: grpc.Client): Promise<unknown> {
  const health = client as grpc.Client & {
    Check(request: object, done: (error: grpc.ServiceError | null, response?: unknown) => void): void;
  };
  return new Promise((resolve, reject) => health.Check({}, (e, r) => (e ? reject(e) : resolve(r))));
}

/** What the broker holds for dials not yet closed (a private field: the state under test). */
function held(broker: GRPCBroker): number {
  return (broker as unknown as { channels: Set<unknown> }).channels.size;
}

/** Open unix socket handles of this process (listeners and connections). */
function pipes(): number {
  return process.getActiveResourcesInfo().filter((r) => r === "PipeWrap").length;
}

test("closing a dialled client ends the relay its dial set up, and the broker forgets it (multiplexed mode)", async () => {
  // go-plugin's examples/bidirectional dials a fresh id per call and closes the client after
  // it: a long-running plugin must not keep a relay socket and listener per call.
  const server = healthServer();
  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const { broker, sent, dir, host, mux } = multiplexed((s) => injector.injectConnection(s));
  const before = pipes();
  try {
    for (let id = 1; id <= 20; id++) {
      const dialing = broker.dial(id, internalProtos().health, { timeoutMs: 1000 });
      await until(() => sent.length === id, `the knock for id ${id}`);
      broker.receive({ service_id: id, network: "", address: "", knock: { knock: true, ack: true, error: "" } });
      const client = await dialing;
      assert.deepEqual(await check(client), { status: 1 });
      const relaySocket = client.getChannel().getTarget().replace(/^unix:/, "");
      assert.ok(existsSync(relaySocket), `id ${id}: the relay's socket exists while its client is open`);
      client.close();
      assert.ok(!existsSync(path.dirname(relaySocket)), `id ${id}: the relay's socket outlived its client`);
    }
    assert.equal(held(broker), 0, "the broker still holds closed clients' channels");
    const endListeners = (mux as unknown as { endListeners: Set<unknown> }).endListeners;
    assert.equal(endListeners.size, 0, "the multiplexed session still holds closed relays' end listeners");
    await until(() => pipes() <= before, "every relay listener and relayed connection to end");
  } finally {
    await broker.close();
    mux.close();
    host.close();
    server.forceShutdown();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("closing a dialled client makes the broker forget its channel (default mode)", async () => {
  const broker = new GRPCBroker();
  const dir = connected(broker);
  const server = healthServer();
  const socket = path.join(dir, "host.sock");
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())),
  );
  try {
    for (let id = 1; id <= 20; id++) {
      broker.receive({ service_id: id, network: "unix", address: socket });
      const client = await broker.dial(id, internalProtos().health, { timeoutMs: 1000 });
      assert.deepEqual(await check(client), { status: 1 });
      client.close();
    }
    assert.equal(held(broker), 0, "the broker still holds closed clients' channels");
  } finally {
    await broker.close();
    server.forceShutdown();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("closing a host-services client leaves the shared connection open for the next one", async () => {
  const server = healthServer();
  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const { broker, sent, dir, host, mux } = multiplexed((s) => injector.injectConnection(s));
  const ack = (): void =>
    broker.receive({ service_id: HOST_SERVICES_ID, network: "", address: "", knock: { knock: true, ack: true, error: "" } });
  try {
    const dialing = broker.hostServices(internalProtos().health, { timeoutMs: 1000 });
    await until(() => sent.length === 1, "the knock for the host services");
    ack();
    const first = await dialing;
    assert.deepEqual(await check(first), { status: 1 });
    first.close();
    const second = await broker.hostServices(internalProtos().health, { timeoutMs: 1000 });
    assert.deepEqual(await check(second), { status: 1 });
    assert.equal(sent.length, 1, "one knock: the connection is shared, not dialled again");
    assert.equal(held(broker), 1, "the broker holds the shared connection until it closes");
  } finally {
    await broker.close();
    mux.close();
    host.close();
    server.forceShutdown();
    rmSync(dir, { recursive: true, force: true });
  }
  assert.equal(held(broker), 0);
});

test("closing the broker ends the relays of clients still open", async () => {
  const { broker, sent, dir, host, mux } = multiplexed();
  try {
    const dialing = broker.dial(3, internalProtos().health, { timeoutMs: 1000 });
    await until(() => sent.length === 1, "the knock for id 3");
    broker.receive({ service_id: 3, network: "", address: "", knock: { knock: true, ack: true, error: "" } });
    const client = await dialing;
    const relaySocket = client.getChannel().getTarget().replace(/^unix:/, "");
    assert.ok(existsSync(relaySocket));
    await broker.close();
    assert.ok(!existsSync(path.dirname(relaySocket)), "the relay's socket outlived the broker");
    assert.equal(held(broker), 0);
    assert.equal(client.getChannel().getConnectivityState(false), grpc.connectivityState.SHUTDOWN);
  } finally {
    await broker.close();
    mux.close();
    host.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
