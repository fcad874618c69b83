/**
 * The subset of yamux (hashicorp/yamux's `spec.md`) that go-plugin's multiplexed broker
 * needs: one session over one connection, streams opened by either side, per-stream flow
 * control, half-close, reset, ping answers and go-away.
 *
 * The npm candidates were checked first: `yamux-js` loses data when a frame arrives split
 * across reads and never ends a stream on FIN; the libp2p implementations are built around
 * libp2p's stream interfaces. This one is small, speaks the same wire format as hashicorp/yamux
 * (go-plugin) and tokio-yamux (tether hosts), and its streams are ordinary Node `Duplex`es, so
 * `tls.TLSSocket` and grpc-js can run over them.
 *
 * @module
 */

import { Duplex } from "node:stream";

/** yamux protocol version (the only one). */
export const YAMUX_VERSION = 0;
/** Header length in bytes: version, type, flags (2), stream id (4), length (4). */
export const HEADER_LENGTH = 12;
/** Initial receive window of every stream (the spec's and go-plugin's 256 KiB). */
export const INITIAL_STREAM_WINDOW = 256 * 1024;
/** Largest data frame this side sends. */
export const MAX_DATA_FRAME = 64 * 1024;
/** Streams the peer may open that nobody has accepted yet (hashicorp/yamux's backlog). */
export const ACCEPT_BACKLOG = 256;

const TYPE_DATA = 0;
const TYPE_WINDOW_UPDATE = 1;
const TYPE_PING = 2;
const TYPE_GO_AWAY = 3;

const FLAG_SYN = 1;
const FLAG_ACK = 2;
const FLAG_FIN = 4;
const FLAG_RST = 8;

const GO_AWAY_NORMAL = 0;
const GO_AWAY_PROTOCOL_ERROR = 1;

/** A decoded frame header. */
export interface Header {
  version: number;
  type: number;
  flags: number;
  streamId: number;
  length: number;
}

/** Encodes a frame header. */
export function encodeHeader(type: number, flags: number, streamId: number, length: number): Buffer {
  const b = Buffer.alloc(HEADER_LENGTH);
  b.writeUInt8(YAMUX_VERSION, 0);
  b.writeUInt8(type, 1);
  b.writeUInt16BE(flags, 2);
  b.writeUInt32BE(streamId, 4);
  b.writeUInt32BE(length, 8);
  return b;
}

/** Decodes a frame header from the first {@link HEADER_LENGTH} bytes of `b`. */
export function decodeHeader(b: Buffer): Header {
  return {
    version: b.readUInt8(0),
    type: b.readUInt8(1),
    flags: b.readUInt16BE(2),
    streamId: b.readUInt32BE(4),
    length: b.readUInt32BE(8),
  };
}

/** Options of a {@link Session}. */
export interface SessionOptions {
  /** The yamux client opens odd stream ids (go-plugin's host), the server even ones. */
  client: boolean;
  /** Called with each stream the peer opens. */
  onStream: (stream: YamuxStream) => void;
}

/** One yamux session over `conn`. Ends when `conn` ends, on a protocol error, or on {@link close}. */
export class Session {
  private readonly streams = new Map<number, YamuxStream>();
  private nextId: number;
  private buffered: Buffer[] = [];
  private bufferedLength = 0;
  private header: Header | undefined;
  private closed = false;
  private remoteGoAway = false;
  private readonly closeListeners: Array<(error?: Error) => void> = [];

  constructor(
    private readonly conn: Duplex,
    private readonly options: SessionOptions,
  ) {
    this.nextId = options.client ? 1 : 2;
    conn.on("data", (chunk: Buffer) => this.receive(chunk));
    conn.on("end", () => this.close());
    conn.on("close", () => this.close());
    conn.on("error", (e: Error) => this.close(e));
  }

  /** Whether the session has ended. */
  get isClosed(): boolean {
    return this.closed;
  }

  /** Calls `listener` once when the session ends. */
  onClose(listener: (error?: Error) => void): void {
    if (this.closed) queueMicrotask(() => listener());
    else this.closeListeners.push(listener);
  }

