/**
 * The {@link Plugin} builder and the serve sequence: check, negotiate, listen, handshake,
 * serve, stop.
 *
 * @module
 */

import { writeSync } from "node:fs";
import * as path from "node:path";
import type { Duplex } from "node:stream";
import * as grpc from "@grpc/grpc-js";

import { GRPCBroker, HOST_SERVICES_VAR, type GrpcBrokerOptions } from "./broker.js";
import { Endpoint, definitionOf, type ServiceEntry } from "./endpoint.js";
import { chooseVersion, readLaunchEnv, type LaunchEnv, type Lookup } from "./env.js";
import { ConfigurationError, NotLaunchedByHostError, PluginError } from "./errors.js";
import { handshakeLine } from "./handshake.js";
import { generateIdentity } from "./identity.js";
import { bind } from "./listen.js";
import { log, setLogLevel, type Level } from "./log.js";
import { MuxRouter } from "./mux.js";
import { internalProtos } from "./protos.js";
import { REFLECTION_SERVICES, serveReflection } from "./reflection.js";
import { StdioRelay } from "./stdio.js";
import type { Pinned } from "./tls.js";
import { TRACEPARENT_VAR, TRACESTATE_VAR } from "./trace-settings.js";
import { Tracing } from "./tracing.js";

/** The health service name hosts check (go-plugin's). */
export const HEALTH_SERVICE = "plugin";
/** The app protocol version a plugin supports unless it says otherwise. */
export const DEFAULT_APP_VERSION = 1;
/**
 * Milliseconds running calls get to finish after a stop request before they are cancelled
 * (go-plugin hosts kill the plugin 2 s after `Shutdown`).
 */
export const DEFAULT_SHUTDOWN_GRACE_MS = 1_000;
/**
 * Milliseconds between checks that the host (the parent process) is still alive. Node offers
 * no pidfd, so the parent pid is compared with the one recorded at start-up; tether hosts
 * also set a parent-death signal, which ends the plugin at once.
 */
export const HOST_WATCH_INTERVAL_MS = 500;

/** Why a plugin stopped serving without an error. */
export enum StopReason {
  ShutdownRequested = "the host called GRPCController.Shutdown",
  Signal = "a termination signal arrived",
  HostExited = "the host process exited",
}

// Recorded when the SDK is imported, before anything could re-parent the process.
const PARENT_PID = process.ppid;

/** Options of a {@link Plugin}. */
export interface PluginOptions extends GrpcBrokerOptions {
  /** go-plugin's `MagicCookieKey`, e.g. `BASIC_PLUGIN`. */
  cookieKey: string;
  /** go-plugin's `MagicCookieValue`, e.g. `hello`. */
  cookieValue: string;
  /** App protocol versions this plugin speaks (default `[1]`); the highest the host offers is used. */
  appVersions?: number[];
  /** `unix` (default) or `tcp` (127.0.0.1, in the host's port range). */
  transport?: "unix" | "tcp";
  /** Accept go-plugin's multiplexed broker when the host offers it (default `true`). */
  multiplex?: boolean;
  /** {@link DEFAULT_SHUTDOWN_GRACE_MS} unless set. */
  shutdownGraceMs?: number;
  /** Stop when the host process exits (default `true`). */
  exitWithHost?: boolean;
  /** {@link HOST_WATCH_INTERVAL_MS} unless set. */
  hostWatchIntervalMs?: number;
  /** Stream later `process.stdout`/`process.stderr` output over `plugin.GRPCStdio` (default `true`). */
  relayStdio?: boolean;
  /** The SDK's own log level on stderr (default `info`). */
  logLevel?: Level;
  /** Serve gRPC server reflection over the plugin's services (default `true`). */
  reflection?: boolean;
}

/**
 * Where one run of a plugin gets its launch and what it may do to its process. `serve()` and
 * `run()` use the process's own ({@link processLaunch}); the test kit (`tether-plugin/testing`)
 * runs a plugin inside the test's process under a fake host's launch, through the same
 * sequence. @internal
 */
