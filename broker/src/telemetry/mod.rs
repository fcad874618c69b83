//! Telemetry of plugins, built in: traces across the boundary and the host's relay of what
//! plugins export.
//!
//! - Every call on a plugin's channel ([`TracedChannel`]) is a client span, a child of the
//!   caller's current span, and carries that span's W3C `traceparent`/`tracestate` in its
//!   metadata; every callback and host-service call a plugin makes is a server span continuing
//!   the plugin's trace.
//! - A launch is a span (`tether.launch`) with a child span per stage; the plugin starts with
//!   it as `TRACEPARENT`/`TRACESTATE` ([`context`]).
//!
//! - [`metrics`] — per-plugin metrics on the host's own OpenTelemetry `Meter`: calls and
//!   callbacks by method and status, starts, crashes, restarts, idle stops, calls in flight,
//!   and the plugins' memory, CPU time and processes.
//! - [`OtlpRelay`] — an OTLP trace service served to plugins as a host service, forwarding
//!   what they export to the host's OTLP endpoint (`OTEL_EXPORTER_OTLP_*`): plugins have no
//!   network and need no exporter configuration.
//!
//! The spans are `tracing` spans with OpenTelemetry's field conventions: install an
//! OpenTelemetry layer (`tracing-opentelemetry`) in the host's subscriber and they are exported
//! with the host's own pipeline. Without one they cost a disabled span.

pub mod metrics;
mod relay;
mod resources;
pub(crate) mod spans;

pub use metrics::{Metrics, PluginMetrics};
pub use relay::{
    DEFAULT_OTLP_GRPC_ENDPOINT, DEFAULT_OTLP_HTTP_ENDPOINT, DEFAULT_RELAY_TIMEOUT, OtlpProtocol,
    OtlpRelay, PLUGIN_NAME_ATTRIBUTE, RelayError,
};
pub use tether_transport::telemetry::{
    CallMetrics, CallSide, CallingPlugin, ServedCalls, TracedChannel, TracedResponse, code_name,
    context,
};
