/**
 * `plugin.GRPCBroker`: callbacks between plugin and host, in both of go-plugin's modes.
 *
 * Each side numbers its own broker ids from 1 ({@link GRPCBroker.nextId}); an id travels to
 * the peer inside an app message (the `add_server` field of go-plugin's counter example).
 *
 * - **Default mode.** {@link GRPCBroker.acceptAndServe} listens on a new unix socket next to
 *   the main one, serves gRPC there and announces `ConnInfo{service_id, network, address}` on
 *   the broker stream (`StartStream`, which the host opens right after connecting);
 *   {@link GRPCBroker.dial} waits for the host's announcement of an id and connects.
 *   Announcements nobody dials expire after {@link DEFAULT_UNCLAIMED_TTL_MS}.
 * - **Multiplexed mode** (the host set `PLUGIN_MULTIPLEX_GRPC` and the plugin accepted):
 *   nothing is announced. The dialler knocks (`ConnInfo{service_id, knock{knock}}`), the
 *   serving side acknowledges once it serves the id, and the dialler opens a yamux stream of
 *   the one connection, which the serving side routes to the id.
 *
 * A tether host also serves *host services* to every plugin under {@link HOST_SERVICES_ID},
 * with no id in any message ({@link GRPCBroker.hostServices}).
 *
 * Brokered connections use the same AutoMTLS identities as the main connection: the plugin
 * presents its certificate and accepts only the host's, whichever side is the TLS server.
 *
 * @module
 */

import { randomBytes } from "node:crypto";
import { unlinkSync } from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";

import { DialledChannel, SharedChannel } from "./channel.js";
import { Endpoint, type ServiceEntry } from "./endpoint.js";
import { GrpcBrokerError } from "./errors.js";
import { log } from "./log.js";
import { MuxRouter } from "./mux.js";
import { MuxRelay } from "./relay.js";
import { DIAL_CHANNEL_OPTIONS, dialCredentials, type Pinned } from "./tls.js";
import type { YamuxStream } from "./yamux.js";

/**
 * The broker id under which a tether host serves its host services (`u32::MAX`, an id neither
 * side's counter reaches).
 */
export const HOST_SERVICES_ID = 0xffff_ffff;

/** Set by tether hosts to `served` or `none`: whether they serve host services (go-plugin hosts never set it). */
export const HOST_SERVICES_VAR = "TETHER_HOST_SERVICES";
/** Milliseconds {@link GRPCBroker.dial} waits for the host's announcement or knock answer (go-plugin's 5 s). */
export const DEFAULT_DIAL_TIMEOUT_MS = 5_000;
/** Milliseconds an announced id nobody dialled is kept (go-plugin's 5 s); host services never expire. */
export const DEFAULT_UNCLAIMED_TTL_MS = 5_000;
/** Announcements (and early knocks) kept at most; the oldest is dropped beyond this. */
export const MAX_UNCLAIMED = 1024;
/**
 * Milliseconds between knocks when the host refused one. go-plugin hosts refuse a knock that
 * arrives before their `AcceptAndServe` registered the id ("no listener for id N") and offer
 * no event for "now registered", so the dialler knocks again, until its dial timeout.
 */
export const KNOCK_RETRY_INTERVAL_MS = 25;
/** Milliseconds a served id's calls get to finish when it is stopped. */
export const SERVED_STOP_GRACE_MS = 1_000;
/** Longest unix socket path the kernel accepts (`sun_path` is 108 bytes with the NUL). */
export const MAX_UNIX_PATH_BYTES = 107;

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

/** Options of a {@link GRPCBroker}. */
export interface GrpcBrokerOptions {
  /** {@link DEFAULT_DIAL_TIMEOUT_MS} unless set. */
  dialTimeoutMs?: number;
  /** {@link DEFAULT_UNCLAIMED_TTL_MS} unless set. */
  unclaimedTtlMs?: number;
}

/** What the plugin gives the broker once its main socket is bound. @internal */
export interface BrokerSetup {
  pinned: Pinned | undefined;
  /** Where served ids listen in the default mode (the main socket's directory). */
  socketDir: string;
  /** Set in the multiplexed mode. */
  mux: MuxRouter | undefined;
}

/** An id served with {@link GRPCBroker.acceptAndServe}; {@link Served.stop} ends it. */
export class Served {
  private stopped = false;

