import { test } from "node:test";
import assert from "node:assert/strict";

import { chooseVersion, parseGoBool, readLaunchEnv, type LaunchEnv } from "../src/env.js";
import { LaunchError, NOT_LAUNCHED_BY_HOST_MESSAGE, NotLaunchedByHostError } from "../src/errors.js";
import { generateIdentity } from "../src/identity.js";

const cookie = { key: "BASIC_PLUGIN", value: "hello" };
const read = (vars: Record<string, string>, tcp = false): LaunchEnv => readLaunchEnv(cookie, (n) => vars[n], { tcp });

test("a missing cookie is reported with go-plugin's message", () => {
  assert.throws(
    () => read({ PLUGIN_PROTOCOL_VERSIONS: "1" }),
    (e: unknown) => e instanceof NotLaunchedByHostError && !e.mismatch && e.message === NOT_LAUNCHED_BY_HOST_MESSAGE,
  );
});

test("a wrong or empty cookie is a mismatch, checked before any other variable", () => {
  for (const value of ["hellO", ""]) {
    assert.throws(
      () => read({ BASIC_PLUGIN: value, PLUGIN_PROTOCOL_VERSIONS: "x", PLUGIN_CLIENT_CERT: "junk" }),
      (e: unknown) => e instanceof NotLaunchedByHostError && e.mismatch,
    );
  }
});

test("only the cookie is required and empty variables count as unset", () => {
  const names = [
    "PLUGIN_PROTOCOL_VERSIONS", "PLUGIN_MIN_PORT", "PLUGIN_MAX_PORT", "PLUGIN_CLIENT_CERT", "PLUGIN_MULTIPLEX_GRPC",
    "PLUGIN_UNIX_SOCKET_DIR", "PLUGIN_UNIX_SOCKET_GROUP", "TMPDIR", "TETHER_SECRETS_DIR", "TETHER_CONFIG_DIR",
  ];
  const vars: Record<string, string> = { BASIC_PLUGIN: "hello" };
  for (const n of names) vars[n] = "";
  const env = read(vars, true);
  assert.deepEqual(env.appVersions, []);
  assert.deepEqual(env.ports, { min: 10_000, max: 25_000 });
  assert.equal(env.clientCert, undefined);
  assert.equal(env.multiplex, undefined);
  assert.equal(env.unixSocketDir, undefined);
  assert.equal(env.secretsDir, undefined);
});

test("versions are read in the host's order; a malformed list is an error", () => {
  assert.deepEqual(read({ BASIC_PLUGIN: "hello", PLUGIN_PROTOCOL_VERSIONS: "2, 1,4," }).appVersions, [2, 1, 4]);
  assert.throws(() => read({ BASIC_PLUGIN: "hello", PLUGIN_PROTOCOL_VERSIONS: "1,two" }), LaunchError);
});

test("the highest common version is chosen, else the plugin's lowest", () => {
  assert.equal(chooseVersion([1, 2, 3], [2, 3, 4]), 3);
  assert.equal(chooseVersion([1], [4, 2]), 2);
});

test("a client certificate turns TLS on and garbage is an error", () => {
  const host = generateIdentity();
  assert.deepEqual(read({ BASIC_PLUGIN: "hello", PLUGIN_CLIENT_CERT: host.certPem }).clientCert, host.certDer);
  assert.throws(() => read({ BASIC_PLUGIN: "hello", PLUGIN_CLIENT_CERT: "not pem" }), /PLUGIN_CLIENT_CERT/);
  assert.throws(() => read({ BASIC_PLUGIN: "hello", PLUGIN_CLIENT_CERT: host.certPem + host.certPem }), /exactly one/);
});

test("ports are read only for TCP, with defaults, and bad or reversed ranges are errors naming the variable", () => {
  assert.deepEqual(read({ BASIC_PLUGIN: "hello", PLUGIN_MIN_PORT: "20000" }, true).ports, { min: 20_000, max: 25_000 });
  assert.deepEqual(read({ BASIC_PLUGIN: "hello", PLUGIN_MIN_PORT: "junk" }, false).ports, { min: 10_000, max: 25_000 });
  assert.throws(() => read({ BASIC_PLUGIN: "hello", PLUGIN_MIN_PORT: "70000" }, true), /PLUGIN_MIN_PORT/);
  assert.throws(() => read({ BASIC_PLUGIN: "hello", PLUGIN_MAX_PORT: " 1" }, true), /PLUGIN_MAX_PORT/);
  assert.throws(() => read({ BASIC_PLUGIN: "hello", PLUGIN_MIN_PORT: "3000", PLUGIN_MAX_PORT: "2000" }, true), /greater/);
});

test("multiplexing is known only when set, and read as Go reads a bool", () => {
  for (const v of ["1", "t", "T", "true", "TRUE", "True"]) assert.equal(parseGoBool(v), true, v);
  for (const v of ["0", "f", "false", "yes", "tRuE"]) assert.equal(parseGoBool(v), false, v);
  assert.equal(read({ BASIC_PLUGIN: "hello", PLUGIN_MULTIPLEX_GRPC: "true" }).multiplex, true);
  assert.equal(read({ BASIC_PLUGIN: "hello", PLUGIN_MULTIPLEX_GRPC: "no" }).multiplex, false);
});
