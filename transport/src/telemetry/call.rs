//! One call being observed: its span, its start, its method; finished exactly once with the
//! gRPC status it ended with — from the response's trailers, its headers (a trailers-only
//! answer), a transport error, or the response being dropped before its end (cancelled).

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use tonic::Code;
use tonic::codegen::http::HeaderMap;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::codegen::{Body, Bytes};

/// Per-call metrics, told about every call a [`TracedChannel`](super::TracedChannel) makes or a
/// traced server answers. The host library implements it with OpenTelemetry instruments.
///
/// Called on the hot path of every call: an implementation keeps both methods cheap (no IO,
/// no lock held across the call).
pub trait CallMetrics: Send + Sync + fmt::Debug + 'static {
    /// A call to `method` (`package.Service/Method`) began; this process is its `side`.
    fn begin(&self, side: CallSide, method: &str);
    /// The call to `method` ended with `code` after `elapsed`.
    fn end(&self, side: CallSide, method: &str, code: Code, elapsed: Duration);
}

/// Which end of a call this process is: the client (a call made on a
/// [`TracedChannel`](super::TracedChannel): the host calling its plugin, or a plugin calling a
/// callback) or the server (a call answered: a callback or host service on the host, a
/// plugin's own service in a plugin).
///
/// Decides the metric a call is counted in (`rpc.client.call.duration` or
/// `rpc.server.call.duration`) and which statuses mark its span as an error (OpenTelemetry's
/// gRPC conventions: every non-OK status on the client; on the server only those that mean the
/// server failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallSide {
    /// This process made the call.
    Client,
    /// This process answered the call.
    Server,
}

/// A call in flight. Dropped unfinished: it ended as cancelled, or as `DEADLINE_EXCEEDED` when
/// it was dropped at or after its caller's deadline (a host abandoning a call at its timeout).
pub(crate) struct Call {
    span: tracing::Span,
    path: Option<PathAndQuery>,
    started: Instant,
    side: CallSide,
    metrics: Option<Arc<dyn CallMetrics>>,
    /// When the caller gives up on it, if it says.
    deadline: Option<Instant>,
    finished: bool,
}

impl Call {
    pub(crate) fn begin(
        span: tracing::Span,
        path: Option<PathAndQuery>,
        side: CallSide,
        metrics: Option<Arc<dyn CallMetrics>>,
    ) -> Self {
        let call = Self {
            span,
            path,
            started: Instant::now(),
            side,
            metrics,
            deadline: None,
            finished: false,
        };
        if let Some(metrics) = &call.metrics {
            metrics.begin(call.side, call.method());
        }
        call
    }

    /// The caller abandons the call at `deadline`: dropped unfinished from then on, it ended
    /// as `DEADLINE_EXCEEDED`, not cancelled.
    pub(crate) fn with_deadline(mut self, deadline: Option<Instant>) -> Self {
        self.deadline = deadline;
        self
    }

    /// `package.Service/Method` (the path without its leading `/`).
    fn method(&self) -> &str {
        method_of(self.path.as_ref())
    }

    pub(crate) fn span(&self) -> &tracing::Span {
        &self.span
    }

    pub(crate) fn finish(&mut self, code: Code) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        self.span
            .record("rpc.response.status_code", code_name(code));
        if is_error(self.side, code) {
            self.span.record("otel.status_code", "ERROR");
        }
        if let Some(metrics) = &self.metrics {
            metrics.end(self.side, self.method(), code, self.started.elapsed());
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let ran_out = self
            .deadline
            .is_some_and(|deadline| Instant::now() >= deadline);
        self.finish(if ran_out {
            Code::DeadlineExceeded
        } else {
            Code::Cancelled
        });
    }
}

/// The path prefixes of the services whose calls are neither traced nor measured:
/// OpenTelemetry's OTLP collector services (a plugin exporting its spans to the host's relay: a
/// span about exporting spans would be exported in turn, without end), and the plumbing of the
/// protocol itself — go-plugin's broker, stdio and controller streams (they last as long as the
/// plugin), the health checks a supervisor makes every few seconds, and reflection.
pub const UNTRACED_SERVICES: &[&str] = &[
    "/opentelemetry.proto.collector.",
    "/plugin.GRPCBroker/",
    "/plugin.GRPCStdio/",
    "/plugin.GRPCController/",
    "/grpc.health.v1.Health/",
    "/grpc.reflection.",
];

