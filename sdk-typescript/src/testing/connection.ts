/**
 * The fake host's connection to the plugin it serves, made from the plugin's handshake as a
 * host makes it: a grpc-js channel with AutoMTLS pinned to the certificate the handshake
 * announced (the host presenting its own), straight to the announced socket in go-plugin's
 * default broker mode; in the multiplexed mode one connection carrying a yamux session (the
 * host is the yamux client), whose streams the host opens for its channel — through a relay
 * socket, since grpc-js dials sockets, not streams — and the plugin opens for brokered dials.
 *
 * @module
 */

import * as net from "node:net";
import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";

import { removeQuietly } from "../listen.js";
import { pipeBoth } from "../relay.js";
import { DIAL_CHANNEL_OPTIONS, type Pinned } from "../tls.js";
import { derToPem } from "../identity.js";
import { Session, type YamuxStream } from "../yamux.js";
import type { Announced } from "./handshake.js";
import { TestKitError } from "./errors.js";

/** Name of the multiplexed mode's relay socket in the host's directory. */
const RELAY_SOCKET = "main.sock";

/** A host's connection to its plugin. */
export interface HostConnection {
  /** The channel every host-side client of the plugin's services uses. */
  readonly channel: grpc.Channel;
  /** Streams the plugin opens (multiplexed mode: its brokered dials) go to `handler`. */
  onInbound(handler: (stream: YamuxStream) => void): void;
  /** Closes the channel and, in the multiplexed mode, the relay and the session. */
  close(): void;
}

/**
 * Credentials of a host dialling its plugin: it presents its identity (`pinned.identity`) and
 * accepts exactly the certificate the handshake announced (`pinned.hostCert`: here the peer's).
 */
export function hostCredentials(pinned: Pinned): grpc.ChannelCredentials {
  const peer = pinned.hostCert;
  return grpc.credentials.createSsl(
    Buffer.from(derToPem(peer)),
    Buffer.from(pinned.identity.keyPem),
    Buffer.from(pinned.identity.certPem),
    {
      checkServerIdentity: (_name, cert) =>
        cert.raw.equals(peer) ? undefined : new Error("the plugin's TLS certificate is not the one its handshake line announced"),
    },
  );
}

/** Connects to the plugin at `announced`; `hostDir` holds the host's own sockets. */
export async function connect(announced: Announced, pinned: Pinned, hostDir: string): Promise<HostConnection> {
  const credentials = hostCredentials(pinned);
  if (announced.multiplex !== true) {
    const target = announced.network === "unix" ? `unix:${announced.address}` : announced.address;
    const channel = new grpc.Channel(target, credentials, DIAL_CHANNEL_OPTIONS);
    return { channel, onInbound: () => undefined, close: () => channel.close() };
  }
  return connectMultiplexed(announced, credentials, hostDir);
}

async function connectMultiplexed(announced: Announced, credentials: grpc.ChannelCredentials, hostDir: string): Promise<HostConnection> {
  const raw = await dialRaw(announced);
  let inbound: ((stream: YamuxStream) => void) | undefined;
  const session = new Session(raw, {
    client: true,
    onStream: (stream) => (inbound === undefined ? stream.destroy() : inbound(stream)),
  });
  // Every connection grpc-js makes to the relay is a new stream the plugin routes to its main
  // server (no knock came before it).
  const relayPath = path.join(hostDir, RELAY_SOCKET);
  const relay = net.createServer((conn) => {
    try {
      pipeBoth(conn, session.open());
    } catch {
      conn.destroy(); // the session has ended
    }
  });
  await new Promise<void>((resolve, reject) => {
    relay.once("error", (e) => reject(new TestKitError(`the fake host cannot listen on its relay socket ${relayPath}: ${e.message}`)));
    relay.listen(relayPath, () => resolve());
  });
  const channel = new grpc.Channel(`unix:${relayPath}`, credentials, DIAL_CHANNEL_OPTIONS);
  return {
    channel,
    onInbound: (handler) => (inbound = handler),
    close: () => {
      channel.close();
      relay.close();
      removeQuietly(relayPath);
      session.close();
    },
  };
}

/** The one raw connection of the multiplexed mode. */
function dialRaw(announced: Announced): Promise<net.Socket> {
  const [host = "", port = ""] = announced.network === "tcp" ? splitHostPort(announced.address) : [];
  const socket =
    announced.network === "unix" ? net.createConnection({ path: announced.address }) : net.createConnection({ host, port: Number(port) });
  return new Promise((resolve, reject) => {
    socket.once("connect", () => resolve(socket));
    socket.once("error", (e) =>
      reject(
        new TestKitError(
          `the fake host cannot connect to the address the plugin announced, ${announced.network}:${JSON.stringify(announced.address)}: ${e.message}`,
        ),
      ),
    );
  });
}

function splitHostPort(address: string): [string, string] {
  const at = address.lastIndexOf(":");
  return [address.slice(0, at).replace(/^\[(.*)\]$/, "$1"), address.slice(at + 1)];
}
