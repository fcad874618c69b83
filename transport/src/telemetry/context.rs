//! W3C trace context across the boundary: in the gRPC metadata of every call
//! (`traceparent`/`tracestate`) and in a plugin's launch environment (`TRACEPARENT`/`TRACESTATE`,
//! OpenTelemetry's environment-variable carrier). The format is OpenTelemetry's own
//! [`TraceContextPropagator`], whatever propagator the embedding program installed globally:
//! the boundary speaks W3C trace context, which every SDK (Go, Python, Node) reads.

use std::collections::HashMap;

use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator as _};
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tonic::codegen::http::{HeaderMap, HeaderName, HeaderValue};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The gRPC metadata key of the W3C `traceparent`.
pub const TRACEPARENT_HEADER: &str = "traceparent";
/// The gRPC metadata key of the W3C `tracestate`.
pub const TRACESTATE_HEADER: &str = "tracestate";
/// The environment variable carrying the launching span's `traceparent` to a plugin.
pub const TRACEPARENT_ENV: &str = "TRACEPARENT";
/// The environment variable carrying the launching span's `tracestate` to a plugin.
pub const TRACESTATE_ENV: &str = "TRACESTATE";

/// The OpenTelemetry context of `span`: its OpenTelemetry span when an OpenTelemetry layer
/// (`tracing-opentelemetry`) records it, else the current OpenTelemetry context (a program
/// that uses the OpenTelemetry API directly, without `tracing`).
#[must_use]
pub fn of_span(span: &tracing::Span) -> Context {
    let cx = span.context();
    if cx.span().span_context().is_valid() {
        cx
    } else {
        Context::current()
    }
}

/// Writes the trace context of `cx` into `headers` (nothing when `cx` has no valid span).
pub fn inject(cx: &Context, headers: &mut HeaderMap) {
    TraceContextPropagator::new().inject_context(cx, &mut WriteHeaders(headers));
}

/// The trace context `headers` carry, as a context whose span is the remote parent (or the
/// current context when they carry none, or none that parses).
#[must_use]
pub fn extract(headers: &HeaderMap) -> Context {
    TraceContextPropagator::new().extract(&ReadHeaders(headers))
}

/// `TRACEPARENT` (and `TRACESTATE` when not empty) for a child's environment, from `cx`;
/// empty when `cx` has no valid span.
#[must_use]
pub fn to_env(cx: &Context) -> Vec<(&'static str, String)> {
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut carrier);
    let mut vars = Vec::with_capacity(2);
    if let Some(parent) = carrier.remove(TRACEPARENT_HEADER) {
        vars.push((TRACEPARENT_ENV, parent));
        if let Some(state) = carrier.remove(TRACESTATE_HEADER).filter(|s| !s.is_empty()) {
            vars.push((TRACESTATE_ENV, state));
        }
    }
    vars
}

/// The launching span's context from a plugin's environment (`lookup` reads a variable),
/// relative to an empty context: a plugin's start-up has no other parent.
#[must_use]
pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Context {
    let mut carrier = HashMap::new();
    for (var, key) in [
        (TRACEPARENT_ENV, TRACEPARENT_HEADER),
        (TRACESTATE_ENV, TRACESTATE_HEADER),
    ] {
        if let Some(value) = lookup(var) {
            carrier.insert(key.to_owned(), value);
        }
    }
    TraceContextPropagator::new().extract_with_context(&Context::new(), &carrier)
}

struct WriteHeaders<'a>(&'a mut HeaderMap);

impl Injector for WriteHeaders<'_> {
    fn set(&mut self, key: &str, value: String) {
        // The propagator writes only its two lowercase ASCII keys and printable values.
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

struct ReadHeaders<'a>(&'a HeaderMap);

impl Extractor for ReadHeaders<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

    use super::*;

    fn remote(state: &str) -> Context {
        let span = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            true,
            state.parse::<TraceState>().unwrap(),
        );
        Context::new().with_remote_span_context(span)
    }

    #[test]
    fn a_context_goes_out_in_the_metadata_and_comes_back_the_same() {
        let mut headers = HeaderMap::new();
        inject(&remote("vendor=a"), &mut headers);
        assert_eq!(
            headers[TRACEPARENT_HEADER],
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(headers[TRACESTATE_HEADER], "vendor=a");
        let back = extract(&headers);
        assert_eq!(
            back.span().span_context(),
            remote("vendor=a").span().span_context()
        );
    }

    #[test]
    fn no_span_means_no_metadata_and_no_environment() {
        let mut headers = HeaderMap::new();
        inject(&Context::new(), &mut headers);
        assert!(headers.is_empty());
        assert!(to_env(&Context::new()).is_empty());
    }

    #[test]
    fn the_environment_carries_traceparent_and_a_non_empty_tracestate() {
        assert_eq!(
            to_env(&remote("")),
            [(
                TRACEPARENT_ENV,
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned()
            )]
        );
        let vars = to_env(&remote("vendor=a"));
        assert_eq!(vars[1], (TRACESTATE_ENV, "vendor=a".to_owned()));
        let env: HashMap<_, _> = vars.into_iter().collect();
        let back = from_env(|name| env.get(name).cloned());
        assert_eq!(
            back.span().span_context(),
            remote("vendor=a").span().span_context()
        );
    }

    #[test]
    fn a_malformed_traceparent_is_no_parent() {
        let mut headers = HeaderMap::new();
        headers.insert(TRACEPARENT_HEADER, HeaderValue::from_static("00-zz-00-01"));
        assert!(!extract(&headers).span().span_context().is_valid());
        assert!(
            !from_env(|_| Some("garbage".into()))
                .span()
                .span_context()
                .is_valid()
        );
    }
}
