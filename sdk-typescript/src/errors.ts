/**
 * Why a plugin could not start, or why an SDK call failed. Every error is a {@link PluginError}
 * whose message says what happened and what to do.
 *
 * @module
 */

/**
 * What a go-plugin plugin prints when it was started without its host's cookie (go-plugin's
 * message, word for word): it was most likely run by hand.
 */
export const NOT_LAUNCHED_BY_HOST_MESSAGE =
  "This binary is a plugin. These are not meant to be executed directly.\n" +
  "Please execute the program that consumes these plugins, which will\n" +
  "load any plugins automatically";

/** Base class of every error the SDK throws. */
export class PluginError extends Error {
  override name = "PluginError";
}

/** The plugin's own code is misconfigured (empty cookie, no app versions, a bad option). */
export class ConfigurationError extends PluginError {
  override name = "ConfigurationError";
}

/**
 * The cookie variable is missing or has another value: the plugin was run by hand or by the
 * host of another application. Its message is go-plugin's message for humans.
 */
export class NotLaunchedByHostError extends PluginError {
  override name = "NotLaunchedByHostError";
  constructor(
    /** The cookie's environment variable name. */
    readonly cookieKey: string,
    /** `true` when the variable was set to another value, `false` when it was missing. */
    readonly mismatch: boolean,
  ) {
    super(NOT_LAUNCHED_BY_HOST_MESSAGE);
  }
}

/** A protocol variable the host set is malformed: the host is broken or incompatible. */
export class LaunchError extends PluginError {
  override name = "LaunchError";
}

/** The plugin could not create or bind its socket. */
export class ListenError extends PluginError {
  override name = "ListenError";
}

/**
 * A `GRPCBroker` operation failed: dialling an id the host never announced (in time), an
 * address the plugin refuses to dial, using the broker before the plugin serves or after it
 * stopped. The message names the broker id.
 */
export class GrpcBrokerError extends PluginError {
  override name = "GrpcBrokerError";
}

/**
 * A secret or config file the plugin asked for is not available: the host delivered none of
 * that kind, or not this one. The message (the same in every tether SDK) names the manifest key
 * and the grants file line to add.
 */
export class NotGrantedError extends PluginError {
  override name = "NotGrantedError";
}

/** A secret or config name that could name another file (empty, `.`, `..`, `/` or NUL). */
export class InvalidNameError extends PluginError {
  override name = "InvalidNameError";
}

/**
 * The host did not open a connection to another catalog plugin asked for with
 * `broker.openPlugin`: not granted (`PERMISSION_DENIED`; the message names the grants line to
 * add, e.g. ``add `calls = ["b"]` under `[plugins.a]` at /etc/tether/grants.toml:3``), not in
 * its catalog (`NOT_FOUND`), or it could not start (`UNAVAILABLE`). The host's own status code
 * and message are kept, so a plugin can pass the refusal on to its caller unchanged.
 */
export class PluginRefusedError extends GrpcBrokerError {
  override name = "PluginRefusedError";
  constructor(
    /** The catalog plugin asked for. */
    readonly plugin: string,
    /** The host's gRPC status code (a `grpc.status` value). */
    readonly code: number,
    /** The host's message. */
    readonly details: string,
    /** The status code's name (`PERMISSION_DENIED`), for the message. */
    codeName: string,
  ) {
    super(`the host did not open a connection to plugin ${JSON.stringify(plugin)}: ${details} (${codeName})`);
  }
}
