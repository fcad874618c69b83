//! Telemetry against a real OpenTelemetry Collector (`tests/otel/`): the host exports its spans
//! with its own pipeline (OTLP/gRPC to the collector), plugins — Rust, Python (`sdk-python`,
//! with its optional OpenTelemetry packages) and TypeScript (`sdk-typescript`, likewise) —
//! export theirs to the host's relay over the host-services connection, and the collector's
//! file shows one trace with the right parent/child links across the boundary, both ways.
//!
//! Without Python or Node and the SDKs' packages the test prints why and passes as skipped,
//! unless `TETHER_REQUIRE_PEERS=1` (CI sets it): then it fails.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::path::Path;
use tether_broker::telemetry::OtlpRelay;

use tether_broker::{PluginClient, PluginClientBuilder};
use tether_examples::adder::Adder;
use tether_examples::counter::PutRequest;
use tether_examples::counter::add_helper_server::AddHelperServer;
use tether_examples::counter::counter_client::CounterClient;
use tether_tests::bins;
use tether_tests::otel::{self, Collector, ReceivedSpan, tree};
use tether_tests::peers::or_skip;
use tether_tests::python;
use tether_tests::sdk_plugin::example_handshake;
use tether_tests::typescript;
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

/// OTLP span kinds.
const SERVER: u64 = 2;
const CLIENT: u64 = 3;

/// Each plugin of the step: the name the host gives it and the `service.name` its SDK reports
/// (the Rust binary's file name, the Python script's, the compiled TypeScript module's).
const PLUGINS: [(&str, &str); 3] = [
    ("counter", "counter-plugin"),
    ("counter-py", "counter_plugin.py"),
    ("counter-ts", "counter.js"),
];

/// Starts the counter plugin `builder` in `work` with `AddHelper` and the OTLP relay as host
/// services, puts once (the plugin adds through the host's `AddHelper`: `add_server` 0) and
/// stops it gracefully, so that it sends its last spans before it exits.
async fn put_through_a_host_callback(builder: PluginClientBuilder, relay: &OtlpRelay, work: &Path) {
    let plugin = builder
        .current_dir(work)
        .handshake(example_handshake())
        .host_service(AddHelperServer::new(Adder))
        .host_service(relay.service())
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    CounterClient::new(plugin.channel())
        .put(PutRequest {
            add_server: 0,
            key: "c".into(),
            value: 5,
        })
        .await
        .unwrap();
    plugin.shutdown().await.unwrap();
}