/// Whether a call to `path` is left untraced ([`UNTRACED_SERVICES`]).
pub(crate) fn untraced(path: Option<&PathAndQuery>) -> bool {
    path.is_some_and(|p| UNTRACED_SERVICES.iter().any(|s| p.path().starts_with(s)))
}

/// `package.Service/Method` of a request path (`""` when there is none).
pub(crate) fn method_of(path: Option<&PathAndQuery>) -> &str {
    path.map_or("", |p| p.path().trim_start_matches('/'))
}

/// The `grpc-status` of a trailers block or of a trailers-only answer's headers; tonic's
/// `CANCELLED: Timeout expired` (a tonic server enforcing the call's `grpc-timeout`) is the
/// deadline running out, `DEADLINE_EXCEEDED` as gRPC names it.
pub(crate) fn status_in(headers: &HeaderMap) -> Option<Code> {
    let value = headers.get("grpc-status")?;
    let code = Code::from_i32(value.to_str().ok()?.parse::<i32>().ok()?);
    let message = headers.get("grpc-message").map(|m| m.as_bytes());
    // The message as tonic sends it (percent-encoded) or as a peer may (spaces are allowed).
    if code == Code::Cancelled && matches!(message, Some(b"Timeout%20expired" | b"Timeout expired"))
    {
        return Some(Code::DeadlineExceeded);
    }
    Some(code)
}

/// Whether a transport error is tonic's client-side timer running out the call's `grpc-timeout`
/// ([`tonic::TimeoutExpired`], anywhere in its chain of causes).
pub(crate) fn timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.is::<tonic::TimeoutExpired>() {
            return true;
        }
        cause = e.source();
    }
    false
}

/// The status code's name in OpenTelemetry's `rpc.response.status_code` (gRPC's upper-case
/// names: `OK`, `DEADLINE_EXCEEDED`, …).
#[must_use]
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

fn is_error(side: CallSide, code: Code) -> bool {
    match side {
        CallSide::Client => code != Code::Ok,
        CallSide::Server => matches!(
            code,
            Code::Unknown
                | Code::DeadlineExceeded
                | Code::Unimplemented
                | Code::Internal
                | Code::Unavailable
                | Code::DataLoss
        ),
    }
}

pin_project_lite::pin_project! {
    /// A response body that finishes its [`Call`] (if it is observed) when its trailers
    /// arrive, when it ends, when it fails, or when it is dropped before its end.
    pub(crate) struct ObservedBody<B> {
        #[pin]
        inner: B,
        call: Option<Call>,
    }
}

impl<B> ObservedBody<B> {
    pub(crate) fn new(inner: B, call: Option<Call>) -> Self {
        Self { inner, call }
    }
}

impl<B> Body for ObservedBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, B::Error>>> {
        let this = self.project();
        let frame = ready!(this.inner.poll_frame(cx));
        if let Some(call) = this.call {
            match &frame {
                Some(Ok(frame)) => {
                    if let Some(trailers) = frame.trailers_ref() {
                        call.finish(status_in(trailers).unwrap_or(Code::Unknown));
                    }
                }
                Some(Err(_)) => call.finish(Code::Unknown),
                // Ended without trailers: no status, which gRPC reads as UNKNOWN.
                None => call.finish(Code::Unknown),
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Debug, Default)]
    struct Recorded(Mutex<Vec<String>>);

    impl CallMetrics for Recorded {
        fn begin(&self, side: CallSide, method: &str) {
            self.0
                .lock()
                .unwrap()
                .push(format!("begin {side:?} {method}"));
        }
        fn end(&self, side: CallSide, method: &str, code: Code, _: Duration) {
            self.0
                .lock()
                .unwrap()
                .push(format!("end {side:?} {method} {}", code_name(code)));
        }
    }

