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
 *   Announcements nobody dials expire after {@link DEFAULT_UNCLAIMED_TTL_MS} (`announcements.ts`).
 * - **Multiplexed mode** (the host set `PLUGIN_MULTIPLEX_GRPC` and the plugin accepted):
 *   nothing is announced. The dialler knocks (`ConnInfo{service_id, knock{knock}}`), the
 *   serving side acknowledges once it serves the id, and the dialler opens a yamux stream of
 *   the one connection, which the serving side routes to the id (`knocks.ts`, `mux.ts`,
 *   `relay.ts`).
 *
 * The broker stream's messages and the stream they go on are `broker-stream.ts`; this file is
 * the broker's API and its lifecycle.
 *
 * A tether host also serves *host services* to every plugin under {@link HOST_SERVICES_ID},
 * with no id in any message ({@link GRPCBroker.hostServices}); a tether catalog host relays
 * calls to other plugins of its catalog when granted ({@link GRPCBroker.openPlugin},
 * `plugins.ts`).
 *
 * Brokered connections use the same AutoMTLS identities as the main connection: the plugin
 * presents its certificate and accepts only the host's, whichever side is the TLS server.
 *
 * @module
 */

import * as grpc from "@grpc/grpc-js";

import { Announcements, dialTarget, listenForId } from "./announcements.js";
import { BrokerStream, type ConnInfo, HOST_SERVICES_ID, brokerStopped, noHostServices } from "./broker-stream.js";
import { DialledChannel, SharedChannel } from "./channel.js";
import { Endpoint, type ServiceEntry } from "./endpoint.js";
import { GrpcBrokerError } from "./errors.js";
import { Knocks } from "./knocks.js";
import { log } from "./log.js";
import type { MuxRouter } from "./mux.js";
import { openBrokerId } from "./plugins.js";
import { internalProtos } from "./protos.js";
import { MuxRelay } from "./relay.js";
import { DIAL_CHANNEL_OPTIONS, dialCredentials, type Pinned } from "./tls.js";
import type { BrokerTracing } from "./trace-settings.js";

/** Set by tether hosts to `served` or `none`: whether they serve host services (go-plugin hosts never set it). */
export const HOST_SERVICES_VAR = "TETHER_HOST_SERVICES";
/** Milliseconds {@link GRPCBroker.dial} waits for the host's announcement or knock answer (go-plugin's 5 s). */
export const DEFAULT_DIAL_TIMEOUT_MS = 5_000;
/** Milliseconds an announced id nobody dialled is kept (go-plugin's 5 s); host services never expire. */
export const DEFAULT_UNCLAIMED_TTL_MS = 5_000;
/** Milliseconds a served id's calls get to finish when it is stopped. */
export const SERVED_STOP_GRACE_MS = 1_000;

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
  /** Set when the host asked for traces: brokered calls both ways are traced. */
  tracing?: BrokerTracing | undefined;
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

/**
 * The plugin's side of go-plugin's `GRPCBroker`. Get it from `Plugin.broker()`; it works while
 * the plugin serves (inside call handlers).
 *
 * ```ts
 * const helper = await broker.dial(request.add_server, AddHelper);  // an id the host sent
 * const host = await broker.hostServices(AddHelper);                 // a tether host's host services
 * const kv = await broker.openPlugin<KVClient>("b", KV);             // catalog plugin b, if granted
 * const served = await broker.acceptAndServe(broker.nextId(), [{ service: Callback, implementation }]);
 * ```
 */
export class GRPCBroker {
  readonly dialTimeoutMs: number;
  readonly unclaimedTtlMs: number;
  private counter = 0;
  private setup: BrokerSetup | undefined;
  private closed = false;
  private readonly stream = new BrokerStream();
  /** The default mode's announcements. */
  private readonly announcements: Announcements;
  /** The multiplexed mode's knocks (set in that mode once the plugin serves). */
  private knocks: Knocks | undefined;
  private readonly served = new Set<Served>();
  /** Dialled connections not closed yet (each closed one removes itself). */
  private readonly channels = new Set<DialledChannel>();
  private hostChannel: Promise<SharedChannel> | undefined;

  constructor(options: GrpcBrokerOptions = {}) {
    this.dialTimeoutMs = options.dialTimeoutMs ?? DEFAULT_DIAL_TIMEOUT_MS;
    this.unclaimedTtlMs = options.unclaimedTtlMs ?? DEFAULT_UNCLAIMED_TTL_MS;
    this.announcements = new Announcements(this.stream, this.unclaimedTtlMs);
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
    return clientOn(channel, Client, this.setup?.tracing);
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
    return clientOn(await this.hostChannel, Client, this.setup?.tracing);
  }

