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
    const remedy = `request it in the plugin manifest's \`${this.manifestKey}\` list and grant it in the host's policy`;
    if (!directory) {
      throw new NotGrantedError(
        `${this.kind} ${JSON.stringify(name)} is not available: the host granted this plugin no ${this.kind}s (${this.envVar} is not set); ${remedy}`,
      );
    }
    let fd: number;
    try {
      // O_NOFOLLOW: the name must be the granted file itself, not a link elsewhere.
      fd = openSync(path.join(directory, name), constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      if (err.code === "ENOENT") {
        throw new NotGrantedError(
          `${this.kind} ${JSON.stringify(name)} is not available: it is not among the ${this.kind}s the host granted (no file ${JSON.stringify(name)} in ${this.envVar}); ${remedy}`,
        );
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
