/**
 * The launch half of the handshake: the environment variables a host sets for a plugin, read
 * with the same rules as tether's `proto/src/env.rs` (`LaunchEnv::from_lookup`). Sans-IO: it
 * takes a lookup function, so every rule is tested without processes.
 *
 * @module
 */

import { parseCertPem } from "./identity.js";
import { LaunchError, NotLaunchedByHostError } from "./errors.js";

/** Comma-separated app protocol versions the host supports, e.g. `1,2`. */
export const PROTOCOL_VERSIONS = "PLUGIN_PROTOCOL_VERSIONS";
/** Lowest TCP port a plugin may listen on when it serves over TCP. */
export const MIN_PORT = "PLUGIN_MIN_PORT";
/** Highest TCP port a plugin may listen on when it serves over TCP. */
export const MAX_PORT = "PLUGIN_MAX_PORT";
/** AutoMTLS: the host's certificate, PEM. Its presence turns TLS on. */
export const CLIENT_CERT = "PLUGIN_CLIENT_CERT";
/** Set (to `true`) when the host supports go-plugin's multiplexed broker (go-plugin ≥ 1.6). */
export const MULTIPLEX_GRPC = "PLUGIN_MULTIPLEX_GRPC";
/** Directory in which the plugin should create its unix socket (go-plugin ≥ 1.5). */
export const UNIX_SOCKET_DIR = "PLUGIN_UNIX_SOCKET_DIR";
/** Group that should own the plugin's unix socket (go-plugin ≥ 1.5). */
export const UNIX_SOCKET_GROUP = "PLUGIN_UNIX_SOCKET_GROUP";
/** The temporary directory (tether hosts set it to the plugin's private directory). */
export const TMPDIR = "TMPDIR";
/** tether: absolute path of the plugin's private directory of granted secrets. */
export const SECRETS_DIR = "TETHER_SECRETS_DIR";
/** tether: absolute path of the plugin's private directory of granted config files. */
export const CONFIG_DIR = "TETHER_CONFIG_DIR";

/** go-plugin's default lowest TCP port. */
export const DEFAULT_MIN_PORT = 10_000;
/** go-plugin's default highest TCP port. */
export const DEFAULT_MAX_PORT = 25_000;

/** go-plugin's magic cookie: the variable `key` set to `value`. Not a security feature. */
export interface MagicCookie {
  key: string;
  value: string;
}

/** An inclusive range of TCP ports. */
export interface PortRange {
  min: number;
  max: number;
}

/** Everything a host tells a plugin at launch. An empty variable counts as unset. */
export interface LaunchEnv {
  cookie: MagicCookie;
  /** The app protocol versions the host offered, in its order. */
  appVersions: number[];
  ports: PortRange;
  /** AutoMTLS is on and this is the host's certificate (DER); `undefined` means plaintext. */
  clientCert: Buffer | undefined;
  unixSocketDir: string | undefined;
  unixSocketGroup: string | undefined;
  tmpDir: string | undefined;
  /**
   * `undefined` when the host did not set {@link MULTIPLEX_GRPC} (then the handshake must not
   * carry go-plugin's seventh field), else whether it asks for the multiplexed broker.
   */
  multiplex: boolean | undefined;
  secretsDir: string | undefined;
  configDir: string | undefined;
}

/** Looks a variable up, like `(name) => process.env[name]`. */
export type Lookup = (name: string) => string | undefined;

/**
 * Reads what the host set through `lookup`, checking `cookie` before anything else.
 *
 * Rules (go-plugin's): an empty variable counts as unset; unset versions mean none offered; an
 * unset port bound takes its default; {@link MULTIPLEX_GRPC} is read as Go's
 * `strconv.ParseBool` reads `true`, anything else meaning `false`. Ports are read only when
 * `tcp` is set (go-plugin reads them only when it serves over TCP).
 *
 * @throws {NotLaunchedByHostError} the cookie is missing or wrong (checked first).
 * @throws {LaunchError} a malformed version list, certificate or port.
 */
export function readLaunchEnv(cookie: MagicCookie, lookup: Lookup, options: { tcp?: boolean } = {}): LaunchEnv {
  const found = lookup(cookie.key);
  if (found === undefined) throw new NotLaunchedByHostError(cookie.key, false);
  if (found !== cookie.value) throw new NotLaunchedByHostError(cookie.key, true);
  const text = (name: string): string | undefined => {
    const value = lookup(name);
    return value === undefined || value === "" ? undefined : value;
  };

  const appVersions = parseVersionList(text(PROTOCOL_VERSIONS) ?? "");
  const pem = text(CLIENT_CERT);
  let clientCert: Buffer | undefined;
  if (pem !== undefined) {
    try {
      clientCert = parseCertPem(pem);
    } catch (e) {
      throw new LaunchError(`${CLIENT_CERT} from the host is not usable: ${(e as Error).message}`);
    }
  }
  const port = (name: string, fallback: number): number => {
    const value = text(name);
    if (value === undefined) return fallback;
    if (!/^\+?[0-9]+$/.test(value) || Number(value) > 65535) {
      throw new LaunchError(`environment variable ${name}=${JSON.stringify(value)} is not a TCP port number (0-65535)`);
    }
    return Number(value);
  };
  const ports = options.tcp
    ? { min: port(MIN_PORT, DEFAULT_MIN_PORT), max: port(MAX_PORT, DEFAULT_MAX_PORT) }
    : { min: DEFAULT_MIN_PORT, max: DEFAULT_MAX_PORT };
  if (ports.min > ports.max) {
    throw new LaunchError(`${MIN_PORT} (${ports.min}) is greater than ${MAX_PORT} (${ports.max})`);
  }
  const multiplex = text(MULTIPLEX_GRPC);
  return {
    cookie,
    appVersions,
    ports,
    clientCert,
    unixSocketDir: text(UNIX_SOCKET_DIR),
    unixSocketGroup: text(UNIX_SOCKET_GROUP),
    tmpDir: text(TMPDIR),
    multiplex: multiplex === undefined ? undefined : parseGoBool(multiplex),
    secretsDir: text(SECRETS_DIR),
    configDir: text(CONFIG_DIR),
  };
}

/** Parses a version list such as `1, 2,5,`: spaces and empty entries are ignored. */
export function parseVersionList(list: string): number[] {
  const versions: number[] = [];
  for (const raw of list.split(",")) {
    const entry = raw.trim();
    if (entry === "") continue;
    if (!/^\+?[0-9]+$/.test(entry) || Number(entry) > 0xffff_ffff) {
      throw new LaunchError(`${PROTOCOL_VERSIONS} from the host is invalid: protocol version ${JSON.stringify(entry)} is not a number`);
    }
    versions.push(Number(entry));
  }
  return versions;
}

/**
 * The highest version both support, else the plugin's lowest (which the host then refuses with
 * a clear message, as go-plugin does).
 */
export function chooseVersion(offered: readonly number[], supported: readonly number[]): number {
  const common = supported.filter((v) => offered.includes(v));
  return common.length > 0 ? Math.max(...common) : Math.min(...supported);
}

/** Go's `strconv.ParseBool` for `true`; anything else, unparsable values included, is `false`. */
export function parseGoBool(value: string): boolean {
  return ["1", "t", "T", "true", "TRUE", "True"].includes(value);
}
