/**
 * go-plugin's multiplexed broker mode (`PLUGIN_MULTIPLEX_GRPC`), the knocks both ways. Nothing
 * is announced: the dialler knocks (`ConnInfo{service_id, knock{knock}}`), the serving side
 * acknowledges once it serves the id, and the dialler opens a yamux stream of the one
 * connection, which the serving side routes to the id ({@link MuxRouter}).
 *
 * @module
 */

import {
  type BrokerStream,
  HOST_SERVICES_ID,
  type Knock,
  MAX_UNCLAIMED,
  brokerStopped,
  noHostServices,
} from "./broker-stream.js";
import { GrpcBrokerError } from "./errors.js";
import { log } from "./log.js";
import type { MuxRouter } from "./mux.js";
import type { YamuxStream } from "./yamux.js";

/**
 * Milliseconds between knocks when the host refused one. go-plugin hosts refuse a knock that
 * arrives before their `AcceptAndServe` registered the id ("no listener for id N") and offer
 * no event for "now registered", so the dialler knocks again, until its dial timeout.
 */
export const KNOCK_RETRY_INTERVAL_MS = 25;

/** The knocks of one multiplexed connection. @internal */
export class Knocks {
  private readonly ackWaiters = new Map<number, (knock: Knock) => void>();
  /** Knocks for ids not served yet, and when they came. */
  private readonly early = new Map<number, number>();
  private closed = false;

  constructor(
    readonly mux: MuxRouter,
    private readonly stream: BrokerStream,
    private readonly ttlMs: number,
  ) {}

  /** A knock or an acknowledgement from the host. */
  receive(id: number, knock: Knock): void {
    if (knock.ack) {
      const waiting = this.ackWaiters.get(id);
      if (waiting !== undefined) {
        this.ackWaiters.delete(id);
        waiting(knock);
      } else if (!knock.error) {
        // A late acknowledgement (its dial gave up): the host now routes its next inbound
        // stream to this id. Open and drop one at once — before any stream a later knock's
        // acknowledgement lets this side open — so that stale entry is consumed and the next
        // stream is not routed to the wrong id.
        log("debug", "a late knock acknowledgement; opening and dropping a stream for it", { id });
        try {
          this.mux.open().destroy();
        } catch {
          // the session has ended: nothing is routed any more
        }
      }
      return;
    }
    if (this.mux.isRouted(id)) {
      this.acknowledge(id);
      return;
    }
    // Not served yet: answered once it is (as go-plugin's examples need), within the same
    // limits as unclaimed announcements; the dialler gives up after its own timeout.
    this.expire(Date.now());
    if (this.early.size >= MAX_UNCLAIMED) {
      log("warn", "too many knocks for ids not served; dropping this one", { id, limit: MAX_UNCLAIMED });
      return;
    }
    this.early.set(id, Date.now());
  }

  /** `id` is now routed: answers a knock for it that came early. */
  served(id: number): void {
    this.expire(Date.now());
    if (this.early.delete(id)) this.acknowledge(id);
  }

  /** Knocks until acknowledged (or the deadline), then opens a stream. */
  knockAndOpen(id: number, deadline: number): Promise<YamuxStream> {
    return this.mux.oneAtATime(async () => {
      for (;;) {
        const remaining = deadline - Date.now();
        const answer = remaining > 0 ? await this.knockOnce(id, remaining) : undefined;
        if (this.closed) throw brokerStopped(id);
        if (answer === undefined) {
          const stream = this.stream.describe();
          throw new GrpcBrokerError(
            id === HOST_SERVICES_ID
              ? noHostServices(`the host did not acknowledge the knock (broker stream ${stream})`)
              : `broker id ${id}: the host did not acknowledge the knock within the dial timeout (broker stream ${stream}); check that it serves this id`,
          );
        }
        if (answer.error === "") return this.mux.open();
        if (id === HOST_SERVICES_ID) throw new GrpcBrokerError(noHostServices(`the host refused the knock: ${answer.error}`));
        if (Date.now() + KNOCK_RETRY_INTERVAL_MS >= deadline) {
          throw new GrpcBrokerError(`broker id ${id}: the host refused the knock: ${answer.error}`);
        }
        await new Promise((r) => setTimeout(r, KNOCK_RETRY_INTERVAL_MS));
      }
    });
  }

  /** Answers every waiting knock (the broker stops). */
  close(): void {
    this.closed = true;
    for (const [, answer] of this.ackWaiters) answer({ knock: true, ack: true, error: "the broker has stopped" });
    this.ackWaiters.clear();
  }

  private acknowledge(id: number): void {
    this.mux.expect(id);
    this.stream.send({ service_id: id, network: "", address: "", knock: { knock: true, ack: true, error: "" } });
  }

  private knockOnce(id: number, timeoutMs: number): Promise<Knock | undefined> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        if (this.ackWaiters.get(id) === answer) this.ackWaiters.delete(id);
        resolve(undefined);
      }, timeoutMs);
      const answer = (knock: Knock): void => {
        clearTimeout(timer);
        resolve(knock);
      };
      this.ackWaiters.set(id, answer);
      this.stream.send({ service_id: id, network: "", address: "", knock: { knock: true, ack: false, error: "" } });
    });
  }

  private expire(now: number): void {
    for (const [id, at] of this.early) {
      if (now - at >= this.ttlMs) this.early.delete(id);
    }
  }
}
