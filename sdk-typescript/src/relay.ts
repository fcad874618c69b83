/**
 * The multiplexed broker's dial relay: grpc-js dials unix sockets, not yamux streams, so each
 * multiplexed dial gets a unix socket in a private directory whose every connection is a knock
 * for the id and a yamux stream, relayed byte for byte (TLS, when on, runs end to end inside).
 *
 * A relay lives as long as the channel dialled to it: {@link MuxRelay.stop} (called when that
 * channel closes, or when the broker stops) closes the listener and removes the socket.
 *
 * @module
 */

import { mkdtempSync, rmSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";
import type { Duplex } from "node:stream";

import { log } from "./log.js";
import type { MuxRouter } from "./mux.js";
import type { YamuxStream } from "./yamux.js";

/** A listening relay for one broker id; dial {@link MuxRelay.target}. */
export class MuxRelay {
  private stopped = false;

  private constructor(
    /** The grpc-js target (`unix:<socket>`). */
    readonly target: string,
    private readonly dir: string,
    private readonly listener: net.Server,
    private readonly forgetEnd: () => void,
    private readonly dropFirst: () => void,
  ) {}

  /**
   * Listens for `id`: the first connection is relayed to `first` (the stream of the knock that
   * let the dial succeed), each later one to a stream `open` knocks for.
   */
  static async start(mux: MuxRouter, id: number, first: YamuxStream, open: () => Promise<YamuxStream>): Promise<MuxRelay> {
    let unused: YamuxStream | undefined = first;
    const dir = mkdtempSync(path.join(tmpdir(), "tether-relay-"));
    const listener = net.createServer((conn) => {
      const stream = unused;
      unused = undefined;
      (stream !== undefined ? Promise.resolve(stream) : open()).then(
        (s) => pipeBoth(conn, s),
        (e: Error) => {
          log("debug", "a multiplexed brokered connection failed", { id, error: e.message });
          conn.destroy();
        },
      );
    });
    const forgetEnd = mux.onEnd(() => listener.close());
    const relay = new MuxRelay(`unix:${path.join(dir, "relay.sock")}`, dir, listener, forgetEnd, () => {
      unused?.destroy();
      unused = undefined;
    });
    try {
      await new Promise<void>((resolve, reject) => {
        listener.once("error", reject);
        listener.listen(path.join(dir, "relay.sock"), () => resolve());
      });
    } catch (e) {
      relay.stop();
      throw e;
    }
    return relay;
  }

  /**
   * Stops accepting and removes the socket (once). Relayed connections still open end when
   * their client closes them — grpc-js closes a channel's connections gracefully, after its
   * running calls.
   */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.dropFirst();
    this.forgetEnd();
    this.listener.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Relays `a` and `b` byte for byte both ways; either one's end or error ends both. @internal */
export function pipeBoth(a: Duplex, b: Duplex): void {
  a.pipe(b);
  b.pipe(a);
  const end = (): void => {
    a.destroy();
    b.destroy();
  };
  a.on("error", end);
  b.on("error", end);
  a.on("close", end);
  b.on("close", end);
}