  /** Opens a stream; data may be written at once (the peer's window starts at 256 KiB). */
  open(): YamuxStream {
    if (this.closed) throw new Error("the multiplexed connection has ended");
    if (this.remoteGoAway) throw new Error("the peer is closing the multiplexed connection (go away)");
    const id = this.nextId;
    this.nextId += 2;
    const stream = new YamuxStream(this, id, "syn-sent");
    this.streams.set(id, stream);
    this.send(encodeHeader(TYPE_WINDOW_UPDATE, FLAG_SYN, id, 0));
    return stream;
  }

  /** Sends go-away, ends every stream and the connection. */
  close(error?: Error): void {
    if (this.closed) return;
    this.closed = true;
    if (this.conn.writable) {
      this.conn.write(encodeHeader(TYPE_GO_AWAY, 0, 0, error ? GO_AWAY_PROTOCOL_ERROR : GO_AWAY_NORMAL));
      this.conn.end();
    }
    this.conn.destroy();
    for (const stream of [...this.streams.values()]) stream.sessionEnded();
    this.streams.clear();
    for (const listener of this.closeListeners.splice(0)) listener(error);
  }

  /** @internal */
  send(frame: Buffer, payload?: Buffer): void {
    if (this.closed || !this.conn.writable) return;
    this.conn.write(payload ? Buffer.concat([frame, payload]) : frame);
  }

  /** @internal */
  forget(id: number): void {
    this.streams.delete(id);
  }

  private receive(chunk: Buffer): void {
    this.buffered.push(chunk);
    this.bufferedLength += chunk.length;
    while (!this.closed) {
      if (this.header === undefined) {
        if (this.bufferedLength < HEADER_LENGTH) return;
        this.header = decodeHeader(this.take(HEADER_LENGTH));
        if (this.header.version !== YAMUX_VERSION) {
          return this.close(new Error(`yamux: unsupported protocol version ${this.header.version}`));
        }
      }
      const header = this.header;
      const payloadLength = header.type === TYPE_DATA ? header.length : 0;
      if (this.bufferedLength < payloadLength) return;
      this.header = undefined;
      this.handle(header, payloadLength > 0 ? this.take(payloadLength) : Buffer.alloc(0));
    }
  }

  private take(n: number): Buffer {
    const all = this.buffered.length === 1 ? (this.buffered[0] as Buffer) : Buffer.concat(this.buffered, this.bufferedLength);
    const head = all.subarray(0, n);
    const rest = all.subarray(n);
    this.buffered = rest.length > 0 ? [rest] : [];
    this.bufferedLength = rest.length;
    return head;
  }

  private handle(h: Header, payload: Buffer): void {
    switch (h.type) {
      case TYPE_PING:
        if (h.flags & FLAG_SYN) this.send(encodeHeader(TYPE_PING, FLAG_ACK, 0, h.length));
        return;
      case TYPE_GO_AWAY:
        this.remoteGoAway = true;
        if (h.length !== GO_AWAY_NORMAL) this.close(new Error(`yamux: the peer went away with error code ${h.length}`));
        return;
      case TYPE_DATA:
      case TYPE_WINDOW_UPDATE:
        return this.handleStreamFrame(h, payload);
      default:
        return this.close(new Error(`yamux: unknown frame type ${h.type}`));
    }
  }

  private handleStreamFrame(h: Header, payload: Buffer): void {
    let stream = this.streams.get(h.streamId);
    if (h.flags & FLAG_SYN) {
      if (stream !== undefined) return this.close(new Error(`yamux: duplicate stream id ${h.streamId}`));
      if (this.streams.size >= ACCEPT_BACKLOG) {
        this.send(encodeHeader(TYPE_WINDOW_UPDATE, FLAG_RST, h.streamId, 0));
        return;
      }
      stream = new YamuxStream(this, h.streamId, "syn-received");
      this.streams.set(h.streamId, stream);
      // Acknowledge at once (hashicorp/yamux waits at most 75 s for it).
      this.send(encodeHeader(TYPE_WINDOW_UPDATE, FLAG_ACK, h.streamId, 0));
      stream.established();
      this.options.onStream(stream);
    }
    if (stream === undefined) return; // a stream we reset or forgot: drop its frames
    if (h.type === TYPE_WINDOW_UPDATE) stream.grow(h.length);
    else if (!stream.deliver(payload)) {
      return this.close(new Error(`yamux: stream ${h.streamId} exceeded its receive window`));
    }
    if (h.flags & FLAG_ACK) stream.established();
    if (h.flags & FLAG_FIN) stream.remoteFinished();
    if (h.flags & FLAG_RST) stream.remoteReset();
  }
}