export interface Launch {
  /** Reads a launch variable, as `(name) => process.env[name]` does for a launched plugin. */
  lookup: Lookup;
  /** Gives the host the handshake line (a launched plugin prints it on stdout). */
  announce(line: string): void;
  /**
   * Whether the run owns the process: handles SIGTERM/SIGINT, watches the parent process and
   * relays `process.stdout`/`process.stderr` (the options that turn these off still apply).
   */
  ownsProcess: boolean;
  /** Stops the run when aborted, as a termination signal would ({@link StopReason.Signal}). */
  signal?: AbortSignal;
}

/** The launch of a plugin started by a host: its environment, its stdout, its signals. @internal */
export function processLaunch(): Launch {
  return { lookup: (name) => process.env[name], announce: (line) => writeAll(1, line), ownsProcess: true };
}

interface Registered extends ServiceEntry {
  /** `undefined`: served for every app version. */
  appVersion: number | undefined;
}

/**
 * A plugin being assembled: the handshake settings plus the gRPC services to serve.
 *
 * ```ts
 * const plugin = new Plugin({ cookieKey: "BASIC_PLUGIN", cookieValue: "hello", appVersions: [1] });
 * plugin.addService(KV, { get, put });
 * await plugin.serve(); // ends the process when the host says so
 * ```
 */
export class Plugin {
  private readonly services: Registered[] = [];
  private readonly brokerInstance: GRPCBroker;
  private readonly appVersions: number[];

  constructor(private readonly options: PluginOptions) {
    this.appVersions = options.appVersions ?? [DEFAULT_APP_VERSION];
    this.brokerInstance = new GRPCBroker(options);
  }

  /**
   * go-plugin's `GRPCBroker`: dial services the host serves (`dial(id, Client)` with an id the
   * host sent, `hostServices(Client)` for a tether host's host services) or serve callbacks to
   * it (`acceptAndServe(nextId(), services)`). It works while the plugin serves, i.e. inside
   * call handlers.
   */
  broker(): GRPCBroker {
    return this.brokerInstance;
  }

  /**
   * Serves `implementation` for `service` (a client constructor from `loadProto`, or its
   * `.service` definition) — for every negotiated app version, or only for `appVersion`.
   */
  addService(
    service: ServiceEntry["service"],
    implementation: grpc.UntypedServiceImplementation,
    options: { appVersion?: number } = {},
  ): this {
    this.services.push({ service, implementation, appVersion: options.appVersion });
    return this;
  }

  /** Checks what is the author's responsibility, whatever the environment. */
  check(): void {
    const { cookieKey, cookieValue } = this.options;
    if (!cookieKey || !cookieValue) {
      throw new ConfigurationError("misconfigured plugin: the magic cookie key and value must not be empty");
    }
    if (this.appVersions.length === 0 || this.appVersions.some((v) => !Number.isInteger(v) || v < 0 || v > 0xffff_ffff)) {
      throw new ConfigurationError(
        `misconfigured plugin: appVersions=${JSON.stringify(this.appVersions)} must list at least one non-negative integer`,
      );
    }
    const transport = this.options.transport ?? "unix";
    if (transport !== "unix" && transport !== "tcp") {
      throw new ConfigurationError(`misconfigured plugin: transport ${JSON.stringify(transport)} is not "unix" or "tcp"`);
    }
    for (const s of this.services) {
      if (s.appVersion !== undefined && !this.appVersions.includes(s.appVersion)) {
        throw new ConfigurationError(
          `misconfigured plugin: a service was added for app protocol version ${s.appVersion}, which appVersions=${JSON.stringify(this.appVersions)} does not list`,
        );
      }
    }
    for (const version of this.appVersions) this.servicesFor(version);
  }

  private servicesFor(version: number): ServiceEntry[] {
    const chosen = this.services.filter((s) => s.appVersion === undefined || s.appVersion === version);
    const seen = new Set(BUILT_IN_SERVICES);
    for (const s of chosen) {
      const methods = Object.values(definitionOf(s.service));
      const name = methods[0]?.path.split("/")[1];
      if (name === undefined) continue;
      if (seen.has(name)) throw new ConfigurationError(`misconfigured plugin: gRPC service ${name} is served more than once`);
      seen.add(name);
    }
    return chosen;
  }

