/**
 * AutoMTLS identities: the plugin's throw-away certificate, and reading the host's.
 *
 * The plugin makes a P-256 key and a self-signed leaf certificate for `localhost` (CA:FALSE,
 * KeyUsage digitalSignature, EKU serverAuth + clientAuth), as tether's other SDKs do. Node's
 * `crypto` makes the key and signs; the certificate's DER is assembled here (a few fixed
 * structures) so that the SDK needs no X.509 package: the candidates either cannot make ECDSA
 * certificates (node-forge) or need a global `reflect-metadata` polyfill (`@peculiar/x509`).
 * Node's own `X509Certificate` parses what is made here in the tests.
 *
 * @module
 */

import { X509Certificate, createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from "node:crypto";

/** The TLS server name both sides use (go-plugin's). */
export const SERVER_NAME = "localhost";
/** How long a generated certificate is valid, in milliseconds (365 days). */
export const CERT_VALIDITY_MS = 365 * 24 * 3600 * 1000;
/** How far a generated certificate's validity starts in the past, for clock skew (1 day). */
export const CERT_BACKDATE_MS = 24 * 3600 * 1000;

/** A key pair and its self-signed certificate. `toString()` never shows the key. */
export class Identity {
  constructor(
    /** The certificate, DER. */
    readonly certDer: Buffer,
    /** The private key, PKCS#8 PEM. */
    readonly keyPem: string,
  ) {}

  /** The certificate, PEM. */
  get certPem(): string {
    return derToPem(this.certDer);
  }

  toString(): string {
    return `Identity(fingerprint=${fingerprint(this.certDer)})`;
  }
}

/** A fresh P-256 key and a self-signed leaf certificate for `localhost`. */
export function generateIdentity(now: Date = new Date()): Identity {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const der = selfSignedCert(privateKey, publicKey, now);
  return new Identity(der, privateKey.export({ type: "pkcs8", format: "pem" }).toString());
}

/** The DER of the one certificate in `pem`; throws for none, several, or garbage. */
export function parseCertPem(pem: string): Buffer {
  const blocks = [...pem.matchAll(/-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g)];
  if (blocks.length !== 1) {
    throw new Error(`${blocks.length} PEM certificates, expected exactly one`);
  }
  const body = (blocks[0]?.[1] ?? "").replace(/\s+/g, "");
  if (!/^[A-Za-z0-9+/]+=*$/.test(body)) {
    throw new Error("the PEM certificate is not base64");
  }
  const der = Buffer.from(body, "base64");
  try {
    new X509Certificate(der);
  } catch (e) {
    throw new Error(`no readable certificate (${(e as Error).message})`);
  }
  return der;
}

/** PEM for one DER certificate. */
export function derToPem(der: Buffer): string {
  const lines = der.toString("base64").match(/.{1,64}/g) ?? [];
  return `-----BEGIN CERTIFICATE-----\n${lines.join("\n")}\n-----END CERTIFICATE-----\n`;
}

/** SHA-256 of a certificate, lowercase hex pairs joined by `:` (as tether hosts log it). */
export function fingerprint(der: Buffer): string {
  return (createHash("sha256").update(der).digest("hex").match(/../g) ?? []).join(":");
}

// --- DER ---------------------------------------------------------------------------------

function tlv(tag: number, content: Buffer): Buffer {
  const n = content.length;
  let len: Buffer;
  if (n < 0x80) {
    len = Buffer.from([n]);
  } else {
    const bytes: number[] = [];
    for (let rest = n; rest > 0; rest = Math.floor(rest / 256)) bytes.unshift(rest % 256);
    len = Buffer.from([0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([Buffer.from([tag]), len, content]);
}

const seq = (...items: Buffer[]): Buffer => tlv(0x30, Buffer.concat(items));
const set = (...items: Buffer[]): Buffer => tlv(0x31, Buffer.concat(items));
const explicit = (n: number, inner: Buffer): Buffer => tlv(0xa0 | n, inner);
const octets = (content: Buffer): Buffer => tlv(0x04, content);
const bits = (content: Buffer, unused = 0): Buffer => tlv(0x03, Buffer.concat([Buffer.from([unused]), content]));
const TRUE = Buffer.from([0x01, 0x01, 0xff]);

function integer(bytes: Buffer): Buffer {
  let i = 0;
  while (i < bytes.length - 1 && bytes[i] === 0 && ((bytes[i + 1] ?? 0) & 0x80) === 0) i++;
  const trimmed = bytes.subarray(i);
  const padded = ((trimmed[0] ?? 0) & 0x80) !== 0 ? Buffer.concat([Buffer.from([0]), trimmed]) : trimmed;
  return tlv(0x02, padded);
}

function oid(dotted: string): Buffer {
  const parts = dotted.split(".").map(Number);
  const [a = 0, b = 0, ...rest] = parts;
  const out: number[] = [a * 40 + b];
  for (const part of rest) {
    const chunk: number[] = [part & 0x7f];
    for (let v = Math.floor(part / 128); v > 0; v = Math.floor(v / 128)) chunk.unshift(0x80 | (v & 0x7f));
    out.push(...chunk);
  }
  return tlv(0x06, Buffer.from(out));
}

function time(date: Date): Buffer {
  const iso = date.toISOString(); // YYYY-MM-DDTHH:MM:SS.sssZ
  const digits = iso.slice(0, 19).replace(/[-T:]/g, "");
  const year = date.getUTCFullYear();
  // RFC 5280: UTCTime through 2049, GeneralizedTime from 2050.
  return year < 2050
    ? tlv(0x17, Buffer.from(`${digits.slice(2)}Z`, "ascii"))
    : tlv(0x18, Buffer.from(`${digits}Z`, "ascii"));
}

const OID_ECDSA_SHA256 = "1.2.840.10045.4.3.2";
const OID_COMMON_NAME = "2.5.4.3";
const OID_BASIC_CONSTRAINTS = "2.5.29.19";
const OID_KEY_USAGE = "2.5.29.15";
const OID_EXT_KEY_USAGE = "2.5.29.37";
const OID_SUBJECT_ALT_NAME = "2.5.29.17";
const OID_SERVER_AUTH = "1.3.6.1.5.5.7.3.1";
const OID_CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return critical ? seq(oid(id), TRUE, octets(value)) : seq(oid(id), octets(value));
}

function selfSignedCert(privateKey: KeyObject, publicKey: KeyObject, now: Date): Buffer {
  const algorithm = seq(oid(OID_ECDSA_SHA256));
  const name = seq(set(seq(oid(OID_COMMON_NAME), tlv(0x0c, Buffer.from(SERVER_NAME, "utf8")))));
  const serial = randomBytes(16);
  serial[0] = (serial[0] ?? 0) & 0x7f; // positive, as RFC 5280 requires
  const extensions = seq(
    extension(OID_BASIC_CONSTRAINTS, true, seq()), // CA:FALSE
    extension(OID_KEY_USAGE, true, bits(Buffer.from([0x80]), 7)), // digitalSignature
    extension(OID_EXT_KEY_USAGE, false, seq(oid(OID_SERVER_AUTH), oid(OID_CLIENT_AUTH))),
    extension(OID_SUBJECT_ALT_NAME, false, seq(tlv(0x82, Buffer.from(SERVER_NAME, "ascii")))),
  );
  const tbs = seq(
    explicit(0, integer(Buffer.from([2]))), // v3
    integer(serial),
    algorithm,
    name,
    seq(time(new Date(now.getTime() - CERT_BACKDATE_MS)), time(new Date(now.getTime() + CERT_VALIDITY_MS))),
    name,
    publicKey.export({ type: "spki", format: "der" }),
    explicit(3, extensions),
  );
  const signature = sign("sha256", tbs, privateKey); // DER ECDSA-Sig-Value
  return seq(tbs, algorithm, bits(signature));
}