/// Whether the Python SDK's `telemetry` extra is importable by the plugins' interpreter and the
/// TypeScript SDK's OpenTelemetry peer dependencies are installed beside it.
fn sdk_tracing_packages(
    py: &python::PythonPeer,
    node: &typescript::NodePeer,
) -> Result<(), String> {
    let imported = std::process::Command::new(&py.interpreter)
        .args([
            "-c",
            "import opentelemetry.sdk.trace, opentelemetry.exporter.otlp.proto.common.trace_encoder",
        ])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", py.interpreter.display()))?;
    if !imported.status.success() {
        return Err("Python cannot import the OpenTelemetry packages; run: pip install -r sdk-python/requirements-dev.txt".into());
    }
    for package in ["api", "sdk-trace-base", "otlp-transformer"] {
        let dir = node.sdk.join("node_modules/@opentelemetry").join(package);
        if !dir.is_dir() {
            return Err(format!(
                "{} is missing; run: (cd sdk-typescript && npm ci)",
                dir.display()
            ));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_follows_a_step_into_rust_python_and_typescript_plugins_and_back_through_their_callbacks()
 {
    const TEST: &str = "one_trace_follows_a_step_into_rust_python_and_typescript_plugins_and_back_through_their_callbacks";
    let Some(tools) = otel::tools_or_skip(TEST) else {
        return;
    };
    let Some(py) = python::python_or_skip(TEST) else {
        return;
    };
    let Some(node) = typescript::node_or_skip(TEST) else {
        return;
    };
    // Without their optional OpenTelemetry packages the SDKs trace nothing (by design): say so
    // rather than time out waiting for spans.
    let packages = sdk_tracing_packages(&py, &node);
    if or_skip(packages, "the SDKs' OpenTelemetry packages", TEST).is_none() {
        return;
    }
    let collector = Collector::start(&tools);
    let provider = host_pipeline(&collector);
    let relay = OtlpRelay::grpc(format!("http://{}", collector.grpc)).unwrap();
    let work = tempfile::tempdir().unwrap();

    let step = tracing::info_span!("workflow step");
    async {
        let builders = [
            PluginClient::builder(bins::COUNTER_PLUGIN.path()),
            py.allow(PluginClient::builder(&py.interpreter))
                .args([py.sdk.join("examples/counter_plugin.py")]),
            node.builder("counter"),
        ];
        for (builder, (name, _)) in builders.into_iter().zip(PLUGINS) {
            let dir = work.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            put_through_a_host_callback(builder.name(name), &relay, &dir).await;
        }
    }
    .instrument(step.clone())
    .await;
    drop(step);
    tokio::task::spawn_blocking(move || provider.force_flush())
        .await
        .unwrap()
        .unwrap();

    let spans = collector.wait_for_spans(SPANS_ARRIVE_TIMEOUT, |spans| {
        find(spans, "workflow step", HOST_SERVICE).is_some()
            && spans
                .iter()
                .filter(|s| s.name == "proto.AddHelper/Sum")
                .count()
                == 2 * PLUGINS.len()
            && PLUGINS
                .iter()
                .all(|(_, service)| find(spans, "tether.plugin.start", service).is_some())
    });
    let report = tree(&spans);
    let step = find(&spans, "workflow step", HOST_SERVICE).unwrap();
    let launch = find(&spans, "launch counter", HOST_SERVICE).unwrap();
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

    // A call the host made or answered for `plugin`, or one its plugin made or answered.
    let call = |name: &str, kind: u64, service: &str, plugin: &str| {
        spans
            .iter()
            .find(|s| {
                s.name == name
                    && s.kind == kind
                    && s.resource_attribute("service.name") == Some(service)
                    && (service != HOST_SERVICE
                        || s.attribute("tether.plugin.name") == Some(plugin))
            })
            .unwrap_or_else(|| panic!("{name} kind {kind} from {service} ({plugin}):\n{report}"))
    };
    for (plugin, service) in PLUGINS {
        let launch = find(&spans, &format!("launch {plugin}"), HOST_SERVICE)
            .unwrap_or_else(|| panic!("launch {plugin}:\n{report}"));
        assert!(child_of(launch, step), "{plugin}:\n{report}");
        // The plugin's start-up continues the launch span it got as TRACEPARENT.
        let started = find(&spans, "tether.plugin.start", service).unwrap();
        assert!(child_of(started, launch), "{plugin}:\n{report}");

        let put_client = call("proto.Counter/Put", CLIENT, HOST_SERVICE, plugin);
        let put_server = call("proto.Counter/Put", SERVER, service, plugin);
        let sum_client = call("proto.AddHelper/Sum", CLIENT, service, plugin);
        let sum_server = call("proto.AddHelper/Sum", SERVER, HOST_SERVICE, plugin);
        assert!(child_of(put_client, step), "{plugin}:\n{report}");
        assert!(child_of(put_server, put_client), "{plugin}:\n{report}");
        assert!(child_of(sum_client, put_server), "{plugin}:\n{report}");
        assert!(child_of(sum_server, sum_client), "{plugin}:\n{report}");
        assert_eq!(put_client.attribute("rpc.response.status_code"), Some("OK"));
        for span in [put_server, sum_client] {
            assert_eq!(span.attribute("rpc.system.name"), Some("grpc"), "{plugin}");
            assert_eq!(
                span.attribute("rpc.response.status_code"),
                Some("OK"),
                "{plugin}"
            );
            // The relay names the plugin from what the host knows.
            assert_eq!(span.resource_attribute("tether.plugin.name"), Some(plugin));
        }
    }
    eprintln!("the trace as the collector received it:\n{report}");
}
