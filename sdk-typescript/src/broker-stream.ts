/**
 * The broker stream (`plugin.GRPCBroker/StartStream`, which the host opens right after
 * connecting): the messages both broker modes exchange on it, and the stream the plugin's next
 * message goes on.
 *
 * @module
 */

import type * as grpc from "@grpc/grpc-js";

import { GrpcBrokerError } from "./errors.js";

/**
 * The broker id under which a tether host serves its host services (`u32::MAX`, an id neither
 * side's counter reaches).
 */
export const HOST_SERVICES_ID = 0xffff_ffff;
/** Announcements (and early knocks) kept at most; the oldest is dropped beyond this. */
export const MAX_UNCLAIMED = 1024;

/** The message on the broker stream. */
export interface ConnInfo {
  service_id: number;
  network: string;
  address: string;
  knock?: Knock | null;
}

/** go-plugin ≥ 1.6's multiplexing knock. */
export interface Knock {
  knock: boolean;
  ack: boolean;
  error: string;
}

type Call = grpc.ServerDuplexStream<ConnInfo, ConnInfo>;

/** The host's `StartStream` calls and the messages waiting for one. @internal */
export class BrokerStream {
  private current: Call | undefined;
  /** Every open `StartStream` call (a host may open more than one; each is ended on close). */
  private readonly calls = new Set<Call>();
  private seen = false;
  private readonly outbound: ConnInfo[] = [];

  /** Serves `StartStream`: each message from the host goes to `receive`. */
  handler(receive: (info: ConnInfo) => void): grpc.handleBidiStreamingCall<ConnInfo, ConnInfo> {
    return (call) => {
      this.current = call;
      this.calls.add(call);
      this.seen = true;
      for (const info of this.outbound.splice(0)) call.write(info);
      call.on("data", receive);
      const ended = (): void => {
        this.calls.delete(call);
        // Messages go on the newest stream still open (another may have ended first).
        if (this.current === call) this.current = [...this.calls].pop();
      };
      call.on("end", () => {
        ended();
        call.end();
      });
      call.on("cancelled", ended);
      call.on("error", ended);
      call.on("close", ended);
    };
  }

  /** Sends `info` to the host, or keeps it until the host opens the stream. */
  send(info: ConnInfo): void {
    if (this.current !== undefined && !this.current.cancelled) this.current.write(info);
    else this.outbound.push(info);
  }

  /** The stream's state, for a dial's timeout message. */
  describe(): string {
    return this.seen ? "open" : "not open (the host never started StartStream)";
  }

  /** Ends every open call. */
  close(): void {
    this.current = undefined;
    for (const call of [...this.calls]) if (!call.cancelled) call.end();
    this.calls.clear();
  }
}

/** The error of a broker call made while, or after, the plugin stops. */
export function brokerStopped(id: number): GrpcBrokerError {
  return new GrpcBrokerError(`broker id ${id}: the broker has stopped (the plugin is stopping)`);
}

/** The message of a host-services dial to a host that serves none. */
export function noHostServices(why: string): string {
  return (
    `broker id ${HOST_SERVICES_ID} (host services): the host serves no host services (${why}); ` +
    "go-plugin hosts never do; a tether host does when it registers host_service"
  );
}
