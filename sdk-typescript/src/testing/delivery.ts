/**
 * Granted secrets and config files, delivered as a tether host delivers them: one file per
 * name in a private (`0700`) directory whose path the plugin finds in `TETHER_SECRETS_DIR` /
 * `TETHER_CONFIG_DIR` — so the plugin's own `secrets.read(name)` works, and a name not granted
 * gets the SDK's real `NotGrantedError`. With none of a kind granted, its variable is unset, as
 * under a tether host that grants none.
 *
 * The plugin runs in the test's process, so the variables (and `TETHER_HOST_SERVICES`) are set
 * in `process.env` while the fake host is open, and put back as they were when it closes.
 *
 * @module
 */

import { mkdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";

import { HOST_SERVICES_VAR } from "../broker.js";
import { CONFIG_DIR, SECRETS_DIR } from "../env.js";
import { TestKitError } from "./errors.js";

/** Granted files by name: text (written as UTF-8) or bytes. */
export type GrantedValues = Readonly<Record<string, string | Uint8Array>>;

/** What a fake host grants and serves, as launch variables. */
export interface Grants {
  secrets?: GrantedValues | undefined;
  config?: GrantedValues | undefined;
  /** Whether the host serves host services (`TETHER_HOST_SERVICES=served`, else `none`). */
  hostServices: boolean;
}

/** The delivered files of one fake host and the variables that announce them. @internal */
export class Delivery {
  /** The launch variables: the delivery directories (when granted) and `TETHER_HOST_SERVICES`. */
  readonly vars: Readonly<Record<string, string | undefined>>;
  private saved: Record<string, string | undefined> | undefined;

  /** Writes the granted files into `dir` (which must exist). */
  constructor(dir: string, grants: Grants) {
    this.vars = {
      [SECRETS_DIR]: write(path.join(dir, "secrets"), "secret", grants.secrets),
      [CONFIG_DIR]: write(path.join(dir, "config"), "config file", grants.config),
      [HOST_SERVICES_VAR]: grants.hostServices ? "served" : "none",
    };
  }

  /** Sets the variables in `process.env` (unset ones deleted), remembering what was there. */
  apply(): void {
    const saved: Record<string, string | undefined> = {};
    for (const [name, value] of Object.entries(this.vars)) {
      saved[name] = process.env[name];
      setVar(name, value);
    }
    this.saved = saved;
  }

  /** Puts `process.env` back as it was before {@link apply}. */
  restore(): void {
    for (const [name, value] of Object.entries(this.saved ?? {})) setVar(name, value);
    this.saved = undefined;
  }
}

function setVar(name: string, value: string | undefined): void {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}

/** Writes one kind of granted file; the directory's path, or `undefined` when none are granted. */
function write(dir: string, kind: string, values: GrantedValues | undefined): string | undefined {
  if (values === undefined) return undefined;
  mkdirSync(dir, { mode: 0o700 });
  for (const [name, value] of Object.entries(values)) {
    if (name === "" || name === "." || name === ".." || name.includes("/") || name.includes("\0")) {
      throw new TestKitError(
        `cannot grant ${kind} ${JSON.stringify(name)}: a tether host delivers each as one file, so names must be non-empty, not '.' or '..', and contain no '/' or NUL`,
      );
    }
    writeFileSync(path.join(dir, name), value, { mode: 0o600, flag: "wx" });
  }
  return dir;
}