type State = "syn-sent" | "syn-received" | "established";

/** A yamux stream: a Node `Duplex` with yamux flow control. */
export class YamuxStream extends Duplex {
  private sendWindow = INITIAL_STREAM_WINDOW;
  private recvWindow = INITIAL_STREAM_WINDOW;
  private credit = 0;
  private waitingForWindow: (() => void) | undefined;
  private finSent = false;
  private finReceived = false;
  private reset = false;

  constructor(
    private readonly session: Session,
    /** The stream id. */
    readonly id: number,
    private state: State,
  ) {
    super({ allowHalfOpen: true });
    // A reset or an ended session destroys the stream with an error; whoever consumes the
    // stream (TLS, grpc-js, a relay) sees it through its own listener. Without any, it must
    // not end the process.
    this.on("error", () => {});
  }

  /** @internal the peer acknowledged (or we accepted) the stream. */
  established(): void {
    this.state = "established";
  }

  /** Whether the peer has acknowledged the stream. */
  get isEstablished(): boolean {
    return this.state === "established";
  }

  /** @internal */
  grow(delta: number): void {
    this.sendWindow += delta;
    const waiting = this.waitingForWindow;
    this.waitingForWindow = undefined;
    waiting?.();
  }

  /** @internal false when the peer overran the window (a protocol error). */
  deliver(data: Buffer): boolean {
    if (data.length === 0) return true;
    if (data.length > this.recvWindow) return false;
    this.recvWindow -= data.length;
    this.credit += data.length;
    if (this.push(data)) this.giveCredit();
    return true;
  }

  /** @internal */
  remoteFinished(): void {
    if (this.finReceived) return;
    this.finReceived = true;
    this.push(null);
    this.maybeForget();
  }

  /** @internal */
  remoteReset(): void {
    this.reset = true;
    this.session.forget(this.id);
    this.destroy(new Error(`yamux: stream ${this.id} was reset by the peer`));
  }

  /** @internal */
  sessionEnded(): void {
    this.reset = true;
    if (!this.finReceived) this.push(null);
    this.destroy();
  }

  override _read(): void {
    this.giveCredit();
  }

  private giveCredit(): void {
    // Like hashicorp/yamux: credit the peer once half a window has been consumed.
    if (this.credit >= INITIAL_STREAM_WINDOW / 2 || (this.credit > 0 && this.recvWindow === 0)) {
      const delta = this.credit;
      this.credit = 0;
      this.recvWindow += delta;
      this.session.send(encodeHeader(TYPE_WINDOW_UPDATE, 0, this.id, delta));
    }
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.writeFrom(chunk, callback);
  }

  private writeFrom(chunk: Buffer, callback: (error?: Error | null) => void): void {
    let offset = 0;
    const next = (): void => {
      while (offset < chunk.length) {
        if (this.reset || this.session.isClosed) return callback(new Error(`yamux: stream ${this.id} is closed`));
        if (this.sendWindow === 0) {
          this.waitingForWindow = next;
          return;
        }
        const n = Math.min(this.sendWindow, chunk.length - offset, MAX_DATA_FRAME);
        this.sendWindow -= n;
        this.session.send(encodeHeader(TYPE_DATA, 0, this.id, n), chunk.subarray(offset, offset + n));
        offset += n;
      }
      callback();
    };
    next();
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.sendFin();
    callback();
  }

  private sendFin(): void {
    if (this.finSent || this.reset) return;
    this.finSent = true;
    this.session.send(encodeHeader(TYPE_WINDOW_UPDATE, FLAG_FIN, this.id, 0));
    this.maybeForget();
  }

  private maybeForget(): void {
    if (this.finSent && this.finReceived) this.session.forget(this.id);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (!this.reset && !(this.finSent && this.finReceived)) {
      // Closed before both sides finished: reset, so the peer does not wait for a FIN.
      this.reset = true;
      this.session.send(encodeHeader(TYPE_WINDOW_UPDATE, FLAG_RST, this.id, 0));
    }
    this.session.forget(this.id);
    const waiting = this.waitingForWindow;
    this.waitingForWindow = undefined;
    waiting?.();
    callback(error);
  }
}
