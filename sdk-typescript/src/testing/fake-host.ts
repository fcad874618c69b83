/**
 * {@link FakeHost}: a plugin's services served in the test's process by the SDK's own serve
 * sequence, behind a fake host that speaks the real protocol to it.
 *
 * @module
 */

import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";

import type { ClientConstructor, GRPCBroker } from "../broker.js";
import { HOST_SERVICES_ID } from "../broker-stream.js";
import type { ServiceEntry } from "../endpoint.js";
import { CLIENT_CERT, CONFIG_DIR, MULTIPLEX_GRPC, PROTOCOL_VERSIONS, SECRETS_DIR, UNIX_SOCKET_DIR } from "../env.js";
import { GrantedFiles } from "../files.js";
import { generateIdentity, type Identity } from "../identity.js";
import { DEFAULT_APP_VERSION, Plugin, type Launch, type PluginOptions, type StopReason } from "../plugin.js";
import { internalProtos } from "../protos.js";
import type { Pinned } from "../tls.js";
import { connect, type HostConnection } from "./connection.js";
import { Delivery, type GrantedValues, type Grants } from "./delivery.js";
import { TestKitError } from "./errors.js";
import { parseHandshakeLine } from "./handshake.js";
import { HostBroker } from "./host-broker.js";

/** Milliseconds the plugin may take from {@link FakeHost.serve} to its handshake line. */
export const DEFAULT_START_TIMEOUT_MS = 5_000;
/** Milliseconds the fake host may take to connect and see the plugin healthy (TLS included). */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
/**
 * Milliseconds the plugin may take to stop after `GRPCController.Shutdown` on
 * {@link FakeHost.close} (go-plugin hosts kill a plugin 2 s after it).
 */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 2_000;
/** The magic cookie the fake host and its plugin agree on (never a real application's). */
export const FAKE_HOST_COOKIE = { key: "TETHER_FAKE_HOST", value: "in-process" } as const;

/** Options of a {@link FakeHost}; every one may be left out. */
export interface FakeHostOptions {
  /** Secrets granted to the plugin, by name (`secrets.read(name)` in the plugin). */
  secrets?: GrantedValues;
  /** Config files granted to the plugin, by name (`config.read(name)`). */
  config?: GrantedValues;
  /**
   * Services the host serves to the plugin as host services (`broker.hostServices(Client)`).
   * Without them the plugin's request fails at once, as under a tether host that serves none.
   */
  hostServices?: readonly ServiceEntry[];
  /** go-plugin's broker mode: `default` (a socket per id) or `multiplexed` (yamux); `default` unless set. */
  broker?: "default" | "multiplexed";
  /** The plugin's options (broker timeouts, shutdown grace, app versions, log level…); the cookie is the kit's. */
  plugin?: Partial<PluginOptions>;
  /** {@link DEFAULT_START_TIMEOUT_MS} unless set. */
  startTimeoutMs?: number;
  /** {@link DEFAULT_CONNECT_TIMEOUT_MS} unless set. */
  connectTimeoutMs?: number;
  /** {@link DEFAULT_SHUTDOWN_TIMEOUT_MS} unless set. */
  shutdownTimeoutMs?: number;
}

/** The one fake host open in this process (its launch variables are process-wide). */
let open: FakeHost | undefined;

/**
 * A fake host for a plugin's services, served in this process: the SDK's own serve sequence
 * (the `Plugin` a plugin builds, the same launch variables, handshake line, AutoMTLS with
 * pinned certificates both ways, `plugin.GRPCBroker` in either of go-plugin's modes, health,
 * `GRPCController.Shutdown`) runs under launch variables this host sets, and the host connects
 * to what the handshake line announced. Granted secrets and config files are delivered as a
 * tether host delivers them (see `delivery.ts`), so the plugin's `secrets.read(name)` works.
 *
 * ```ts
 * const host = new FakeHost({ secrets: { salutation: "Hello" } });
 * const titles = host.acceptAndServe([{ service: Titles, implementation: { Title } }]);
 * await host.serve([{ service: Greeter, implementation: greeterService(host.broker) }]);
 * const greeter = host.client<GreeterClient>(Greeter); // send `titles` in a request
 * await host.close(); // Shutdown; fails if the plugin left a socket behind
 * ```
 *
 * One fake host may be open in a process at a time (node --test runs the tests of a file one
 * after another unless told otherwise); {@link fakeHost} closes it when the test ends.
 */