  /**
   * A client of `Client` for the services of the host's catalog plugin `plugin`, relayed by the
   * host (a tether `Supervisor`), which starts it if needed — when the operator's grants let
   * this plugin call it (`calls = ["NAME"]` under `[plugins.THIS]`). This plugin never learns
   * its address, certificate or secrets. Close the client when done with it (`client.close()`);
   * clients still open are closed when the plugin stops.
   *
   * Asks `tether.plugins.v1.Plugins/Open` on the {@link hostServices host services} for a
   * broker id, then {@link dial}s it; `timeoutMs` is as theirs. Works in both broker modes.
   *
   * @throws {PluginRefusedError} when the host refuses (not granted: the message names the
   *   grants line to add; `code` and `details` are the host's); {@link GrpcBrokerError} as
   *   {@link hostServices} and {@link dial}.
   */
  async openPlugin<C extends grpc.Client = grpc.Client>(
    plugin: string,
    Client: ClientConstructor<C> | grpc.ServiceClientConstructor,
    options: { timeoutMs?: number } = {},
  ): Promise<C> {
    const host = await this.hostServices(internalProtos().plugins, options);
    const id = await openBrokerId(host, plugin);
    return this.dial(id, Client, options);
  }

  /**
   * Serves `services` to the host under `id` (send the id to the host in an app message): in
   * the default mode on a new unix socket, announced on the broker stream; in the multiplexed
   * mode on the streams the host knocks for. Same TLS as the main connection.
   */
  async acceptAndServe(id: number, services: readonly ServiceEntry[]): Promise<Served> {
    const setup = this.requireSetup(id);
    const endpoint = new Endpoint(setup.tracing?.serve(services) ?? services, setup.pinned);
    const knocks = this.knocks;
    if (knocks !== undefined) {
      knocks.mux.route(id, (stream) => endpoint.accept(stream));
      const served = this.register(new Served(id, endpoint, () => knocks.mux.unroute(id), (s) => this.served.delete(s)));
      knocks.served(id);
      log("debug", "serving a multiplexed brokered id", { id });
      return served;
    }
    const socket = await listenForId(id, setup.socketDir, (conn) => endpoint.accept(conn));
    const served = this.register(new Served(id, endpoint, socket.stop, (s) => this.served.delete(s)));
    this.stream.send({ service_id: id, network: "unix", address: socket.address });
    return served;
  }

  // --- used by the SDK ----------------------------------------------------------------------

  /** Makes the broker usable (once the main socket is bound). @internal */
  connect(setup: BrokerSetup): void {
    this.setup = setup;
    if (setup.mux !== undefined) this.knocks = new Knocks(setup.mux, this.stream, this.unclaimedTtlMs);
  }

  /** Serves `plugin.GRPCBroker/StartStream`. @internal */
  startStreamHandler(): grpc.handleBidiStreamingCall<ConnInfo, ConnInfo> {
    return this.stream.handler((info) => this.receive(info));
  }

  /** Stops every served id, closes dialled connections, fails waiting dials, ends the stream. @internal */
  async close(): Promise<void> {
    this.closed = true;
    this.announcements.close();
    this.knocks?.close();
    for (const channel of [...this.channels]) channel.end();
    this.stream.close();
    await Promise.all([...this.served].map((s) => s.stop(0)));
  }

  /** Records a message from the host. @internal (exported for tests) */
  receive(info: ConnInfo): void {
    const knock = info.knock ?? undefined;
    if (knock === undefined || !(knock.knock || knock.ack)) {
      this.announcements.receive(info);
    } else if (this.knocks === undefined) {
      log("warn", "ignoring a multiplexing knock: this connection does not use multiplexing", { id: info.service_id });
    } else {
      this.knocks.receive(info.service_id, knock);
    }
  }

  // --- internals ----------------------------------------------------------------------------

  private register(served: Served): Served {
    if (this.closed) {
      void served.stop(0);
      throw brokerStopped(served.id);
    }
    this.served.add(served);
    return served;
  }

  private requireSetup(id: number): BrokerSetup {
    if (this.closed) throw brokerStopped(id);
    if (this.setup === undefined) {
      throw new GrpcBrokerError(
        `broker id ${id}: the broker is not connected yet: use it while the plugin serves (inside a call handler)`,
      );
    }
    return this.setup;
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
    const knocks = this.knocks;
    if (knocks !== undefined) {
      // The first stream is opened before the relay listens, so that a refused or unanswered
      // knock fails the dial; later connections (grpc-js reconnecting) knock again.
      const first = await knocks.knockAndOpen(id, Date.now() + timeoutMs);
      relay = await MuxRelay.start(knocks.mux, id, first, () => knocks.knockAndOpen(id, Date.now() + this.dialTimeoutMs));
      target = relay.target;
    } else {
      const info = await this.announcements.waitFor(id, timeoutMs);
      target = dialTarget(id, info);
    }
    const channel: T = new Kind(target, credentials, DIAL_CHANNEL_OPTIONS, () => {
      relay?.stop();
      this.channels.delete(channel);
    });
    if (this.closed) {
      // The plugin began stopping while this dial waited: nothing may outlive the broker.
      channel.end();
      throw brokerStopped(id);
    }
    this.channels.add(channel);
    channel.getConnectivityState(true); // connect now, not at the first call
    return channel;
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
  tracing: BrokerTracing | undefined,
): C {
  const options: grpc.ClientOptions = { channelOverride: channel };
  if (tracing !== undefined) options.interceptors = [tracing.clientInterceptor];
  // The address and credentials are unused with channelOverride.
  return new (Client as ClientConstructor<C>)("localhost", grpc.credentials.createInsecure(), options);
}
