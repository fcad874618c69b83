//! Telemetry of the calls between a host and its plugins, the same on both sides:
//!
//! - [`context`] — W3C trace context in the gRPC metadata of every call (`traceparent`,
//!   `tracestate`) and in a plugin's launch environment (`TRACEPARENT`, `TRACESTATE`).
//! - [`TracedChannel`] — the channel tether hands out (a plugin's, a brokered one, the host
//!   services'): a client span per call, its trace context in the call's metadata.
//! - [`trace_routes`] — what tether serves (a plugin's services, callbacks, host services): a
//!   server span per call, continuing the caller's trace; the handler runs inside it.
//! - [`CallMetrics`] — told the method, status and duration of every call; the host library
//!   implements it with OpenTelemetry instruments.
//!
//! Spans are `tracing` spans (target `tether::rpc`, level INFO) carrying OpenTelemetry's field
//! conventions (`otel.name`, `otel.kind`, `rpc.system.name`, `rpc.method`,
//! `rpc.response.status_code`, `otel.status_code`): an OpenTelemetry layer
//! (`tracing-opentelemetry`) in the program's subscriber exports them with the program's own
//! pipeline. Without one they cost a disabled span.

mod call;
mod client;
pub mod context;
mod server;

pub use call::{CallMetrics, CallSide, UNTRACED_SERVICES, code_name};
pub use client::{TracedChannel, TracedResponse};
pub use server::{CallingPlugin, ServedCalls, trace_routes};