  /** @internal */
  constructor(
    /** The broker id (send it to the host in an app message). */
    readonly id: number,
    private readonly endpoint: Endpoint,
    private readonly cleanup: () => void,
    private readonly onStop: (served: Served) => void,
  ) {}

  /** Stops serving (running calls get `graceMs`) and removes the socket. */
  async stop(graceMs: number = SERVED_STOP_GRACE_MS): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.onStop(this);
    this.cleanup();
    await this.endpoint.shutdown(graceMs);
  }
}

interface Arrival {
  info: ConnInfo;
  at: number;
}

/**
 * The plugin's side of go-plugin's `GRPCBroker`. Get it from `Plugin.broker()`; it works while
 * the plugin serves (inside call handlers).
 *
 * ```ts
 * const helper = await broker.dial(request.add_server, AddHelper);  // an id the host sent
 * const host = await broker.hostServices(AddHelper);                 // a tether host's host services
 * const served = await broker.acceptAndServe(broker.nextId(), [{ service: Callback, implementation }]);
 * ```
 */
export class GRPCBroker {
  readonly dialTimeoutMs: number;
  readonly unclaimedTtlMs: number;
  private counter = 0;
  private setup: BrokerSetup | undefined;
  private closed = false;
  private stream: grpc.ServerDuplexStream<ConnInfo, ConnInfo> | undefined;
  /** Every open `StartStream` call (a host may open more than one; each is ended on close). */
  private readonly streams = new Set<grpc.ServerDuplexStream<ConnInfo, ConnInfo>>();
  private streamSeen = false;
  private readonly outbound: ConnInfo[] = [];
  private readonly arrived = new Map<number, Arrival>();
  private readonly arrivalWaiters = new Set<() => void>();
  private readonly served = new Set<Served>();
  /** Dialled connections not closed yet (each closed one removes itself). */
  private readonly channels = new Set<DialledChannel>();
  private hostChannel: Promise<SharedChannel> | undefined;
  // Multiplexed mode.
  private readonly ackWaiters = new Map<number, (knock: Knock) => void>();
  private readonly earlyKnocks = new Map<number, number>();

  constructor(options: GrpcBrokerOptions = {}) {
    this.dialTimeoutMs = options.dialTimeoutMs ?? DEFAULT_DIAL_TIMEOUT_MS;
    this.unclaimedTtlMs = options.unclaimedTtlMs ?? DEFAULT_UNCLAIMED_TTL_MS;
  }

  /** The broker's mode once the plugin serves: `default` or `multiplexed`. */
  get mode(): "default" | "multiplexed" | "not serving" {
    if (this.setup === undefined) return "not serving";
    return this.setup.mux ? "multiplexed" : "default";
  }

  /** A fresh broker id (1, 2, …) for {@link acceptAndServe}. */
  nextId(): number {
    this.counter = this.counter >= 0xffff_fffe ? 1 : this.counter + 1;
    return this.counter;
  }

  /**
   * A client of `Client` (a service's client constructor from `loadProto`; name the client's
   * type as `dial<MyClient>(…)`) for the service
   * the host serves under `id`. In the default mode this waits up to `timeoutMs` (default
   * {@link dialTimeoutMs}) for the host's announcement; in the multiplexed mode for the
   * acknowledgement of its knock. Close the client (`client.close()`) when done with it: that
   * closes its connection (after its running calls) and, in the multiplexed mode, the relay the
   * dial set up — a plugin that dials a fresh id per call keeps nothing per call. Clients
   * still open are closed when the plugin stops.
   *
   * @throws {GrpcBrokerError} naming the id: not serving yet or stopped, nothing announced in
   *   time, a refused knock, or an announced address that is not a local socket.
   */
  async dial<C extends grpc.Client = grpc.Client>(
    id: number,
    Client: ClientConstructor<C> | grpc.ServiceClientConstructor,
    options: { timeoutMs?: number } = {},
  ): Promise<C> {
    const channel = await this.dialChannel(id, DialledChannel, options.timeoutMs);
    return clientOn(channel, Client);
  }

