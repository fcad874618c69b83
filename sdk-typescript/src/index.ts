/**
 * tether-plugin: write HashiCorp go-plugin / tether plugins in TypeScript on Node.
 *
 * ```ts
 * import { Plugin, loadProto } from "tether-plugin";
 *
 * const kv = loadProto("kv.proto") as any;
 * const plugin = new Plugin({ cookieKey: "BASIC_PLUGIN", cookieValue: "hello", appVersions: [1] });
 * plugin.addService(kv.proto.KV, {
 *   Put: (call, done) => { store.set(call.request.key, call.request.value); done(null, {}); },
 *   Get: (call, done) => done(null, { value: store.get(call.request.key) }),
 * });
 * await plugin.serve();
 * ```
 *
 * Traces: with the optional OpenTelemetry packages installed (the `@opentelemetry/*` peer
 * dependencies), a plugin whose host records traces continues them with no code of its own —
 * each served call a span under the caller's, its brokered calls carrying the context on, its
 * spans sent to the host over the existing connection. Without them nothing changes.
 *
 * @module
 */

export { Plugin, StopReason, HEALTH_SERVICE, DEFAULT_APP_VERSION, DEFAULT_SHUTDOWN_GRACE_MS, HOST_WATCH_INTERVAL_MS, BUILT_IN_SERVICES } from "./plugin.js";
export type { PluginOptions } from "./plugin.js";
export { GRPCBroker, Served, DEFAULT_DIAL_TIMEOUT_MS, DEFAULT_UNCLAIMED_TTL_MS } from "./broker.js";
export type { GrpcBrokerOptions, ClientConstructor } from "./broker.js";
export { HOST_SERVICES_ID, MAX_UNCLAIMED } from "./broker-stream.js";
export type { ConnInfo, Knock } from "./broker-stream.js";
export { KNOCK_RETRY_INTERVAL_MS } from "./knocks.js";
export type { ServiceEntry } from "./endpoint.js";
export { loadProto, serviceClient, PROTO_LOADER_OPTIONS, SDK_PROTO_DIR } from "./protos.js";
export { secrets, config, GrantedFiles } from "./files.js";
export { readLaunchEnv, chooseVersion, parseVersionList, parseGoBool } from "./env.js";
export type { LaunchEnv, MagicCookie, PortRange, Lookup } from "./env.js";
export { handshakeLine, encodeCert } from "./handshake.js";
export type { Handshake } from "./handshake.js";
export { generateIdentity, parseCertPem, derToPem, fingerprint, Identity, SERVER_NAME } from "./identity.js";
export { log, setLogLevel } from "./log.js";
export type { Level } from "./log.js";
export { STDIO_BUFFER_LIMIT } from "./stdio.js";
export {
  SPAN_BATCH_DELAY_MS,
  SPAN_FLUSH_TIMEOUT_MS,
  SPAN_EXPORT_TIMEOUT_MS,
  UNTRACED_SERVICES,
  TRACEPARENT_VAR,
  TRACESTATE_VAR,
} from "./trace-settings.js";
export {
  PluginError,
  ConfigurationError,
  NotLaunchedByHostError,
  LaunchError,
  ListenError,
  GrpcBrokerError,
  NotGrantedError,
  InvalidNameError,
  PluginRefusedError,
  NOT_LAUNCHED_BY_HOST_MESSAGE,
} from "./errors.js";
