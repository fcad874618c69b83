//! The served side: [`trace_routes`] wraps a set of tonic routes so that every call they answer
//! continues the caller's trace.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use opentelemetry::trace::TraceContextExt as _;
use tonic::codegen::Service;
use tonic::codegen::http::{Request, Response};
use tonic::service::Routes;
use tracing::Instrument as _;
use tracing::field::Empty;
use tracing::instrument::Instrumented;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use super::call::{Call, CallMetrics, CallSide, ObservedBody, method_of, status_in, untraced};
use super::context;

/// Who serves: the plugin the calls come from (host side, recorded as `tether.plugin.name`)
/// and what to tell about each call.
#[derive(Debug, Clone)]
pub struct ServedCalls {
    /// The plugin calling (host side); `None` in a plugin.
    pub plugin: Option<Arc<str>>,
    /// Told about every call answered, and every call made on a channel dialled through the
    /// broker.
    pub metrics: Option<Arc<dyn CallMetrics>>,
    /// Whether a channel dialled through the broker sends its caller's trace context (default
    /// true; see [`TracedChannel::trace_context`](super::TracedChannel::trace_context)).
    pub trace_context: bool,
}

impl Default for ServedCalls {
    fn default() -> Self {
        Self {
            plugin: None,
            metrics: None,
            trace_context: true,
        }
    }
}

/// `routes`, with every call they answer traced: a server span per call (named after the
/// method, kind server, OpenTelemetry's RPC attributes) whose parent is the caller's span from
/// the call's `traceparent`/`tracestate` metadata; the handler runs inside it, so its own spans
/// and the calls it makes continue the same trace. Its method, status and duration go to
/// `served.metrics`.
#[must_use]
pub fn trace_routes(routes: Routes, served: ServedCalls) -> Routes {
    Routes::from(routes.into_axum_router().layer(TraceLayer(served)))
}

/// The plugin a served call came from (host side), in the request's extensions for the
/// handler (`request.extensions().get::<CallingPlugin>()`): what the host knows, not what the
/// plugin says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallingPlugin(pub Arc<str>);

#[derive(Clone)]
struct TraceLayer(ServedCalls);

impl<S> tower::Layer<S> for TraceLayer {
    type Service = Traced<S>;

    fn layer(&self, inner: S) -> Traced<S> {
        Traced {
            inner,
            served: self.0.clone(),
        }
    }
}

#[derive(Clone)]
struct Traced<S> {
    inner: S,
    served: ServedCalls,
}

impl<S, B> Service<Request<axum::body::Body>> for Traced<S>
where
    S: Service<Request<axum::body::Body>, Response = Response<B>, Error = Infallible>,
{
    type Response = Response<ObservedBody<B>>;
    type Error = Infallible;
    type Future = Serving<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<axum::body::Body>) -> Self::Future {
        if let Some(plugin) = &self.served.plugin {
            request
                .extensions_mut()
                .insert(CallingPlugin(Arc::clone(plugin)));
        }
        let path = request.uri().path_and_query().cloned();
        if untraced(path.as_ref()) {
            return Serving {
                inner: self.inner.call(request).instrument(tracing::Span::none()),
                call: None,
            };
        }
        let method = method_of(path.as_ref());
        let span = tracing::info_span!(
            target: "tether::rpc",
            "grpc.server",
            otel.name = method,
            otel.kind = "server",
            otel.status_code = Empty,
            rpc.system.name = "grpc",
            rpc.method = method,
            rpc.response.status_code = Empty,
            tether.plugin.name = self.served.plugin.as_deref(),
        );
        let parent = context::extract(request.headers());
        if parent.span().span_context().is_valid() {
            // Fails only when no OpenTelemetry layer records the span: nothing to parent then.
            let _ = span.set_parent(parent);
        }
        let call = Call::begin(span, path, CallSide::Server, self.served.metrics.clone());
        let inner = self.inner.call(request).instrument(call.span().clone());
        Serving {
            inner,
            call: Some(call),
        }
    }
}

pin_project_lite::pin_project! {
    struct Serving<F> {
        #[pin]
        inner: Instrumented<F>,
        call: Option<Call>,
    }
}

impl<F, B> Future for Serving<F>
where
    F: Future<Output = Result<Response<B>, Infallible>>,
{
    type Output = Result<Response<ObservedBody<B>>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Ok(response) = ready!(this.inner.poll(cx));
        let mut call = this.call.take();
        if let (Some(call), Some(code)) = (&mut call, status_in(response.headers())) {
            // Trailers-only (an error before any message): the body adds nothing.
            call.finish(code);
        }
        Poll::Ready(Ok(response.map(|body| ObservedBody::new(body, call))))
    }
}
