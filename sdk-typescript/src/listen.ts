/**
 * The socket the host connects to: a unix socket (in the host's `PLUGIN_UNIX_SOCKET_DIR`, or a
 * private 0700 directory in the temporary directory) or a loopback TCP port in the host's range.
 *
 * @module
 */

import { randomBytes } from "node:crypto";
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync, unlinkSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";

import { UNIX_SOCKET_DIR, UNIX_SOCKET_GROUP, type LaunchEnv } from "./env.js";
import { LaunchError, ListenError } from "./errors.js";

/** Longest unix socket path the kernel accepts (`sun_path` is 108 bytes with the NUL). */
export const MAX_UNIX_PATH_BYTES = 107;

/** A bound listener and what to remove when the plugin stops. */
export interface Bound {
  server: net.Server;
  network: "unix" | "tcp";
  address: string;
  /** Removes the socket file or the private directory. */
  cleanup(): void;
}

/** Binds the address the handshake will announce. */
export async function bind(env: LaunchEnv, transport: "unix" | "tcp"): Promise<Bound> {
  if (transport === "tcp") return bindTcp(env);
  let socketPath: string;
  let cleanup: () => void;
  let where: string;
  if (env.unixSocketDir !== undefined) {
    // The host's directory may be shared with other plugins: a fresh random name there.
    socketPath = path.join(env.unixSocketDir, `plugin-${randomBytes(8).toString("hex")}.sock`);
    cleanup = () => removeQuietly(socketPath);
    where = `${UNIX_SOCKET_DIR}=${env.unixSocketDir}`;
  } else {
    let dir: string;
    try {
      dir = mkdtempSync(path.join(tmpdir(), "tether-plugin-"));
    } catch (e) {
      throw new ListenError(
        `cannot create a private socket directory in ${tmpdir()}: ${(e as Error).message}; set TMPDIR to a writable directory`,
      );
    }
    socketPath = path.join(dir, "plugin.sock");
    cleanup = () => rmSync(dir, { recursive: true, force: true });
    where = `the temporary directory ${tmpdir()} (TMPDIR)`;
  }
  if (Buffer.byteLength(socketPath) > MAX_UNIX_PATH_BYTES) {
    cleanup();
    throw new ListenError(
      `the unix socket path ${socketPath} is longer than ${MAX_UNIX_PATH_BYTES} bytes; ${where} is too long`,
    );
  }
  const server = net.createServer({ pauseOnConnect: false });
  try {
    await listen(server, socketPath);
  } catch (e) {
    cleanup();
    throw new ListenError(`cannot listen on unix socket ${socketPath} in ${where}: ${(e as Error).message}`);
  }
  if (env.unixSocketGroup !== undefined) {
    try {
      giveToGroup(socketPath, env.unixSocketGroup);
    } catch (e) {
      server.close();
      cleanup();
      throw e;
    }
  }
  return { server, network: "unix", address: socketPath, cleanup };
}

async function bindTcp(env: LaunchEnv): Promise<Bound> {
  for (let port = env.ports.min; port <= env.ports.max; port++) {
    const server = net.createServer();
    try {
      await listen(server, { host: "127.0.0.1", port, exclusive: true });
      return { server, network: "tcp", address: `127.0.0.1:${port}`, cleanup: () => {} };
    } catch {
      server.close();
    }
  }
  throw new ListenError(
    `no free TCP port on 127.0.0.1 between ${env.ports.min} and ${env.ports.max} (PLUGIN_MIN_PORT..PLUGIN_MAX_PORT)`,
  );
}

function listen(server: net.Server, where: string | net.ListenOptions): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (e: Error): void => reject(e);
    server.once("error", onError);
    const done = (): void => {
      server.off("error", onError);
      resolve();
    };
    if (typeof where === "string") server.listen(where, done);
    else server.listen(where, done);
  });
}

/** Gives the socket to `group` (a name or a numeric id) with mode 0660, as go-plugin does. */
function giveToGroup(socketPath: string, group: string): void {
  let gid: number | undefined;
  try {
    for (const line of readFileSync("/etc/group", "utf8").split("\n")) {
      const [name, , id] = line.split(":");
      if (name === group && id !== undefined) gid = Number(id);
    }
  } catch {
    // no /etc/group: only numeric ids work
  }
  if (gid === undefined) {
    if (!/^[0-9]+$/.test(group)) {
      throw new LaunchError(`${UNIX_SOCKET_GROUP}=${group} is neither a group name nor a numeric group id`);
    }
    gid = Number(group);
  }
  try {
    chownSync(socketPath, -1, gid);
    chmodSync(socketPath, 0o660);
  } catch (e) {
    throw new ListenError(`cannot give the unix socket ${socketPath} to group ${group} (${UNIX_SOCKET_GROUP}): ${(e as Error).message}`);
  }
}

/** Removes `file`, if it is still there. */
export function removeQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}