  /**
   * Runs the plugin until it is told to stop, then ends the process: status 0 after any
   * {@link StopReason}, 1 after an error, which is printed to stderr first (for a missing or
   * wrong cookie, go-plugin's message for humans and nothing else).
   */
  async serve(): Promise<never> {
    try {
      await this.run();
    } catch (e) {
      if (e instanceof NotLaunchedByHostError) {
        writeStderr(`${e.message}\n`);
      } else {
        // "[ERROR]" is the level prefix go-plugin hosts read from non-JSON stderr lines.
        writeStderr(`[ERROR] plugin failed: ${e instanceof PluginError ? e.message : String((e as Error)?.stack ?? e)}\n`);
      }
      process.exit(1);
    }
    process.exit(0);
  }

  /**
   * Like {@link serve}, but resolves with why the plugin stopped and rejects with a
   * {@link PluginError} instead of exiting. Call it once per process.
   */
  async run(): Promise<StopReason> {
    return this.runUnder(processLaunch());
  }

  /** {@link run} under `launch` (the test kit's fake host's, or the process's). @internal */
  async runUnder(launch: Launch): Promise<StopReason> {
    this.check();
    const env = readLaunchEnv({ key: this.options.cookieKey, value: this.options.cookieValue }, launch.lookup, {
      tcp: this.options.transport === "tcp",
    });
    setLogLevel(this.options.logLevel ?? "info");
    const appVersion = chooseVersion(env.appVersions, this.appVersions);
    if (launch.ownsProcess && this.options.exitWithHost !== false && PARENT_PID > 1 && process.ppid !== PARENT_PID) {
      return StopReason.HostExited;
    }
    return new Serving(this.options, env, appVersion, this.servicesFor(appVersion), this.brokerInstance, launch).run();
  }
}

/** Services the SDK serves itself; an author's service may not reuse these names. */
export const BUILT_IN_SERVICES: readonly string[] = [
  "grpc.health.v1.Health",
  "plugin.GRPCController",
  "plugin.GRPCStdio",
  "plugin.GRPCBroker",
  ...REFLECTION_SERVICES,
];

/** One run of a plugin: from listening to stopped. */
class Serving {
  private stop!: (reason: StopReason) => void;
  private readonly stopped: Promise<StopReason>;
  private readonly relay = new StdioRelay();

  constructor(
    private readonly options: PluginOptions,
    private readonly env: LaunchEnv,
    private readonly appVersion: number,
    private readonly services: ServiceEntry[],
    private readonly broker: GRPCBroker,
    private readonly launch: Launch,
  ) {
    let resolve!: (reason: StopReason) => void;
    this.stopped = new Promise((r) => (resolve = r));
    let first = true;
    this.stop = (reason) => {
      if (first) {
        first = false;
        resolve(reason);
      }
    };
  }

