//! [`TracedChannel`]: the channel tether hands out, host to plugin and plugin to host.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tonic::body::Body;
use tonic::codegen::Service;
use tonic::codegen::http::{Request, Response};
use tonic::transport::Channel;
use tracing::field::Empty;

use super::call::{
    Call, CallMetrics, CallSide, ObservedBody, method_of, status_in, timed_out, untraced,
};
use super::context;

/// A gRPC channel that traces and measures every call: a client span per call (named after
/// the method, kind client, OpenTelemetry's RPC attributes, a child of the caller's current
/// span), the W3C `traceparent`/`tracestate` of that span in the call's metadata, and the
/// call's method, status and duration told to its [`CallMetrics`], if any.
///
/// Use it as a tonic [`Channel`]: generated clients take it (`KvClient::new(channel)`).
/// Without a `tracing` subscriber that records the spans (an OpenTelemetry layer), nothing is
/// recorded and no trace context is sent, unless the caller's OpenTelemetry context (the
/// OpenTelemetry API used directly) has a span.
#[derive(Clone)]
pub struct TracedChannel {
    inner: Channel,
    /// The plugin this channel reaches (host side), recorded as `tether.plugin.name`.
    plugin: Option<Arc<str>>,
    metrics: Option<Arc<dyn CallMetrics>>,
    /// Whether the caller's trace context goes out in each call's metadata.
    send_context: bool,
    /// When its caller gives up on the calls ([`TracedChannel::deadline`]).
    deadline: Option<std::time::Instant>,
}

impl fmt::Debug for TracedChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TracedChannel")
            .field("plugin", &self.plugin)
            .field("metrics", &self.metrics.is_some())
            .field("send_context", &self.send_context)
            .finish_non_exhaustive()
    }
}

impl TracedChannel {
    /// Traces the calls made on `inner`; `plugin` names the plugin it reaches (host side).
    #[must_use]
    pub fn new(inner: Channel, plugin: Option<Arc<str>>) -> Self {
        Self {
            inner,
            plugin,
            metrics: None,
            send_context: true,
            deadline: None,
        }
    }

    /// Traces the calls made on `inner` as `calls` says: its plugin, its metrics, whether the
    /// trace context goes out.
    #[must_use]
    pub fn for_calls(inner: Channel, calls: &super::ServedCalls) -> Self {
        Self {
            inner,
            plugin: calls.plugin.clone(),
            metrics: calls.metrics.clone(),
            send_context: calls.trace_context,
            deadline: None,
        }
    }

    /// Whether each call carries its span's `traceparent`/`tracestate` to the peer (default
    /// true). Off, the calls are still spans and measured here, and the peer's spans start
    /// traces of their own.
    #[must_use]
    pub fn trace_context(mut self, send: bool) -> Self {
        self.send_context = send;
        self
    }

    /// Says that the caller abandons its calls at `deadline` (a host-side call timeout that
    /// drops the call): a call dropped unfinished at or after it is measured and traced as
    /// `DEADLINE_EXCEEDED`, not `CANCELLED`. A call's own `grpc-timeout` needs no telling.
    #[must_use]
    pub fn deadline(mut self, deadline: std::time::Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Tells `metrics` about every call.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<dyn CallMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The untraced tonic channel underneath.
    #[must_use]
    pub fn inner(&self) -> &Channel {
        &self.inner
    }

    /// The untraced tonic channel underneath, for code that needs a [`Channel`] by type.
    #[must_use]
    pub fn into_inner(self) -> Channel {
        self.inner
    }
}

impl From<Channel> for TracedChannel {
    fn from(inner: Channel) -> Self {
        Self::new(inner, None)
    }
}

impl Service<Request<Body>> for TracedChannel {
    type Response = Response<Body>;
    type Error = tonic::transport::Error;
    type Future = TracedResponse;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let path = request.uri().path_and_query().cloned();
        if untraced(path.as_ref()) {
            return TracedResponse {
                inner: self.inner.call(request),
                call: None,
            };
        }
        let method = method_of(path.as_ref());
        let span = tracing::info_span!(
            target: "tether::rpc",
            "grpc.client",
            otel.name = method,
            otel.kind = "client",
            otel.status_code = Empty,
            rpc.system.name = "grpc",
            rpc.method = method,
            rpc.response.status_code = Empty,
            tether.plugin.name = self.plugin.as_deref(),
        );
        if self.send_context {
            context::inject(&context::of_span(&span), request.headers_mut());
        }
        let call = Call::begin(span, path, CallSide::Client, self.metrics.clone())
            .with_deadline(self.deadline);
        TracedResponse {
            inner: self.inner.call(request),
            call: Some(call),
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of a [`TracedChannel`] call.
    pub struct TracedResponse {
        #[pin]
        inner: <Channel as Service<Request<Body>>>::Future,
        call: Option<Call>,
    }
}

impl fmt::Debug for TracedResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TracedResponse").finish_non_exhaustive()
    }
}

impl Future for TracedResponse {
    type Output = Result<Response<Body>, tonic::transport::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        // No call: an untraced one (or polled again after Ready, a caller's bug).
        let Some(mut call) = this.call.take() else {
            return Poll::Ready(result);
        };
        Poll::Ready(match result {
            Ok(response) => match status_in(response.headers()) {
                // Trailers-only: the status came with the headers and the body is empty.
                Some(code) => {
                    call.finish(code);
                    Ok(response)
                }
                None => Ok(response.map(|body| Body::new(ObservedBody::new(body, Some(call))))),
            },
            Err(error) => {
                // tonic's own timer running out the call's `grpc-timeout` is a deadline; any
                // other transport error leaves the peer unreachable.
                call.finish(if timed_out(&error) {
                    tonic::Code::DeadlineExceeded
                } else {
                    tonic::Code::Unavailable
                });
                Err(error)
            }
        })
    }
}
