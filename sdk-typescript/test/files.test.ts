import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";

import { GrantedFiles } from "../src/files.js";
import { InvalidNameError, NotGrantedError } from "../src/errors.js";

function withDir(body: (dir: string) => void): void {
  const dir = mkdtempSync(path.join(tmpdir(), "tether-files-test-"));
  try {
    body(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("a granted secret is read from the delivered directory", () => {
  withDir((dir) => {
    writeFileSync(path.join(dir, "api_token"), "s3cret");
    const secrets = new GrantedFiles("TETHER_SECRETS_DIR", "secret", "secrets", () => dir);
    assert.equal(secrets.read("api_token"), "s3cret");
    assert.deepEqual(secrets.names(), ["api_token"]);
  });
});

test("errors name the variable and the manifest key, never the value", () => {
  withDir((dir) => {
    writeFileSync(path.join(dir, "other"), "s3cret");
    const secrets = new GrantedFiles("TETHER_SECRETS_DIR", "secret", "secrets", () => dir);
    assert.throws(
      () => secrets.read("api_token"),
      (e: unknown) =>
        e instanceof NotGrantedError && /TETHER_SECRETS_DIR/.test(e.message) && /`secrets`/.test(e.message) && !/s3cret/.test(e.message),
    );
    const none = new GrantedFiles("TETHER_CONFIG_DIR", "config file", "config", () => undefined);
    assert.throws(() => none.read("settings.json"), /no config files \(TETHER_CONFIG_DIR is not set\).*`config`/);
    assert.deepEqual(none.names(), []);
  });
});

test("names that could reach another file are refused, and links are not followed", () => {
  withDir((dir) => {
    writeFileSync(path.join(dir, "real"), "x");
    symlinkSync(path.join(dir, "real"), path.join(dir, "link"));
    const secrets = new GrantedFiles("TETHER_SECRETS_DIR", "secret", "secrets", () => dir);
    for (const name of ["", ".", "..", "a/b", "../x", "a\0b"]) assert.throws(() => secrets.read(name), InvalidNameError, name);
    assert.throws(() => secrets.read("link"), NotGrantedError);
  });
});
