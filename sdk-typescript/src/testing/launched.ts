/**
 * {@link LaunchedPlugin}: the built plugin started as a process the way a host starts it, as
 * the Python kit's `LaunchedPlugin` and the Rust kit's `Launched` do.
 *
 * @module
 */

import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";

import { HOST_SERVICES_VAR, type ClientConstructor } from "../broker.js";
import { CLIENT_CERT, PROTOCOL_VERSIONS, UNIX_SOCKET_DIR } from "../env.js";
import { generateIdentity } from "../identity.js";
import { internalProtos } from "../protos.js";
import { connect, type HostConnection } from "./connection.js";
import { Delivery, type GrantedValues } from "./delivery.js";
import { TestKitError } from "./errors.js";
import { parseHandshakeLine, type Announced } from "./handshake.js";

/** Milliseconds a launched plugin may take to print its handshake line (Node starts in ~0.1 s). */
export const DEFAULT_LAUNCH_TIMEOUT_MS = 10_000;
/** Milliseconds a launched plugin may take to exit after `GRPCController.Shutdown` (go-plugin: 2 s). */
export const DEFAULT_EXIT_GRACE_MS = 2_000;
/** Bytes of the plugin's stderr kept for error messages (the last ones). */
export const STDERR_TAIL_BYTES = 64 * 1024;

/** Options of {@link LaunchedPlugin.start}; all but the cookie may be left out. */
export interface LaunchOptions {
  /** The plugin's magic cookie. */
  cookie: { key: string; value: string };
  /** App protocol versions the host offers (default `[1]`). */
  appVersions?: readonly number[];
  /** Secrets granted to the plugin (files in a directory named by `TETHER_SECRETS_DIR`). */
  secrets?: GrantedValues;
  /** Config files granted to the plugin (`TETHER_CONFIG_DIR`). */
  config?: GrantedValues;
  /** More environment variables (the plugin gets only `PATH` and the protocol's otherwise). */
  env?: Readonly<Record<string, string>>;
  /** The working directory (default: the launch's temporary directory). */
  cwd?: string;
  /** {@link DEFAULT_LAUNCH_TIMEOUT_MS} unless set. */
  startTimeoutMs?: number;
}

/**
 * A plugin process started as a host starts it: its own process group, stdin `/dev/null`, only
 * `PATH` and the protocol's variables (the cookie, the versions, AutoMTLS with a throw-away host
 * certificate, a private socket directory that is also its `TMPDIR`, `TETHER_HOST_SERVICES=none`,
 * the granted files). {@link shutdown} stops it as a host does and checks it left nothing behind.
 *
 * ```ts
 * const plugin = await LaunchedPlugin.start(["node", "dist/plugin.js"], { cookie: { key: "GREETER_PLUGIN", value: "hello" } });
 * const greeter = plugin.client<GreeterClient>(Greeter);
 * assert.equal(await plugin.shutdown(), 0);
 * ```
 */
export class LaunchedPlugin {
  private connected = true;

  private constructor(
    /** The process. */
    readonly child: ChildProcess,
    /** The launch's temporary directory (sockets, granted files); removed at the end. */
    readonly dir: string,
    private readonly connection: HostConnection,
    /** What the plugin announced in its handshake line. */
    readonly handshake: Announced,
    private readonly exited: Promise<number | null>,
    private readonly stderrTail: Tail,
  ) {}

