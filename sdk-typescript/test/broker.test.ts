import { test } from "node:test";
import assert from "node:assert/strict";
import { PassThrough, Duplex } from "node:stream";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";

import { GRPCBroker, HOST_SERVICES_ID, dialTarget, type ConnInfo } from "../src/broker.js";
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
function multiplexed(): {
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
  const host = new Session(end(bToA, aToB), { client: true, onStream: (s) => hostStreams.push(s) });
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
