//! The plugin's traces, with no code of the author's. When the host records the launching span
//! (it sent `TRACEPARENT`) and serves host services, the SDK's subscriber gets an OpenTelemetry
//! layer: the served calls continue the host's trace, the author's `tracing` spans inside a
//! handler are children of them, and the finished spans go in batches to the host's OTLP relay
//! over the host-services connection (the plugin has no network and no exporter settings).
//! Without `TRACEPARENT` nothing of this is installed and nothing is recorded.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter};
use tether_transport::GrpcBroker;
use tokio::runtime::Handle;
use tracing::Subscriber;
use tracing_subscriber::registry::LookupSpan;

/// How long finished spans wait before they are sent to the host, at most (OpenTelemetry's
/// default is 5 s; a plugin's life is often shorter than that).
pub const SPAN_BATCH_DELAY: Duration = Duration::from_millis(200);

/// How long a stopping plugin waits for its last spans to reach the host.
pub const SPAN_FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one batch may take to reach the host.
pub const SPAN_EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The name of the plugin's instrumentation scope.
const SCOPE: &str = "tether-sdk";

/// The plugin's pipeline, once installed.
static HOST_TRACES: OnceLock<HostTraces> = OnceLock::new();

struct HostTraces {
    provider: SdkTracerProvider,
    runtime: Arc<OnceLock<Handle>>,
}

/// The OpenTelemetry layer for the SDK's subscriber, when the host asked for traces
/// (`traceparent` is the launching span's `TRACEPARENT`) and serves host services.
pub(crate) fn layer<S>(
    traceparent: Option<&str>,
    host_services: bool,
    broker: &GrpcBroker,
) -> Option<impl tracing_subscriber::Layer<S> + use<S>>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    if traceparent.is_none() || !host_services {
        return None;
    }
    let runtime = Arc::new(OnceLock::new());
    let exporter = HostExporter {
        broker: broker.clone(),
        runtime: Arc::clone(&runtime),
        resource: ResourceAttributesWithSchema::from(&resource()),
    };
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(
            opentelemetry_sdk::trace::BatchConfigBuilder::default()
                .with_scheduled_delay(SPAN_BATCH_DELAY)
                .build(),
        )
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource())
        .build();
    let tracer = provider.tracer(SCOPE);
    HOST_TRACES.set(HostTraces { provider, runtime }).ok()?;
    Some(tracing_opentelemetry::layer().with_tracer(tracer))
}

/// The process as OpenTelemetry describes it: `service.name` is the binary's file name.
fn resource() -> Resource {
    let name = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "tether-plugin".to_owned());
    Resource::builder().with_service_name(name).build()
}

/// Called on the plugin's runtime once it serves: exports run there.
pub(crate) fn serving_on(handle: Handle) {
    if let Some(traces) = HOST_TRACES.get() {
        let _ = traces.runtime.set(handle);
    }
}

/// The start-up span: from the launch to the handshake, a child of the host's launch span.
pub(crate) fn start_span() -> tracing::Span {
    if HOST_TRACES.get().is_none() {
        return tracing::Span::none();
    }
    let span = tracing::info_span!(target: "tether::plugin", "tether.plugin.start");
    let parent = context::from_env(|name| std::env::var(name).ok());
    // Fails only when no OpenTelemetry layer records the span.
    let _ = tracing_opentelemetry::OpenTelemetrySpanExt::set_parent(&span, parent);
    span
}

/// Sends what is finished to the host before the plugin stops (at most
/// [`SPAN_FLUSH_TIMEOUT`]).
pub(crate) async fn flush() {
    let Some(traces) = HOST_TRACES.get() else {
        return;
    };
    let provider = traces.provider.clone();
    // Blocking: it waits for the batch thread, whose export runs on this runtime.
    let flushed = tokio::task::spawn_blocking(move || provider.force_flush());
    if let Ok(Ok(Err(error))) = tokio::time::timeout(SPAN_FLUSH_TIMEOUT, flushed).await {
        tracing::debug!(%error, "the last spans did not reach the host");
    }
}

/// Exports to the host's relay: the OTLP trace service on the host-services connection.
#[derive(Debug)]
struct HostExporter {
    broker: GrpcBroker,
    runtime: Arc<OnceLock<Handle>>,
    resource: ResourceAttributesWithSchema,
}

impl SpanExporter for HostExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let Some(runtime) = self.runtime.get() else {
            return Err(OTelSdkError::InternalFailure("not serving yet".into()));
        };
        let request = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(batch, &self.resource),
        };
        let broker = self.broker.clone();
        let sent = runtime.spawn(async move {
            let channel = broker.host_services().await.map_err(|e| e.to_string())?;
            let mut request = tonic::Request::new(request);
            request.set_timeout(SPAN_EXPORT_TIMEOUT);
            TraceServiceClient::new(channel)
                .export(request)
                .await
                .map(drop)
                .map_err(|status| status.message().to_owned())
        });
        match sent.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => Err(OTelSdkError::InternalFailure(message)),
            Err(join) => Err(OTelSdkError::InternalFailure(join.to_string())),
        }
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = ResourceAttributesWithSchema::from(resource);
    }
}

pub use tether_transport::telemetry::{
    CallingPlugin, TracedChannel, TracedResponse, UNTRACED_SERVICES, context,
};
