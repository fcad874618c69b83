//! The host library's own spans, beside the calls' (which `tether_transport::telemetry` makes).

/// One launch stage's span (`prepare`, `plan`, `confine`, `spawn`, `handshake`, `connect`), a
/// child of the launch's.
pub(crate) fn stage_span(stage: &'static str) -> tracing::Span {
    tracing::info_span!(target: "tether::launch", "tether.launch.stage", otel.name = stage)
}
