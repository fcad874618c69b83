//! Telemetry against a real OpenTelemetry Collector (`tests/otel/`): the host exports its spans
//! with its own pipeline (OTLP/gRPC to the collector), plugins export theirs to the host's relay
//! over the host-services connection, and the collector's file shows one trace with the right
//! parent/child links across the boundary, both ways.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tether_broker::telemetry::OtlpRelay;
use tether_broker::{HandshakeConfig, PluginClient};
use tether_examples::adder::Adder;
use tether_examples::counter::PutRequest;
use tether_examples::counter::add_helper_server::AddHelperServer;
use tether_examples::counter::counter_client::CounterClient;
use tether_tests::bins;
use tether_tests::otel::{self, Collector, ReceivedSpan, tree};
use tracing::Instrument as _;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt as _;

/// How long the spans may take to reach the collector's file after the last flush.
const SPANS_ARRIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// The host's service name in these tests.
const HOST_SERVICE: &str = "tether-tests-host";

/// The host's pipeline, installed once for this test binary: OTLP/gRPC to `collector`.
fn host_pipeline(collector: &Collector) -> SdkTracerProvider {
    static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();
    PROVIDER
        .get_or_init(|| {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(format!("http://{}", collector.grpc))
                .build()
                .unwrap();
            let provider = SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(Resource::builder().with_service_name(HOST_SERVICE).build())
                .build();
            // INFO and above: tether's spans and the test's; not h2's and tonic's trace spans.
            let layer = tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("tether-tests"))
                .with_filter(LevelFilter::INFO);
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
                .unwrap();
            provider
        })
        .clone()
}

fn find<'a>(spans: &'a [ReceivedSpan], name: &str, service: &str) -> Option<&'a ReceivedSpan> {
    spans
        .iter()
        .find(|s| s.name == name && s.resource_attribute("service.name") == Some(service))
}

fn child_of(child: &ReceivedSpan, parent: &ReceivedSpan) -> bool {
    child.trace_id == parent.trace_id && child.parent_span_id == parent.span_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_follows_a_step_from_the_host_into_a_rust_plugin_and_back_through_its_callback() {
    let Some(tools) = otel::tools_or_skip(
        "one_trace_follows_a_step_from_the_host_into_a_rust_plugin_and_back_through_its_callback",
    ) else {
        return;
    };
    let collector = Collector::start(&tools);
    let provider = host_pipeline(&collector);
    let relay = OtlpRelay::grpc(format!("http://{}", collector.grpc)).unwrap();
    let work = tempfile::tempdir().unwrap();

    let step = tracing::info_span!("workflow step");
    async {
        let plugin = PluginClient::builder(bins::COUNTER_PLUGIN.path())
            .name("counter")
            .current_dir(work.path())
            .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
            .host_service(AddHelperServer::new(Adder))
            .host_service(relay.service())
            .start()
            .await
            .unwrap();
        CounterClient::new(plugin.channel())
            .put(PutRequest {
                add_server: 0,
                key: "c".into(),
                value: 5,
            })
            .await
            .unwrap();
        // A graceful stop: the plugin sends its last spans before it exits.
        plugin.shutdown().await.unwrap();
    }
    .instrument(step.clone())
    .await;
    drop(step);
    tokio::task::spawn_blocking(move || provider.force_flush())
        .await
        .unwrap()
        .unwrap();

    let plugin_service = "counter-plugin";
    let spans = collector.wait_for_spans(SPANS_ARRIVE_TIMEOUT, |spans| {
        find(spans, "workflow step", HOST_SERVICE).is_some()
            && find(spans, "proto.AddHelper/Sum", plugin_service).is_some()
            && spans
                .iter()
                .filter(|s| s.name == "proto.AddHelper/Sum")
                .count()
                == 2
            && find(spans, "tether.plugin.start", plugin_service).is_some()
    });
    let report = tree(&spans);
    let step = find(&spans, "workflow step", HOST_SERVICE).unwrap();
    let launch = find(&spans, "launch counter", HOST_SERVICE).unwrap();
    assert!(child_of(launch, step), "{report}");
    for stage in [
        "prepare",
        "plan",
        "confine",
        "spawn",
        "handshake",
        "connect",
    ] {
        let stage =
            find(&spans, stage, HOST_SERVICE).unwrap_or_else(|| panic!("{stage}: {report}"));
        assert!(child_of(stage, launch), "{report}");
    }
    // The plugin's start-up continues the launch span it got as TRACEPARENT.
    let started = find(&spans, "tether.plugin.start", plugin_service).unwrap();
    assert!(child_of(started, launch), "{report}");

    let by_kind = |name: &str, service: &str, kind: u64| {
        spans
            .iter()
            .find(|s| {
                s.name == name
                    && s.kind == kind
                    && s.resource_attribute("service.name") == Some(service)
            })
            .unwrap_or_else(|| panic!("{name} kind {kind} from {service}:\n{report}"))
    };
    const SERVER: u64 = 2;
    const CLIENT: u64 = 3;
    let put_client = by_kind("proto.Counter/Put", HOST_SERVICE, CLIENT);
    let put_server = by_kind("proto.Counter/Put", plugin_service, SERVER);
    let sum_client = by_kind("proto.AddHelper/Sum", plugin_service, CLIENT);
    let sum_server = by_kind("proto.AddHelper/Sum", HOST_SERVICE, SERVER);
    assert!(child_of(put_client, step), "{report}");
    assert!(child_of(put_server, put_client), "{report}");
    assert!(child_of(sum_client, put_server), "{report}");
    assert!(child_of(sum_server, sum_client), "{report}");
    assert_eq!(put_client.attribute("tether.plugin.name"), Some("counter"));
    assert_eq!(put_client.attribute("rpc.response.status_code"), Some("OK"));
    assert_eq!(sum_server.attribute("tether.plugin.name"), Some("counter"));
    assert_eq!(put_server.attribute("rpc.system.name"), Some("grpc"));
    // The relay names the plugin from what the host knows.
    assert_eq!(
        put_server.resource_attribute("tether.plugin.name"),
        Some("counter")
    );
    eprintln!("the trace as the collector received it:\n{report}");
}
