/**
 * go-plugin's multiplexed broker transport, plugin side (`PLUGIN_MULTIPLEX_GRPC`): the first
 * connection to the plugin's socket carries a yamux session (the host is the yamux client);
 * the main gRPC connection and every brokered one are streams of it.
 *
 * Which service a stream the host opens belongs to is agreed beforehand on the broker stream:
 * the host knocks for an id, the plugin answers with an acknowledgement once it serves the id
 * and remembers that the next stream is for that id ({@link MuxRouter.expect}). Streams that
 * arrive with no acknowledged knock before them go to the main server.
 *
 * @module
 */

import type { Duplex } from "node:stream";

import { Session, type YamuxStream } from "./yamux.js";
import { log } from "./log.js";

/** Routes the host's streams and opens the plugin's. */
export class MuxRouter {
  private session: Session | undefined;
  private readonly routes = new Map<number, (stream: YamuxStream) => void>();
  private readonly knocked: number[] = [];
  private dialQueue: Promise<void> = Promise.resolve();
  private readonly endListeners = new Set<() => void>();

  constructor(private readonly main: (stream: YamuxStream) => void) {}

  /** Starts the session over the host's (first) connection. */
  start(conn: Duplex): void {
    this.session = new Session(conn, { client: false, onStream: (s) => this.deliver(s) });
    this.session.onClose((error) => {
      log("debug", "the multiplexed connection ended", error ? { error: error.message } : {});
      this.routes.clear();
      this.knocked.length = 0;
      const listeners = [...this.endListeners];
      this.endListeners.clear();
      for (const listener of listeners) listener();
    });
  }

  /** Whether the session has started. */
  get started(): boolean {
    return this.session !== undefined;
  }

  /** Calls `listener` when the session ends, unless the returned function is called first. */
  onEnd(listener: () => void): () => void {
    this.endListeners.add(listener);
    return () => this.endListeners.delete(listener);
  }

  /** Streams knocked for `id` go to `route` until {@link unroute}. */
  route(id: number, route: (stream: YamuxStream) => void): void {
    this.routes.set(id, route);
  }

  unroute(id: number): void {
    this.routes.delete(id);
  }

  isRouted(id: number): boolean {
    return this.routes.has(id);
  }

  /** The next stream the host opens is for `id` (its knock is about to be acknowledged). */
  expect(id: number): void {
    this.knocked.push(id);
  }

  /** Opens a stream to the host (after an acknowledged knock). */
  open(): YamuxStream {
    if (this.session === undefined) throw new Error("the host has not connected yet");
    return this.session.open();
  }

  /**
   * Runs `step` (knock, then open) after every earlier one: the host routes the streams this
   * side opens in knock order, so knock-and-open is one step at a time.
   */
  oneAtATime<T>(step: () => Promise<T>): Promise<T> {
    const result = this.dialQueue.then(step);
    this.dialQueue = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  /** Ends the session. */
  close(): void {
    this.session?.close();
  }

  private deliver(stream: YamuxStream): void {
    const id = this.knocked.shift();
    if (id === undefined) {
      this.main(stream);
      return;
    }
    const route = this.routes.get(id);
    if (route === undefined) {
      log("debug", "a multiplexed stream arrived for a broker id no longer served; closed", { id });
      stream.destroy();
      return;
    }
    route(stream);
  }
}
