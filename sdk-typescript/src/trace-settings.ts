/**
 * The settings of the plugin's traces (`tracing.ts`), free of OpenTelemetry's types so that the
 * package's public declarations need none of its optional packages.
 *
 * @module
 */

import type * as grpc from "@grpc/grpc-js";

import type { ServiceEntry } from "./endpoint.js";

/** The OpenTelemetry environment-variable carrier: the host's launch span (W3C `traceparent`). */
export const TRACEPARENT_VAR = "TRACEPARENT";
/** Its vendor-specific trace state (W3C `tracestate`). */
export const TRACESTATE_VAR = "TRACESTATE";
/**
 * Milliseconds finished spans wait before they are sent to the host, at most (OpenTelemetry's
 * default is 5 s; a plugin's life is often shorter than that). The Rust SDK's `SPAN_BATCH_DELAY`.
 */
export const SPAN_BATCH_DELAY_MS = 200;
/** Milliseconds a stopping plugin waits for its last spans to reach the host. */
export const SPAN_FLUSH_TIMEOUT_MS = 2_000;
/** Milliseconds one batch may take to reach the host. */
export const SPAN_EXPORT_TIMEOUT_MS = 5_000;
/**
 * Path prefixes of the services whose calls are never traced: OTLP exports themselves (a span
 * about exporting spans would be exported in turn) and the protocol's plumbing — the host's
 * list (`tether_transport::telemetry::UNTRACED_SERVICES`).
 */
export const UNTRACED_SERVICES: readonly string[] = [
  "/opentelemetry.proto.collector.",
  "/plugin.GRPCBroker/",
  "/plugin.GRPCStdio/",
  "/plugin.GRPCController/",
  "/grpc.health.v1.Health/",
  "/grpc.reflection.",
];

/** Whether a call to `methodPath` (`/package.Service/Method`) is left untraced. */
export function untraced(methodPath: string): boolean {
  return UNTRACED_SERVICES.some((prefix) => methodPath.startsWith(prefix));
}

/** What the broker needs of the plugin's tracing (`tracing.ts`'s `Tracing`). @internal */
export interface BrokerTracing {
  /** Client spans on every brokered client. */
  readonly clientInterceptor: grpc.Interceptor;
  /** `entries` with a server span around every traced method. */
  serve(entries: readonly ServiceEntry[]): ServiceEntry[];
}
