/**
 * The handshake line a plugin prints first on stdout (sans-IO):
 * `CORE|APP|NETWORK|ADDRESS|PROTOCOL|SERVER_CERT[|MUX]`.
 *
 * @module
 */

/** go-plugin's core protocol version. */
export const CORE_PROTOCOL_VERSION = 1;
/** The only protocol tether speaks (go-plugin's other one, `netrpc`, is not supported). */
export const PROTOCOL_GRPC = "grpc";

/** What the plugin announces to its host. */
export interface Handshake {
  appVersion: number;
  network: "unix" | "tcp";
  /** The socket path, or `127.0.0.1:PORT`. */
  address: string;
  /** AutoMTLS: the plugin's certificate, DER; `undefined` for plaintext. */
  serverCert: Buffer | undefined;
  /**
   * go-plugin's seventh field: `undefined` when the host did not offer multiplexing (hosts up
   * to go-plugin 1.5 split into at most six fields, so a seventh would corrupt the certificate),
   * else whether the plugin multiplexes.
   */
  multiplex: boolean | undefined;
}

/**
 * A DER certificate for the SERVER_CERT field: base64's standard alphabet without padding
 * (Go's `RawStdEncoding`; Go hosts reject padded input).
 */
export function encodeCert(der: Buffer): string {
  return der.toString("base64").replace(/=+$/, "");
}

/** The handshake line, newline included. */
export function handshakeLine(h: Handshake): string {
  if (/[|\n\r]/.test(h.address)) {
    throw new Error(`address ${JSON.stringify(h.address)} cannot be put in a handshake line`);
  }
  const fields = [
    String(CORE_PROTOCOL_VERSION),
    String(h.appVersion),
    h.network,
    h.address,
    PROTOCOL_GRPC,
    h.serverCert === undefined ? "" : encodeCert(h.serverCert),
  ];
  if (h.multiplex !== undefined) fields.push(h.multiplex ? "true" : "false");
  return `${fields.join("|")}\n`;
}
