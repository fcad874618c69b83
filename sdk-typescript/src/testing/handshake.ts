/**
 * The handshake line read as a host reads it (sans-IO): the SDK's `handshake.ts` writes it, this
 * file parses it with go-plugin's rules, so the fake host connects to what the plugin announced
 * rather than to what the kit knows it bound.
 *
 * @module
 */

import { CORE_PROTOCOL_VERSION, PROTOCOL_GRPC } from "../handshake.js";
import { TestKitError } from "./errors.js";

/** What a plugin announced in its handshake line. */
export interface Announced {
  appVersion: number;
  network: "unix" | "tcp";
  /** The socket path, or `HOST:PORT`. */
  address: string;
  /** AutoMTLS: the plugin's certificate, DER; `undefined` when it announced none (plaintext). */
  serverCert: Buffer | undefined;
  /** go-plugin's seventh field: `undefined` when absent, else whether the plugin multiplexes. */
  multiplex: boolean | undefined;
}

/**
 * Parses `CORE|APP|NETWORK|ADDRESS|PROTOCOL|SERVER_CERT[|MUX]` (the newline may be there or not).
 *
 * @throws {TestKitError} naming the field that is wrong and quoting the line.
 */
export function parseHandshakeLine(line: string): Announced {
  const text = line.replace(/\r?\n$/, "");
  const fail = (what: string): never => {
    throw new TestKitError(`the plugin's handshake line ${JSON.stringify(text)} is not go-plugin's: ${what}`);
  };
  const fields = text.split("|");
  if (fields.length < 6 || fields.length > 7) fail(`${fields.length} fields, expected 6 or 7`);
  const [core = "", app = "", network = "", address = "", protocol = "", cert = "", mux] = fields;
  if (core !== String(CORE_PROTOCOL_VERSION)) fail(`core protocol version ${JSON.stringify(core)}, expected ${CORE_PROTOCOL_VERSION}`);
  if (!/^[0-9]+$/.test(app)) fail(`app protocol version ${JSON.stringify(app)} is not a number`);
  if (network !== "unix" && network !== "tcp") fail(`network ${JSON.stringify(network)} is not unix or tcp`);
  if (address === "") fail("the address is empty");
  if (protocol !== PROTOCOL_GRPC) fail(`protocol ${JSON.stringify(protocol)}, expected ${PROTOCOL_GRPC}`);
  // Go's RawStdEncoding: the standard alphabet, no padding.
  if (!/^[A-Za-z0-9+/]*$/.test(cert)) fail("the certificate is not unpadded standard base64");
  if (mux !== undefined && mux !== "true" && mux !== "false") fail(`the multiplexing field ${JSON.stringify(mux)} is not true or false`);
  return {
    appVersion: Number(app),
    network: network as "unix" | "tcp",
    address,
    serverCert: cert === "" ? undefined : Buffer.from(cert, "base64"),
    multiplex: mux === undefined ? undefined : mux === "true",
  };
}
