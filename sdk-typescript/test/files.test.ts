import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

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
        e instanceof NotGrantedError && /TETHER_SECRETS_DIR/.test(e.message) && /`secrets = \["api_token"\]`/.test(e.message) && !/s3cret/.test(e.message),
    );
    const none = new GrantedFiles("TETHER_CONFIG_DIR", "config file", "config", () => undefined);
    assert.throws(() => none.read("settings.json"), /no config files \(TETHER_CONFIG_DIR is not set\).*`config = \["settings.json"\]`/);
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

/** The messages every tether SDK words the same, word for word (from `dist/test/`: the repository is three up). */
const NOT_AVAILABLE = JSON.parse(
  readFileSync(fileURLToPath(new URL("../../../proto/testdata/not-available.json", import.meta.url)), "utf8"),
) as { cases: { kind: string; name: string; delivered: string; message: string }[] };

test("a value not available is worded exactly as every SDK words it", () => {
  assert.equal(NOT_AVAILABLE.cases.length, 4);
  withDir((dir) => {
    for (const c of NOT_AVAILABLE.cases) {
      const [envVar, kind, key] =
        c.kind === "secret" ? ["TETHER_SECRETS_DIR", "secret", "secrets"] : ["TETHER_CONFIG_DIR", "config file", "config"];
      const files = new GrantedFiles(envVar, kind, key, () => (c.delivered === "none" ? undefined : dir));
      assert.throws(
        () => files.read(c.name),
        (e: unknown) => e instanceof NotGrantedError && e.message === c.message,
        `${c.kind} ${c.delivered}`,
      );
    }
  });
});