  /**
   * A client of `Client` for the services a tether host serves to all its plugins (its host
   * services), on one connection dialled on first use and then shared: closing one of these
   * clients leaves it open for the others; it is closed when the plugin stops. Fails at once when the
   * host announced that it serves none; go-plugin hosts never serve (nor announce) any, so
   * there it fails after `timeoutMs`.
   */
  async hostServices<C extends grpc.Client = grpc.Client>(
    Client: ClientConstructor<C> | grpc.ServiceClientConstructor,
    options: { timeoutMs?: number } = {},
  ): Promise<C> {
    // tether hosts say at launch whether they serve host services (docs/PROTOCOL.md §10.1).
    if (process.env[HOST_SERVICES_VAR] === "none") {
      throw new GrpcBrokerError(noHostServices(`the host said so at launch, ${HOST_SERVICES_VAR}=none`));
    }
    if (this.hostChannel === undefined) {
      const dialing = this.dialChannel(HOST_SERVICES_ID, SharedChannel, options.timeoutMs);
      this.hostChannel = dialing;
      dialing.catch(() => {
        if (this.hostChannel === dialing) this.hostChannel = undefined;
      });
    }
    return clientOn(await this.hostChannel, Client);
  }

  /**
   * Serves `services` to the host under `id` (send the id to the host in an app message): in
   * the default mode on a new unix socket, announced on the broker stream; in the multiplexed
   * mode on the streams the host knocks for. Same TLS as the main connection.
   */
  async acceptAndServe(id: number, services: readonly ServiceEntry[]): Promise<Served> {
    const setup = this.requireSetup(id);
    const endpoint = new Endpoint(services, setup.pinned);
    if (setup.mux !== undefined) {
      const mux = setup.mux;
      mux.route(id, (stream) => endpoint.accept(stream));
      const served = this.register(new Served(id, endpoint, () => mux.unroute(id), (s) => this.served.delete(s)));
      if (this.earlyKnocks.delete(id)) this.acknowledge(mux, id);
      log("debug", "serving a multiplexed brokered id", { id });
      return served;
    }
    const socketPath = path.join(setup.socketDir, `broker-${randomBytes(8).toString("hex")}.sock`);
    if (Buffer.byteLength(socketPath) > MAX_UNIX_PATH_BYTES) {
      throw new GrpcBrokerError(`broker id ${id}: the socket path ${socketPath} is longer than ${MAX_UNIX_PATH_BYTES} bytes`);
    }
    const listener = net.createServer((socket) => endpoint.accept(socket));
    await new Promise<void>((resolve, reject) => {
      listener.once("error", (e) =>
        reject(new GrpcBrokerError(`broker id ${id}: cannot listen on unix socket ${socketPath}: ${e.message}`)),
      );
      listener.listen(socketPath, () => resolve());
    });
    const cleanup = (): void => {
      listener.close();
      removeQuietly(socketPath);
    };
    const served = this.register(new Served(id, endpoint, cleanup, (s) => this.served.delete(s)));
    this.send({ service_id: id, network: "unix", address: socketPath });
    return served;
  }

  // --- used by the SDK ----------------------------------------------------------------------

  /** Makes the broker usable (once the main socket is bound). @internal */
  connect(setup: BrokerSetup): void {
    this.setup = setup;
  }

