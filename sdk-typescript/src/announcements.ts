/**
 * go-plugin's default broker mode, plugin side: the host announces where it serves an id
 * (`ConnInfo{service_id, network, address}`) and the plugin dials that address once; an id the
 * plugin serves listens on a new unix socket next to the main one, announced the same way.
 * Announcements nobody dials expire after the broker's unclaimed TTL; host services' never do.
 *
 * @module
 */

import { randomBytes } from "node:crypto";
import * as net from "node:net";
import * as path from "node:path";

import {
  type BrokerStream,
  type ConnInfo,
  HOST_SERVICES_ID,
  MAX_UNCLAIMED,
  brokerStopped,
  noHostServices,
} from "./broker-stream.js";
import { GrpcBrokerError } from "./errors.js";
import { MAX_UNIX_PATH_BYTES, removeQuietly } from "./listen.js";

interface Arrival {
  info: ConnInfo;
  at: number;
}

/** The host's announcements not dialled yet, and the dials waiting for one. @internal */
export class Announcements {
  private readonly arrived = new Map<number, Arrival>();
  private readonly waiters = new Set<() => void>();
  private closed = false;

  constructor(
    private readonly stream: BrokerStream,
    private readonly ttlMs: number,
  ) {}

  /** Records an announcement (dropping the oldest beyond {@link MAX_UNCLAIMED}). */
  receive(info: ConnInfo): void {
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
    for (const wake of [...this.waiters]) wake();
  }

  /** The announcement of `id`, within `timeoutMs`; each one is handed out once (host services' always). */
  waitFor(id: number, timeoutMs: number): Promise<ConnInfo> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        if (this.closed) {
          reject(brokerStopped(id));
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
        const stream = this.stream.describe();
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
        this.waiters.delete(wake);
      };
      this.waiters.add(wake);
    });
  }

  /** Fails every waiting dial (the broker stops). */
  close(): void {
    this.closed = true;
    for (const wake of [...this.waiters]) wake();
  }

  private expire(now: number): void {
    for (const [id, a] of this.arrived) {
      if (id !== HOST_SERVICES_ID && now - a.at >= this.ttlMs) this.arrived.delete(id);
    }
  }
}

/** A served id's unix socket in `socketDir`; `stop` closes it and removes the file. */
export async function listenForId(
  id: number,
  socketDir: string,
  onConnection: (socket: net.Socket) => void,
): Promise<{ address: string; stop: () => void }> {
  const socketPath = path.join(socketDir, `broker-${randomBytes(8).toString("hex")}.sock`);
  if (Buffer.byteLength(socketPath) > MAX_UNIX_PATH_BYTES) {
    throw new GrpcBrokerError(`broker id ${id}: the socket path ${socketPath} is longer than ${MAX_UNIX_PATH_BYTES} bytes`);
  }
  const listener = net.createServer(onConnection);
  await new Promise<void>((resolve, reject) => {
    listener.once("error", (e) =>
      reject(new GrpcBrokerError(`broker id ${id}: cannot listen on unix socket ${socketPath}: ${e.message}`)),
    );
    listener.listen(socketPath, () => resolve());
  });
  const stop = (): void => {
    listener.close();
    removeQuietly(socketPath);
  };
  return { address: socketPath, stop };
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