  async run(): Promise<StopReason> {
    // Only when the host asked for traces and the OpenTelemetry packages are installed.
    const tracing = await Tracing.start(this.broker, traceVars(this.launch.lookup));
    const started = tracing?.startSpan();
    const pinned: Pinned | undefined =
      this.env.clientCert !== undefined ? { identity: generateIdentity(), hostCert: this.env.clientCert } : undefined;
    const protos = internalProtos();
    const entries: ServiceEntry[] = [
      ...(tracing?.serve(this.services) ?? this.services),
      { service: protos.health, implementation: healthImplementation() },
      {
        service: protos.controller,
        implementation: {
          Shutdown: (_call: unknown, callback: grpc.sendUnaryData<object>) => {
            // The server stops gracefully, so this response is still delivered.
            callback(null, {});
            this.stop(StopReason.ShutdownRequested);
          },
        },
      },
      { service: protos.stdio, implementation: { StreamStdio: this.relay.handler() } },
      { service: protos.broker, implementation: { StartStream: this.broker.startStreamHandler() } },
    ];
    const endpoint = new Endpoint(entries, pinned);
    if (this.options.reflection !== false) serveReflection(endpoint.server, entries);

    const bound = await bind(this.env, this.options.transport ?? "unix");
    const multiplex = this.env.multiplex === true && this.options.multiplex !== false;
    const mux = multiplex ? new MuxRouter((stream) => endpoint.accept(stream)) : undefined;
    bound.server.on("connection", (socket: Duplex) => {
      if (mux === undefined) {
        endpoint.accept(socket);
      } else if (!mux.started) {
        // The host's one connection carries everything; no other is accepted.
        mux.start(socket);
        bound.server.close();
      } else {
        socket.destroy();
      }
    });
    this.broker.connect({
      pinned,
      // Brokered sockets go next to the main one (the host's directory or our private one).
      socketDir: bound.network === "unix" ? path.dirname(bound.address) : this.env.tmpDir ?? path.dirname(bound.address),
      mux,
      tracing,
    });

    const onSignal = (): void => this.stop(StopReason.Signal);
    const owns = this.launch.ownsProcess;
    if (owns) {
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
    }
    this.launch.signal?.addEventListener("abort", onSignal, { once: true });
    if (this.launch.signal?.aborted) onSignal();
    let watch: NodeJS.Timeout | undefined;
    if (owns && this.options.exitWithHost !== false && PARENT_PID > 1) {
      watch = setInterval(() => {
        if (process.ppid !== PARENT_PID) this.stop(StopReason.HostExited);
      }, this.options.hostWatchIntervalMs ?? HOST_WATCH_INTERVAL_MS);
    }

    this.launch.announce(
      handshakeLine({
        appVersion: this.appVersion,
        network: bound.network,
        address: bound.address,
        serverCert: pinned?.identity.certDer,
        // The 7th field only when the host offered multiplexing (older hosts split into 6).
        multiplex: this.env.multiplex === undefined ? undefined : multiplex,
      }),
    );
    started?.end();
    if (owns && this.options.relayStdio !== false) this.relay.install();
    log("debug", "serving", {
      app_version: this.appVersion,
      network: bound.network,
      address: bound.address,
      tls: pinned !== undefined,
      broker: mux ? "multiplexed" : "default",
    });

    const reason = await this.stopped;
    log("debug", "stopping", { reason });
    if (watch !== undefined) clearInterval(watch);
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
    this.launch.signal?.removeEventListener("abort", onSignal);
    const grace = this.options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
    this.relay.close();
    bound.server.close();
    // The last spans, while the host-services connection is still up.
    await tracing?.close();
    await Promise.all([this.broker.close(), endpoint.shutdown(grace)]);
    mux?.close();
    bound.cleanup();
    this.relay.uninstall();
    return reason;
  }
}

/** The launch variables tracing reads. */
function traceVars(lookup: Lookup): Record<string, string | undefined> {
  return Object.fromEntries([TRACEPARENT_VAR, TRACESTATE_VAR, HOST_SERVICES_VAR].map((name) => [name, lookup(name)]));
}

function healthImplementation(): grpc.UntypedServiceImplementation {
  const status = (service: string): number | undefined => (service === "" || service === HEALTH_SERVICE ? 1 : undefined);
  return {
    Check: (call: grpc.ServerUnaryCall<{ service: string }, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      const s = status(call.request.service);
      if (s === undefined) callback({ code: grpc.status.NOT_FOUND, details: `unknown service ${call.request.service}` });
      else callback(null, { status: s });
    },
    Watch: (call: grpc.ServerWritableStream<{ service: string }, unknown>) => {
      call.write({ status: status(call.request.service) ?? 3 }); // SERVICE_UNKNOWN
    },
  };
}

function writeAll(fd: number, text: string): void {
  const data = Buffer.from(text);
  let offset = 0;
  while (offset < data.length) {
    try {
      offset += writeSync(fd, data, offset);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "EAGAIN") continue;
      throw e;
    }
  }
}

function writeStderr(text: string): void {
  try {
    writeAll(2, text);
  } catch {
    // stderr is closed: nobody is left to read it
  }
}
