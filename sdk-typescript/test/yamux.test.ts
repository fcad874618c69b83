import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { PassThrough, Duplex } from "node:stream";
import { once } from "node:events";

import { HEADER_LENGTH, INITIAL_STREAM_WINDOW, Session, decodeHeader, encodeHeader, type YamuxStream } from "../src/yamux.js";

/** Two ends of an in-memory connection; `chop` delivers every write one byte at a time. */
function pipePair(chop = false): [Duplex, Duplex] {
  const aToB = new PassThrough();
  const bToA = new PassThrough();
  const end = (readable: PassThrough, writable: PassThrough): Duplex =>
    new Duplex({
      read() {},
      write(chunk: Buffer, _enc, cb) {
        if (chop) for (const byte of chunk) writable.write(Buffer.from([byte]));
        else writable.write(chunk);
        cb();
      },
      final(cb) {
        writable.end();
        cb();
      },
      construct(cb) {
        readable.on("data", (d: Buffer) => this.push(d));
        readable.on("end", () => this.push(null));
        cb();
      },
    });
  return [end(bToA, aToB), end(aToB, bToA)];
}

function sessions(chop = false): { client: Session; server: Session; accepted: YamuxStream[]; next: () => Promise<YamuxStream> } {
  const [a, b] = pipePair(chop);
  const accepted: YamuxStream[] = [];
  const waiters: Array<(s: YamuxStream) => void> = [];
  const server = new Session(b, {
    client: false,
    onStream: (s) => {
      const w = waiters.shift();
      if (w) w(s);
      else accepted.push(s);
    },
  });
  const client = new Session(a, { client: true, onStream: () => assert.fail("the server opened a stream") });
  const next = (): Promise<YamuxStream> =>
    new Promise((resolve) => {
      const s = accepted.shift();
      if (s) resolve(s);
      else waiters.push(resolve);
    });
  return { client, server, accepted, next };
}

/** Everything until the peer's FIN (without destroying the stream, as `for await` would). */
function readAll(stream: YamuxStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  stream.on("data", (chunk: Buffer) => chunks.push(chunk));
  return new Promise((resolve) => stream.once("end", () => resolve(Buffer.concat(chunks))));
}

test("headers round-trip in the wire layout", () => {
  const h = encodeHeader(1, 4, 7, 300);
  assert.equal(h.length, HEADER_LENGTH);
  assert.deepEqual([...h], [0, 1, 0, 4, 0, 0, 0, 7, 0, 0, 1, 44]);
  assert.deepEqual(decodeHeader(h), { version: 0, type: 1, flags: 4, streamId: 7, length: 300 });
});

test("client streams get odd ids, and more than a window flows both ways with half-close", async () => {
  const { client, next } = sessions();
  const payload = randomBytes(INITIAL_STREAM_WINDOW * 4 + 123);
  const stream = client.open();
  assert.equal(stream.id, 1);
  stream.end(payload);
  const accepted = await next();
  const received = await readAll(accepted);
  assert.ok(received.equals(payload), "the server got every byte in order");
  accepted.end(Buffer.from("done"));
  assert.equal((await readAll(stream)).toString(), "done");
  client.close();
});

test("frames split across reads (one byte at a time) lose nothing", async () => {
  const { client, next } = sessions(true);
  const payload = randomBytes(5000);
  client.open().end(payload);
  assert.ok((await readAll(await next())).equals(payload));
  client.close();
});

test("a reset stream errors on the other side, and closing the session ends every stream", async () => {
  const { client, next } = sessions();
  const first = client.open();
  first.write("x");
  const accepted = await next();
  first.destroy();
  const [error] = await once(accepted, "error");
  assert.match((error as Error).message, /reset by the peer/);
  const second = client.open();
  second.write("y");
  const other = await next();
  const closed = once(other, "close");
  client.close();
  await closed;
});

test("pings are answered with the same opaque value", async () => {
  const [a, b] = pipePair();
  new Session(b, { client: false, onStream: () => {} });
  const answer = new Promise<Buffer>((resolve) => a.once("data", (d: Buffer) => resolve(d)));
  a.write(encodeHeader(2, 1, 0, 4242));
  assert.deepEqual(decodeHeader(await answer), { version: 0, type: 2, flags: 2, streamId: 0, length: 4242 });
});
