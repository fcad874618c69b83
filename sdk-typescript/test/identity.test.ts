import { test } from "node:test";
import assert from "node:assert/strict";
import { X509Certificate, createPublicKey } from "node:crypto";

import { derToPem, fingerprint, generateIdentity, parseCertPem } from "../src/identity.js";

test("the generated certificate is a P-256 self-signed CA:FALSE leaf for localhost with serverAuth and clientAuth", () => {
  const id = generateIdentity();
  const cert = new X509Certificate(id.certDer);
  assert.equal(cert.ca, false);
  assert.equal(cert.subjectAltName, "DNS:localhost");
  assert.equal(cert.subject, "CN=localhost");
  assert.equal(cert.issuer, "CN=localhost");
  assert.deepEqual([...(cert.keyUsage ?? [])].sort(), ["1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"]);
  assert.equal(cert.publicKey.asymmetricKeyDetails?.namedCurve, "prime256v1");
  assert.ok(cert.verify(cert.publicKey), "self-signed");
  assert.equal(createPublicKey(id.keyPem).export({ format: "jwk" }).x, cert.publicKey.export({ format: "jwk" }).x);
  const now = Date.now();
  assert.ok(Date.parse(cert.validFrom) < now && now < Date.parse(cert.validTo));
});

test("each identity is new, and its string form never shows the key", () => {
  const a = generateIdentity();
  const b = generateIdentity();
  assert.notDeepEqual(a.certDer, b.certDer);
  assert.ok(!String(a).includes("PRIVATE"));
  assert.match(String(a), new RegExp(fingerprint(a.certDer)));
});

test("PEM round-trips and anything but exactly one certificate is refused", () => {
  const id = generateIdentity();
  assert.deepEqual(parseCertPem(derToPem(id.certDer)), id.certDer);
  assert.throws(() => parseCertPem("junk"), /0 PEM certificates/);
  assert.throws(() => parseCertPem("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), /no readable certificate/);
});
