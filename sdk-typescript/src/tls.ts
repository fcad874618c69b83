/**
 * AutoMTLS with exact pinning of the host's certificate, for every connection in either
 * direction.
 *
 * Accepting: the SDK does the TLS handshake itself (`tls.TLSSocket` over the accepted socket
 * or yamux stream: TLS ≥ 1.2, ALPN `h2`, a client certificate required) and compares the
 * client's certificate with the host's byte for byte before the connection reaches grpc-js.
 * No chain is validated, so Go hosts' P-521 CA:TRUE certificates work like tether's P-256
 * leaves, and a certificate merely *signed* by a CA:TRUE host certificate is refused.
 *
 * Dialling: grpc-js's own TLS (Node's OpenSSL, which verifies P-521) with the host's
 * certificate as the only root and a `checkServerIdentity` that accepts exactly that
 * certificate.
 *
 * @module
 */

import * as tls from "node:tls";
import type { Duplex } from "node:stream";
import * as grpc from "@grpc/grpc-js";

import { SERVER_NAME, derToPem, type Identity } from "./identity.js";
import { log } from "./log.js";

/** Milliseconds a connecting peer gets to complete the TLS handshake. */
export const TLS_HANDSHAKE_TIMEOUT_MS = 10_000;

/** The plugin's identity and the one certificate it accepts. */
export interface Pinned {
  identity: Identity;
  /** The host's certificate, DER (from `PLUGIN_CLIENT_CERT`). */
  hostCert: Buffer;
}

/**
 * The server side of TLS for one endpoint: {@link TlsAcceptor.accept} takes any accepted
 * connection (a socket or a yamux stream) and calls `onReady` with the decrypted socket once
 * the client presented exactly the host's certificate; other connections are closed.
 *
 * A `tls.Server` that never listens does the handshakes (it is fed with `emit("connection")`):
 * a `tls.TLSSocket` made by hand and handed to an HTTP/2 server loses the client's first
 * frames, one from `tls.Server` does not.
 */
export class TlsAcceptor {
  private readonly server: tls.Server;

  constructor(
    private readonly pinned: Pinned,
    onReady: (socket: tls.TLSSocket) => void,
    handshakeTimeoutMs: number = TLS_HANDSHAKE_TIMEOUT_MS,
  ) {
    this.server = tls.createServer(
      {
        key: pinned.identity.keyPem,
        cert: pinned.identity.certPem,
        // Named in the CertificateRequest, so a client picks the certificate the host sent us.
        ca: derToPem(pinned.hostCert),
        requestCert: true,
        // The chain is not validated: the certificate is compared below, byte for byte.
        rejectUnauthorized: false,
        minVersion: "TLSv1.2",
        ALPNProtocols: ["h2"],
        handshakeTimeout: handshakeTimeoutMs,
      },
      (socket) => {
        const peer = socket.getPeerCertificate(false);
        if (!peer || !peer.raw || !peer.raw.equals(this.pinned.hostCert)) {
          log("warn", "refused a TLS connection whose client certificate is not the host's certificate from PLUGIN_CLIENT_CERT");
          socket.destroy();
          return;
        }
        onReady(socket);
      },
    );
    this.server.on("tlsClientError", (e: Error, socket: tls.TLSSocket) => {
      log("debug", "a TLS handshake failed", { error: e.message });
      socket.destroy();
    });
  }

  /** Does the TLS handshake on `raw`. */
  accept(raw: Duplex): void {
    this.server.emit("connection", raw);
  }
}

/**
 * grpc-js credentials for dialling the host (a broker id it serves): present our identity,
 * accept exactly the host's certificate.
 */
export function dialCredentials(pinned: Pinned): grpc.ChannelCredentials {
  const host = pinned.hostCert;
  return grpc.credentials.createSsl(
    Buffer.from(derToPem(host)),
    Buffer.from(pinned.identity.keyPem),
    Buffer.from(pinned.identity.certPem),
    {
      checkServerIdentity: (_name, cert) =>
        cert.raw.equals(host)
          ? undefined
          : new Error("the server's certificate is not the host's certificate from PLUGIN_CLIENT_CERT"),
    },
  );
}

/** Channel options for brokered dials: the name the host's certificate is for. */
export const DIAL_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.ssl_target_name_override": SERVER_NAME,
  // For unix targets grpc-js would send the socket path as :authority; hyper (tether hosts)
  // rejects that as malformed, and go-plugin uses "localhost" too.
  "grpc.default_authority": SERVER_NAME,
};
