import { test } from "node:test";
import assert from "node:assert/strict";

import { encodeCert, handshakeLine } from "../src/handshake.js";

test("the certificate is standard base64 without padding", () => {
  assert.equal(encodeCert(Buffer.from([0xfb, 0xff])), "+/8");
  assert.equal(encodeCert(Buffer.from("ab")), "YWI");
});

test("the seventh field appears only when the host offered multiplexing", () => {
  const base = { appVersion: 2, network: "unix" as const, address: "/tmp/x/p.sock", serverCert: Buffer.from("ab") };
  assert.equal(handshakeLine({ ...base, multiplex: undefined }), "1|2|unix|/tmp/x/p.sock|grpc|YWI\n");
  assert.equal(handshakeLine({ ...base, multiplex: true }), "1|2|unix|/tmp/x/p.sock|grpc|YWI|true\n");
  assert.equal(handshakeLine({ ...base, multiplex: false, serverCert: undefined }), "1|2|unix|/tmp/x/p.sock|grpc||false\n");
});

test("an address that would break the line is refused", () => {
  assert.throws(() => handshakeLine({ appVersion: 1, network: "unix", address: "/a|b", serverCert: undefined, multiplex: undefined }));
});