export class FakeHost {
  /** The host's temporary directory: granted files, the plugin's and the host's sockets. */
  readonly dir: string;
  /** The plugin's broker, as `plugin.broker()` gives it under a host: hand it to the services. */
  readonly broker: GRPCBroker;
  /** The granted secrets, as the plugin's `secrets` reads them while this host is open. */
  readonly secrets: GrantedFiles;
  /** The granted config files, as the plugin's `config` reads them while this host is open. */
  readonly config: GrantedFiles;
  private readonly plugin: Plugin;
  private readonly identity: Identity = generateIdentity();
  private readonly delivery: Delivery;
  private readonly launchVars: Record<string, string | undefined>;
  private readonly abort = new AbortController();
  private readonly pending = new Map<number, readonly ServiceEntry[]>();
  private readonly serving: Array<Promise<void>> = [];
  private nextId = 0;
  private running: Promise<StopReason> | undefined;
  private connection: HostConnection | undefined;
  private hostBroker: HostBroker | undefined;
  private closed = false;

  constructor(private readonly options: FakeHostOptions = {}) {
    if (open !== undefined) {
      throw new TestKitError(
        `another FakeHost (${open.dir}) is open in this process, and the launch variables it delivers are process-wide: close it first (await host.close(), or make it with fakeHost(t, …), which closes it when its test ends)`,
      );
    }
    // Under /tmp: unix socket paths are limited to 107 bytes.
    this.dir = mkdtempSync("/tmp/tether-fake-host-");
    for (const sub of ["run", "host"]) mkdirSync(path.join(this.dir, sub), { mode: 0o700 });
    this.delivery = deliverOrClean(this.dir, {
      secrets: options.secrets,
      config: options.config,
      hostServices: options.hostServices !== undefined,
    });
    const multiplexed = options.broker === "multiplexed";
    this.plugin = new Plugin({
      ...options.plugin,
      cookieKey: FAKE_HOST_COOKIE.key,
      cookieValue: FAKE_HOST_COOKIE.value,
      multiplex: multiplexed,
    });
    this.broker = this.plugin.broker();
    this.launchVars = {
      [FAKE_HOST_COOKIE.key]: FAKE_HOST_COOKIE.value,
      [PROTOCOL_VERSIONS]: (options.plugin?.appVersions ?? [DEFAULT_APP_VERSION]).join(","),
      [CLIENT_CERT]: this.identity.certPem,
      [UNIX_SOCKET_DIR]: path.join(this.dir, "run"),
      [MULTIPLEX_GRPC]: multiplexed ? "true" : undefined,
      ...this.delivery.vars,
    };
    const lookup = (name: string): string | undefined => this.launchVars[name];
    this.secrets = new GrantedFiles(SECRETS_DIR, "secret", "secrets", lookup);
    this.config = new GrantedFiles(CONFIG_DIR, "config file", "config", lookup);
    this.delivery.apply();
    open = this;
  }

  /** The host's channel to the plugin's services (after {@link serve}). */
  get channel(): grpc.Channel {
    if (this.connection === undefined) throw new TestKitError("the fake host is not connected: await host.serve(services) first");
    return this.connection.channel;
  }

  /** A client of `Client` (a service's client constructor from `loadProto`) on {@link channel}. */
  client<C extends grpc.Client = grpc.Client>(Client: ClientConstructor<C> | grpc.ServiceClientConstructor): C {
    const channelOverride = this.channel;
    // The address and credentials are unused with channelOverride.
    return new (Client as ClientConstructor<C>)("localhost", grpc.credentials.createInsecure(), { channelOverride });
  }

  /**
   * Serves `services` to the plugin under a fresh broker id and returns the id, to send to the
   * plugin in a request (go-plugin's `AcceptAndServe`; the plugin's `broker.dial(id, Client)`
   * reaches it). May be called before {@link serve}: the id is served once the plugin is.
   */
  acceptAndServe(services: readonly ServiceEntry[]): number {
    if (this.closed) throw new TestKitError("the fake host is closed");
    this.nextId += 1;
    if (this.hostBroker === undefined) this.pending.set(this.nextId, services);
    else {
      const serving = this.hostBroker.serve(this.nextId, services);
      serving.catch(() => undefined); // reported by close()
      this.serving.push(serving);
    }
    return this.nextId;
  }