  /** Serves `plugin.GRPCBroker/StartStream`. @internal */
  startStreamHandler(): grpc.handleBidiStreamingCall<ConnInfo, ConnInfo> {
    return (call) => {
      this.stream = call;
      this.streams.add(call);
      this.streamSeen = true;
      for (const info of this.outbound.splice(0)) call.write(info);
      call.on("data", (info: ConnInfo) => this.receive(info));
      const ended = (): void => {
        this.streams.delete(call);
        // Messages go on the newest stream still open (another may have ended first).
        if (this.stream === call) this.stream = [...this.streams].pop();
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

  /** Stops every served id, closes dialled connections, fails waiting dials, ends the stream. @internal */
  async close(): Promise<void> {
    this.closed = true;
    for (const wake of [...this.arrivalWaiters]) wake();
    for (const [, answer] of this.ackWaiters) answer({ knock: true, ack: true, error: "the broker has stopped" });
    this.ackWaiters.clear();
    for (const channel of [...this.channels]) channel.end();
    this.stream = undefined;
    for (const stream of [...this.streams]) if (!stream.cancelled) stream.end();
    this.streams.clear();
    await Promise.all([...this.served].map((s) => s.stop(0)));
  }

  /** Records a message from the host. @internal (exported for tests) */
  receive(info: ConnInfo): void {
    const knock = info.knock ?? undefined;
    if (knock !== undefined && (knock.knock || knock.ack)) {
      this.receiveKnock(info.service_id, knock);
      return;
    }
    const now = Date.now();
    this.expire(now);
    if (this.arrived.size >= MAX_UNCLAIMED && !this.arrived.has(info.service_id)) {
      let oldest: number | undefined;
      for (const [id, a] of this.arrived) {
        if (id !== HOST_SERVICES_ID && (oldest === undefined || a.at < (this.arrived.get(oldest)?.at ?? 0))) oldest = id;
      }
      if (oldest !== undefined) this.arrived.delete(oldest);
    }
    this.arrived.set(info.service_id, { info, at: now });
    for (const wake of [...this.arrivalWaiters]) wake();
  }

  // --- internals ----------------------------------------------------------------------------

  private register(served: Served): Served {
    if (this.closed) {
      void served.stop(0);
      throw new GrpcBrokerError(`broker id ${served.id}: the broker has stopped (the plugin is stopping)`);
    }
    this.served.add(served);
    return served;
  }

  private requireSetup(id: number): BrokerSetup {
    if (this.closed) throw new GrpcBrokerError(`broker id ${id}: the broker has stopped (the plugin is stopping)`);
    if (this.setup === undefined) {
      throw new GrpcBrokerError(
        `broker id ${id}: the broker is not connected yet: use it while the plugin serves (inside a call handler)`,
      );
    }
    return this.setup;
  }

  private send(info: ConnInfo): void {
    if (this.stream !== undefined && !this.stream.cancelled) this.stream.write(info);
    else this.outbound.push(info);
  }

  private expire(now: number): void {
    for (const [id, a] of this.arrived) {
      if (id !== HOST_SERVICES_ID && now - a.at >= this.unclaimedTtlMs) this.arrived.delete(id);
    }
    for (const [id, at] of this.earlyKnocks) {
      if (now - at >= this.unclaimedTtlMs) this.earlyKnocks.delete(id);
    }
  }

  /** A connection to `id`, which releases its relay and leaves {@link channels} when it ends. */
  private async dialChannel<T extends DialledChannel>(
    id: number,
    Kind: new (...args: ConstructorParameters<typeof DialledChannel>) => T,
    timeoutMs: number = this.dialTimeoutMs,
  ): Promise<T> {
    const setup = this.requireSetup(id);
    const credentials = setup.pinned ? dialCredentials(setup.pinned) : grpc.credentials.createInsecure();
    let relay: MuxRelay | undefined;
    let target: string;
    if (setup.mux !== undefined) {
      const mux = setup.mux;
      // The first stream is opened before the relay listens, so that a refused or unanswered
      // knock fails the dial; later connections (grpc-js reconnecting) knock again.
      const first = await this.knockAndOpen(mux, id, Date.now() + timeoutMs);
      relay = await MuxRelay.start(mux, id, first, () => this.knockAndOpen(mux, id, Date.now() + this.dialTimeoutMs));
      target = relay.target;
    } else {
      const info = await this.waitForAnnouncement(id, timeoutMs);
      target = dialTarget(id, info);
    }
    const channel: T = new Kind(target, credentials, DIAL_CHANNEL_OPTIONS, () => {
      relay?.stop();
      this.channels.delete(channel);
    });
    if (this.closed) {
      // The plugin began stopping while this dial waited: nothing may outlive the broker.
      channel.end();
      throw new GrpcBrokerError(`broker id ${id}: the broker has stopped (the plugin is stopping)`);
    }
    this.channels.add(channel);
    channel.getConnectivityState(true); // connect now, not at the first call
    return channel;
  }

  private waitForAnnouncement(id: number, timeoutMs: number): Promise<ConnInfo> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        if (this.closed) {
          reject(new GrpcBrokerError(`broker id ${id}: the broker has stopped (the plugin is stopping)`));
          return true;
        }
        this.expire(Date.now());
        const arrival = this.arrived.get(id);
        if (arrival === undefined) return false;
        if (id !== HOST_SERVICES_ID) this.arrived.delete(id); // each announcement is dialled once
        else if (arrival.info.address === "") {
          reject(new GrpcBrokerError(noHostServices("the host announced that it serves none")));
          return true;
        }
        resolve(arrival.info);
        return true;
      };
      if (check()) return;
      const wake = (): void => {
        if (check()) done();
      };
      const timer = setTimeout(() => {
        done();
        const stream = this.streamSeen ? "open" : "not open (the host never started StartStream)";
        reject(
          new GrpcBrokerError(
            id === HOST_SERVICES_ID
              ? noHostServices(`no announcement within ${timeoutMs} ms (broker stream ${stream})`)
              : `broker id ${id}: no connection info from the host within ${timeoutMs} ms (broker stream ${stream}); check that the host serves the id it sent before the plugin dials it`,
          ),
        );
      }, timeoutMs);
      const done = (): void => {
        clearTimeout(timer);
        this.arrivalWaiters.delete(wake);
      };
      this.arrivalWaiters.add(wake);
    });
  }

  // --- multiplexed mode -----------------------------------------------------------------------

  private receiveKnock(id: number, knock: Knock): void {
    const mux = this.setup?.mux;
    if (mux === undefined) {
      log("warn", "ignoring a multiplexing knock: this connection does not use multiplexing", { id });
      return;
    }
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
          mux.open().destroy();
        } catch {
          // the session has ended: nothing is routed any more
        }
      }
      return;
    }
    if (mux.isRouted(id)) {
      this.acknowledge(mux, id);
      return;
    }
    // Not served yet: answered once it is (as go-plugin's examples need), within the same
    // limits as unclaimed announcements; the dialler gives up after its own timeout.
    this.expire(Date.now());
    if (this.earlyKnocks.size >= MAX_UNCLAIMED) {
      log("warn", "too many knocks for ids not served; dropping this one", { id, limit: MAX_UNCLAIMED });
      return;
    }
    this.earlyKnocks.set(id, Date.now());
  }

  private acknowledge(mux: MuxRouter, id: number): void {
    mux.expect(id);
    this.send({ service_id: id, network: "", address: "", knock: { knock: true, ack: true, error: "" } });
  }

  /** Knocks until acknowledged (or the deadline), then opens a stream. */
  private knockAndOpen(mux: MuxRouter, id: number, deadline: number): Promise<YamuxStream> {
    return mux.oneAtATime(async () => {
      for (;;) {
        const remaining = deadline - Date.now();
        const answer = remaining > 0 ? await this.knockOnce(id, remaining) : undefined;
        if (this.closed) throw new GrpcBrokerError(`broker id ${id}: the broker has stopped (the plugin is stopping)`);
        if (answer === undefined) {
          const stream = this.streamSeen ? "open" : "not open (the host never started StartStream)";
          throw new GrpcBrokerError(
            id === HOST_SERVICES_ID
              ? noHostServices(`the host did not acknowledge the knock (broker stream ${stream})`)
              : `broker id ${id}: the host did not acknowledge the knock within the dial timeout (broker stream ${stream}); check that it serves this id`,
          );
        }
        if (answer.error === "") return mux.open();
        if (id === HOST_SERVICES_ID) throw new GrpcBrokerError(noHostServices(`the host refused the knock: ${answer.error}`));
        if (Date.now() + KNOCK_RETRY_INTERVAL_MS >= deadline) {
          throw new GrpcBrokerError(`broker id ${id}: the host refused the knock: ${answer.error}`);
        }
        await new Promise((r) => setTimeout(r, KNOCK_RETRY_INTERVAL_MS));
      }
    });
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
      this.send({ service_id: id, network: "", address: "", knock: { knock: true, ack: false, error: "" } });
    });
  }
}

