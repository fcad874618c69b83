/**
 * Reading the secrets and config files a tether host granted this plugin.
 *
 * A tether host delivers each granted secret (config file) as one file, named as the plugin's
 * manifest requested it, in a private directory whose absolute path it passes in
 * `TETHER_SECRETS_DIR` (`TETHER_CONFIG_DIR`). Values never travel in environment variables,
 * and this module never puts a value in an error message or a log.
 *
 * @module
 */

import { constants, openSync, readFileSync, closeSync, readdirSync } from "node:fs";
import * as path from "node:path";

import { CONFIG_DIR, SECRETS_DIR } from "./env.js";
import { InvalidNameError, NotGrantedError } from "./errors.js";

/**
 * Why the `kind` (`secret` or `config file`) `name`, listed under `manifestKey`, is not
 * available (`others`: other files of that kind were delivered) and what to do, in the one
 * wording every tether SDK uses, word for word (`proto/testdata/not-available.json`): a plugin
 * cannot tell a name missing from its manifest from one the operator did not grant, so it names
 * both remedies.
 */
function notAvailable(kind: string, envVar: string, manifestKey: string, name: string, others: boolean): string {
  const quoted = JSON.stringify(name);
  const why = others
    ? `the host delivered other ${kind}s, not this one (no file ${quoted} in ${envVar})`
    : `the host delivered no ${kind}s (${envVar} is not set)`;
  const line = `\`${manifestKey} = [${quoted}]\``;
  return (
    `${kind} ${quoted} is not available to this plugin: ${why}. To receive it, list it in the plugin's manifest (${line}) ` +
    `and have the operator grant it in the grants file (${line} under the plugin's \`[plugins.NAME]\`).`
  );
}

/** One kind of granted file: {@link secrets} or {@link config}. */
export class GrantedFiles {
  constructor(
    private readonly envVar: string,
    /** `secret` or `config file`, for messages. */
    private readonly kind: string,
    /** Where the manifest requests them (`secrets` / `config`), for messages. */
    private readonly manifestKey: string,
    private readonly lookup: (name: string) => string | undefined = (name) => process.env[name],
  ) {}

  /**
   * The content of the granted file `name`, as bytes.
   *
   * @throws {InvalidNameError} for a name that could name another file.
   * @throws {NotGrantedError} when the host granted no such file.
   */
  readBytes(name: string): Buffer {
    if (name === "" || name === "." || name === ".." || name.includes("/") || name.includes("\0")) {
      throw new InvalidNameError(
        `invalid ${this.kind} name ${JSON.stringify(name)}: names must be non-empty, not '.' or '..', and contain no '/' or NUL`,
      );
    }
    const directory = this.lookup(this.envVar);
    if (!directory) {
      throw new NotGrantedError(notAvailable(this.kind, this.envVar, this.manifestKey, name, false));
    }
    let fd: number;
    try {
      // O_NOFOLLOW: the name must be the granted file itself, not a link elsewhere.
      fd = openSync(path.join(directory, name), constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      if (err.code === "ENOENT") {
        throw new NotGrantedError(notAvailable(this.kind, this.envVar, this.manifestKey, name, true));
      }
      throw new NotGrantedError(`${this.kind} ${JSON.stringify(name)} cannot be read from ${this.envVar}: ${err.code ?? err.message}`);
    }
    try {
      return readFileSync(fd);
    } finally {
      closeSync(fd);
    }
  }

  /** The content of the granted file `name` as UTF-8 text (see {@link readBytes}). */
  read(name: string): string {
    return this.readBytes(name).toString("utf8");
  }

  /** The names of all granted files of this kind, sorted (empty when none were granted). */
  names(): string[] {
    const directory = this.lookup(this.envVar);
    if (!directory) return [];
    return readdirSync(directory, { withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => e.name)
      .sort();
  }
}

/** The secrets the host granted (`TETHER_SECRETS_DIR`): `secrets.read("api_token")`. */
export const secrets = new GrantedFiles(SECRETS_DIR, "secret", "secrets");
/** The config files the host granted (`TETHER_CONFIG_DIR`): `config.read("settings.json")`. */
export const config = new GrantedFiles(CONFIG_DIR, "config file", "config");