  /**
   * Serves `services` as the plugin, under this host: resolves once the plugin printed its
   * handshake, the host connected to what it announced, and its health check answered.
   *
   * @throws the plugin's own error when it fails to start (a `ConfigurationError`…);
   *   {@link TestKitError} when it announces nothing in time, or something no host accepts.
   */
  async serve(services: readonly ServiceEntry[]): Promise<this> {
    if (this.running !== undefined || this.closed) throw new TestKitError("serve() may be called once, before close()");
    for (const { service, implementation } of services) this.plugin.addService(service, implementation);
    let announce!: (line: string) => void;
    const handshake = new Promise<string>((resolve) => (announce = resolve));
    const launch: Launch = { lookup: (name) => this.launchVars[name], announce, ownsProcess: false, signal: this.abort.signal };
    const running = this.plugin.runUnder(launch);
    this.running = running;
    const ended = running.then((reason): never => {
      throw new TestKitError(`the plugin stopped before its handshake line (${reason})`);
    });
    const start = this.options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    const line = await within(Promise.race([handshake, ended]), start, `the plugin printed no handshake line within ${start} ms`);
    const announced = parseHandshakeLine(line);
    if (announced.serverCert === undefined) {
      throw new TestKitError(
        `the plugin announced no certificate (${JSON.stringify(line.trim())}), though the fake host offered AutoMTLS (PLUGIN_CLIENT_CERT)`,
      );
    }
    const pinned: Pinned = { identity: this.identity, hostCert: announced.serverCert };
    const connection = await connect(announced, pinned, path.join(this.dir, "host"));
    this.connection = connection;
    const broker = new HostBroker(connection.channel, pinned, path.join(this.dir, "host"), announced.multiplex === true);
    this.hostBroker = broker;
    connection.onInbound((stream) => broker.inbound(stream));
    if (this.options.hostServices !== undefined) await broker.serve(HOST_SERVICES_ID, this.options.hostServices);
    for (const [id, entries] of this.pending) await broker.serve(id, entries);
    this.pending.clear();
    const connectMs = this.options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    await within(healthy(this.client(internalProtos().health), connectMs), connectMs, `the plugin was not healthy within ${connectMs} ms of its handshake`);
    return this;
  }

  /**
   * Stops the plugin as a host does (`GRPCController.Shutdown`, then waiting for it to stop),
   * closes the host's side, puts the launch variables back and removes {@link dir}. Resolves
   * with why the plugin stopped (`undefined` if it never served).
   *
   * @throws {TestKitError} when the plugin did not stop in time, or left a file in its socket
   *   directory (everything is removed first); the plugin's own error if it failed.
   */
  async close(): Promise<StopReason | undefined> {
    if (this.closed) return undefined;
    this.closed = true;
    let reason: StopReason | undefined;
    let failure: unknown;
    try {
      reason = await this.stopPlugin();
    } catch (e) {
      failure = e;
    }
    const served = await Promise.allSettled(this.serving);
    await this.hostBroker?.close();
    this.connection?.close();
    this.delivery.restore();
    open = undefined;
    const leftovers = readdirSync(path.join(this.dir, "run"));
    rmSync(this.dir, { recursive: true, force: true });
    if (failure !== undefined) throw failure;
    for (const result of served) if (result.status === "rejected") throw result.reason;
    if (leftovers.length > 0) {
      throw new TestKitError(`the plugin left ${leftovers.join(", ")} in its socket directory after it stopped`);
    }
    return reason;
  }

  private async stopPlugin(): Promise<StopReason | undefined> {
    const running = this.running;
    if (running === undefined) return undefined;
    const timeout = this.options.shutdownTimeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_MS;
    if (this.connection === undefined) this.abort.abort();
    else await shutdown(this.client(internalProtos().controller), timeout).catch(() => this.abort.abort());
    try {
      return await within(running, timeout, `the plugin did not stop within ${timeout} ms of GRPCController.Shutdown`);
    } catch (e) {
      this.abort.abort();
      throw e;
    }
  }
}

/**
 * A {@link FakeHost} closed when the test `t` ends (`t.after`), like the Python kit's
 * `tether_fake_host` fixture: `const host = fakeHost(t, { secrets: { token: "s3cret" } })`.
 */
export function fakeHost(t: { after(fn: () => unknown): void }, options: FakeHostOptions = {}): FakeHost {
  const host = new FakeHost(options);
  t.after(() => host.close());
  return host;
}

/** The delivery of `grants` into `dir`; `dir` is removed when it fails (a name no host could deliver). */
function deliverOrClean(dir: string, grants: Grants): Delivery {
  try {
    return new Delivery(dir, grants);
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

/** `promise`, or a {@link TestKitError} saying `message` after `ms`. */
function within<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new TestKitError(message)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** Checks `grpc.health.v1.Health` for the `plugin` service (SERVING), as hosts do. */
function healthy(client: grpc.Client, ms: number): Promise<void> {
  return unary(client, "Check", { service: "plugin" }, ms).then((reply) => {
    if ((reply as { status?: number }).status !== 1) {
      throw new TestKitError(`the plugin's health check answered ${JSON.stringify(reply)}, not SERVING`);
    }
  });
}

function shutdown(client: grpc.Client, ms: number): Promise<unknown> {
  return unary(client, "Shutdown", {}, ms);
}

function unary(client: grpc.Client, method: string, request: object, ms: number): Promise<unknown> {
  type Method = (request: object, options: grpc.CallOptions, done: (e: grpc.ServiceError | null, reply?: unknown) => void) => void;
  const call = (client as unknown as Record<string, Method>)[method];
  if (call === undefined) return Promise.reject(new TestKitError(`the SDK's ${method} client is missing`));
  return new Promise((resolve, reject) =>
    call.call(client, request, { deadline: Date.now() + ms }, (e, reply) => (e ? reject(e) : resolve(reply))),
  );
}