/** A generated (or loaded) client class. */
export type ClientConstructor<C extends grpc.Client> = new (
  address: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ClientOptions,
) => C;

function clientOn<C extends grpc.Client>(
  channel: grpc.Channel,
  Client: ClientConstructor<C> | grpc.ServiceClientConstructor,
): C {
  // The address and credentials are unused with channelOverride.
  return new (Client as ClientConstructor<C>)("localhost", grpc.credentials.createInsecure(), { channelOverride: channel });
}

function noHostServices(why: string): string {
  return (
    `broker id ${HOST_SERVICES_ID} (host services): the host serves no host services (${why}); ` +
    "go-plugin hosts never do; a tether host does when it registers host_service"
  );
}

/** The grpc-js target for an announced address; only local addresses are dialled. */
export function dialTarget(id: number, info: ConnInfo): string {
  if (info.network === "unix" && path.isAbsolute(info.address)) return `unix:${info.address}`;
  if (info.network === "tcp") {
    const match = /^(?:127\.[0-9.]+|\[::1\]|localhost):([0-9]{1,5})$/.exec(info.address);
    if (match) return info.address.startsWith("localhost") ? `127.0.0.1:${match[1]}` : info.address;
  }
  throw new GrpcBrokerError(
    `broker id ${id}: the host announced ${info.network}:${info.address}, which is not an absolute unix socket path or a loopback TCP address; refusing to dial it`,
  );
}

function removeQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}