    #[test]
    fn a_call_is_finished_once_and_a_dropped_one_counts_as_cancelled() {
        let metrics = Arc::new(Recorded::default());
        let path = Some(PathAndQuery::from_static("/kv.KV/Get"));
        let mut call = Call::begin(
            tracing::Span::none(),
            path.clone(),
            CallSide::Client,
            Some(metrics.clone()),
        );
        call.finish(Code::NotFound);
        call.finish(Code::Ok);
        drop(call);
        drop(Call::begin(
            tracing::Span::none(),
            path,
            CallSide::Server,
            Some(metrics.clone()),
        ));
        assert_eq!(
            *metrics.0.lock().unwrap(),
            [
                "begin Client kv.KV/Get",
                "end Client kv.KV/Get NOT_FOUND",
                "begin Server kv.KV/Get",
                "end Server kv.KV/Get CANCELLED"
            ]
        );
    }

    #[test]
    fn the_status_is_read_from_grpc_status_and_a_bad_one_is_none() {
        let mut headers = HeaderMap::new();
        assert_eq!(status_in(&headers), None);
        headers.insert("grpc-status", "5".parse().unwrap());
        assert_eq!(status_in(&headers), Some(Code::NotFound));
        headers.insert("grpc-status", "five".parse().unwrap());
        assert_eq!(status_in(&headers), None);
    }

    #[test]
    fn tonics_timeout_expired_is_a_deadline_exceeded_and_other_cancellations_stay_cancelled() {
        let mut headers = HeaderMap::new();
        headers.insert("grpc-status", "1".parse().unwrap());
        assert_eq!(status_in(&headers), Some(Code::Cancelled));
        headers.insert("grpc-message", "Timeout%20expired".parse().unwrap());
        assert_eq!(status_in(&headers), Some(Code::DeadlineExceeded));
        headers.insert("grpc-message", "Timeout expired".parse().unwrap());
        assert_eq!(status_in(&headers), Some(Code::DeadlineExceeded));
        headers.insert("grpc-message", "the user gave up".parse().unwrap());
        assert_eq!(status_in(&headers), Some(Code::Cancelled));
        headers.insert("grpc-status", "13".parse().unwrap());
        headers.insert("grpc-message", "Timeout%20expired".parse().unwrap());
        assert_eq!(status_in(&headers), Some(Code::Internal));

        #[derive(Debug)]
        struct Wrapped(tonic::TimeoutExpired);
        impl fmt::Display for Wrapped {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("transport error")
            }
        }
        impl std::error::Error for Wrapped {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        assert!(timed_out(&Wrapped(tonic::TimeoutExpired(()))));
        assert!(!timed_out(&std::io::Error::other("reset")));
    }

    #[test]
    fn a_call_dropped_after_its_deadline_ran_out_its_deadline_and_one_dropped_before_was_cancelled()
    {
        let metrics = Arc::new(Recorded::default());
        let path = Some(PathAndQuery::from_static("/kv.KV/Get"));
        let begin = |deadline| {
            Call::begin(
                tracing::Span::none(),
                path.clone(),
                CallSide::Client,
                Some(metrics.clone()),
            )
            .with_deadline(Some(deadline))
        };
        drop(begin(Instant::now()));
        drop(begin(Instant::now() + Duration::from_secs(3600)));
        assert_eq!(
            *metrics.0.lock().unwrap(),
            [
                "begin Client kv.KV/Get",
                "end Client kv.KV/Get DEADLINE_EXCEEDED",
                "begin Client kv.KV/Get",
                "end Client kv.KV/Get CANCELLED"
            ]
        );
    }

    #[test]
    fn the_protocols_own_plumbing_and_otlp_exports_are_untraced_and_app_calls_are_traced() {
        for path in [
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            "/plugin.GRPCBroker/StartStream",
            "/plugin.GRPCController/Shutdown",
            "/grpc.health.v1.Health/Check",
        ] {
            assert!(untraced(Some(&PathAndQuery::from_static(path))), "{path}");
        }
        assert!(!untraced(Some(&PathAndQuery::from_static("/kv.KV/Get"))));
        assert!(!untraced(Some(&PathAndQuery::from_static(
            "/plugin.KV/Get"
        ))));
    }

    #[test]
    fn servers_mark_only_their_own_failures_as_errors() {
        assert!(is_error(CallSide::Client, Code::NotFound));
        assert!(!is_error(CallSide::Server, Code::NotFound));
        assert!(is_error(CallSide::Server, Code::Internal));
        assert!(!is_error(CallSide::Client, Code::Ok));
    }
}