  /**
   * Starts `command` (argv) and connects to what its handshake line announced.
   *
   * @throws {TestKitError} when it prints no handshake line in time or exits first (with its
   *   stderr, escaped), or announces something no host accepts.
   */
  static async start(command: readonly string[], options: LaunchOptions): Promise<LaunchedPlugin> {
    const [program, ...args] = command;
    if (program === undefined) throw new TestKitError("LaunchedPlugin.start needs a command: an empty argv was given");
    // Under /tmp: unix socket paths are limited to 107 bytes.
    const dir = mkdtempSync("/tmp/tether-launch-");
    const socketDir = path.join(dir, "run");
    const hostDir = path.join(dir, "host");
    for (const sub of [socketDir, hostDir]) mkdirSync(sub, { mode: 0o700 });
    const identity = generateIdentity();
    let delivery: Delivery;
    try {
      delivery = new Delivery(dir, { secrets: options.secrets, config: options.config, hostServices: false });
    } catch (e) {
      rmSync(dir, { recursive: true, force: true });
      throw e;
    }
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      [options.cookie.key]: options.cookie.value,
      [PROTOCOL_VERSIONS]: (options.appVersions ?? [1]).join(","),
      [UNIX_SOCKET_DIR]: socketDir,
      TMPDIR: socketDir,
      [CLIENT_CERT]: identity.certPem,
      [HOST_SERVICES_VAR]: "none",
    };
    for (const [name, value] of Object.entries(delivery.vars)) if (value !== undefined) env[name] = value;
    Object.assign(env, options.env);
    // Its own process group (detached), as hosts start plugins: kill() ends all of it.
    const child = spawn(program, args, { env, cwd: options.cwd ?? dir, stdio: ["ignore", "pipe", "pipe"], detached: true });
    const tail = new Tail();
    child.stderr?.on("data", (chunk: Buffer) => tail.add(chunk));
    const exited = new Promise<number | null>((resolve) => {
      child.once("close", (code) => resolve(code)); // after its stdout and stderr ended
      child.once("error", (e) => {
        tail.add(Buffer.from(`(it could not be started: ${e.message})`));
        resolve(null);
      });
    });
    const timeout = options.startTimeoutMs ?? DEFAULT_LAUNCH_TIMEOUT_MS;
    const failed = (why: string): TestKitError => {
      killGroup(child);
      rmSync(dir, { recursive: true, force: true });
      return new TestKitError(`${JSON.stringify(command.join(" "))} ${why}; its stderr: ${JSON.stringify(tail.text)}`);
    };
    const line = await firstLine(child, exited, timeout).catch((e: Error) => Promise.reject(failed(e.message)));
    let announced: Announced;
    let connection: HostConnection;
    try {
      announced = parseHandshakeLine(line);
      if (announced.serverCert === undefined) throw new TestKitError("it announced no certificate, though AutoMTLS was offered");
      connection = await connect(announced, { identity, hostCert: announced.serverCert }, hostDir);
    } catch (e) {
      throw failed((e as Error).message);
    }
    return new LaunchedPlugin(child, dir, connection, announced, exited, tail);
  }

  /** The host's channel to the plugin. */
  get channel(): grpc.Channel {
    return this.connection.channel;
  }

  /** A client of `Client` (a service's client constructor from `loadProto`) on {@link channel}. */
  client<C extends grpc.Client = grpc.Client>(Client: ClientConstructor<C> | grpc.ServiceClientConstructor): C {
    const channelOverride = this.connection.channel;
    return new (Client as ClientConstructor<C>)("localhost", grpc.credentials.createInsecure(), { channelOverride });
  }

  /** The last {@link STDERR_TAIL_BYTES} the plugin wrote to stderr. */
  get stderr(): string {
    return this.stderrTail.text;
  }

  /**
   * Calls `GRPCController.Shutdown` and waits `graceMs` for the process to exit. Resolves with
   * its exit status once it exited 0 within the grace and left nothing in its socket
   * directory; the process group is ended and the directory removed in every case.
   *
   * @throws {TestKitError} saying which of these failed (with its stderr, escaped).
   */
  async shutdown(graceMs: number = DEFAULT_EXIT_GRACE_MS): Promise<number> {
    try {
      const controller = this.client(internalProtos().controller) as unknown as {
        Shutdown(r: object, o: grpc.CallOptions, done: (e: grpc.ServiceError | null) => void): void;
      };
      await new Promise<void>((resolve, reject) =>
        controller.Shutdown({}, { deadline: Date.now() + graceMs }, (e) => (e ? reject(e) : resolve())),
      ).catch((e: Error) => Promise.reject(this.failure(`did not answer GRPCController.Shutdown: ${e.message}`)));
      this.disconnect();
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), graceMs)));
      const status = await Promise.race([this.exited, late]).finally(() => clearTimeout(timer));
      if (status === "late") throw this.failure(`did not exit within ${graceMs} ms of Shutdown`);
      if (status !== 0) throw this.failure(`exited with status ${status} after Shutdown`);
      const left = readdirSync(path.join(this.dir, "run"));
      if (left.length > 0) throw this.failure(`left ${left.join(", ")} in its socket directory`);
      return status;
    } finally {
      await this.kill();
    }
  }

  /** Ends the process group (if the plugin still runs), closes the connection and removes {@link dir}. */
  async kill(): Promise<void> {
    this.disconnect();
    if (this.child.exitCode === null && this.child.signalCode === null) {
      killGroup(this.child);
      await this.exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  private disconnect(): void {
    if (this.connected) this.connection.close();
    this.connected = false;
  }

  private failure(what: string): TestKitError {
    return new TestKitError(`the plugin ${what}; its stderr: ${JSON.stringify(this.stderr)}`);
  }
}

/**
 * A {@link LaunchedPlugin} killed when the test `t` ends, unless it was shut down (the Python
 * kit's `tether_launch` fixture).
 */
export async function launchPlugin(
  t: { after(fn: () => unknown): void },
  command: readonly string[],
  options: LaunchOptions,
): Promise<LaunchedPlugin> {
  const plugin = await LaunchedPlugin.start(command, options);
  t.after(() => plugin.kill());
  return plugin;
}

function killGroup(child: ChildProcess): void {
  try {
    if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
  } catch {
    // already gone
  }
}

/** The last {@link STDERR_TAIL_BYTES} of an output. */
class Tail {
  private bytes = Buffer.alloc(0);

  add(chunk: Buffer): void {
    const joined = Buffer.concat([this.bytes, chunk]);
    this.bytes = joined.length > STDERR_TAIL_BYTES ? joined.subarray(joined.length - STDERR_TAIL_BYTES) : joined;
  }

  get text(): string {
    return this.bytes.toString("utf8");
  }
}

/** The first stdout line within `ms`; rejects with why not. */
function firstLine(child: ChildProcess, exited: Promise<number | null>, ms: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    const timer = setTimeout(() => reject(new Error(`printed no handshake line within ${ms} ms`)), ms);
    child.stdout?.on("data", (chunk: Buffer) => {
      text += chunk.toString("utf8");
      const end = text.indexOf("\n");
      if (end >= 0) {
        clearTimeout(timer);
        child.stdout?.removeAllListeners("data");
        child.stdout?.resume(); // later output is drained, as hosts do
        resolve(text.slice(0, end));
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`exited (status ${code}) before its handshake line`));
    });
  });
}
