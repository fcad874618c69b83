/**
 * `plugin.GRPCStdio`: what the plugin writes to `process.stdout` / `process.stderr` after the
 * handshake, streamed to the host.
 *
 * After the handshake both streams' `write` is replaced: while the host streams `StreamStdio`
 * (go-plugin ≥ 1.1 and tether hosts open it right after connecting) output goes there;
 * otherwise — before the host subscribes, after it leaves, or when it falls more than
 * {@link STDIO_BUFFER_LIMIT} bytes behind — it goes to the real file descriptors, which hosts
 * drain too. So output is never lost and a plugin never blocks on a host that does not stream.
 *
 * @module
 */

import type * as grpc from "@grpc/grpc-js";

/** Bytes of output that may wait for the host's stream before output falls back to the real descriptors. */
export const STDIO_BUFFER_LIMIT = 1 << 20;

/** `plugin.StdioData.Channel`. */
export const STDOUT = 1;
export const STDERR = 2;

interface StdioData {
  channel: number;
  data: Buffer;
}

type Write = (chunk: string | Uint8Array, ...rest: unknown[]) => boolean;

/** Routes output between the host's `StreamStdio` call and the real descriptors. */
export class StdioRelay {
  private subscriber: grpc.ServerWritableStream<unknown, StdioData> | undefined;
  private readonly originals = new Map<NodeJS.WriteStream, Write>();

  /** Replaces `process.stdout.write` and `process.stderr.write` (after the handshake line). */
  install(): void {
    for (const [stream, channel] of [
      [process.stdout, STDOUT],
      [process.stderr, STDERR],
    ] as const) {
      const original = stream.write.bind(stream) as Write;
      this.originals.set(stream, original);
      const relay = this;
      stream.write = function (chunk: string | Uint8Array, ...rest: unknown[]): boolean {
        if (relay.send(channel, chunk, rest[0])) {
          const callback = rest.find((r) => typeof r === "function") as (() => void) | undefined;
          if (callback) queueMicrotask(callback);
          return true;
        }
        return original(chunk, ...rest);
      } as typeof stream.write;
    }
  }

  /** Puts the original `write` functions back. */
  uninstall(): void {
    for (const [stream, original] of this.originals) stream.write = original as typeof stream.write;
    this.originals.clear();
  }

  /** Sends `chunk` to the subscriber if there is one with room; false means "write it yourself". */
  send(channel: number, chunk: string | Uint8Array, encoding?: unknown): boolean {
    const call = this.subscriber;
    if (call === undefined || call.cancelled || call.writableLength > STDIO_BUFFER_LIMIT) return false;
    const data =
      typeof chunk === "string"
        ? Buffer.from(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8")
        : Buffer.from(chunk);
    if (data.length === 0) return true;
    call.write({ channel, data });
    return true;
  }

  /** Serves `plugin.GRPCStdio/StreamStdio`: one subscriber at a time. */
  handler(): grpc.handleServerStreamingCall<unknown, StdioData> {
    return (call) => {
      if (this.subscriber !== undefined && !this.subscriber.cancelled) {
        call.emit("error", {
          code: 9, // FAILED_PRECONDITION
          details: "plugin.GRPCStdio is already being streamed to another caller",
        });
        return;
      }
      this.subscriber = call;
      // Headers now, so the host knows output from here on comes through this stream.
      call.sendMetadata(new (call.metadata.constructor as typeof grpc.Metadata)());
      const done = (): void => {
        if (this.subscriber === call) this.subscriber = undefined;
      };
      call.on("cancelled", done);
      call.on("close", done);
      call.on("error", done);
    };
  }

  /** Ends the host's stream (output goes to the real descriptors from now on). */
  close(): void {
    const call = this.subscriber;
    this.subscriber = undefined;
    if (call !== undefined && !call.cancelled) call.end();
  }
}
