//! Per-plugin metrics from a real supervisor with real plugins, read the way Prometheus reads
//! them: the host's `MeterProvider` has opentelemetry-prometheus's reader, the exposition is
//! linted and parsed by `promcheck` (promlint and Prometheus's own scrape parser), and the
//! values are the calls, callbacks, crashes, restarts and idle stops the test made.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::time::{Duration, Instant};

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use prometheus::{Encoder as _, TextEncoder};
use tether_broker::error::UseErrorKind;
use tether_broker::{Grants, Timeouts};
use tether_examples::adder::Adder;
use tether_examples::counter::PutRequest;
use tether_examples::counter::add_helper_server::AddHelperServer;
use tether_examples::counter::counter_client::CounterClient;
use tether_tests::bins;
use tether_tests::lease::{get, put};
use tether_tests::otel;
use tether_tests::promcheck::{self, Checked};
use tether_tests::world::{PluginSpec, TEST_GRACE, World};

const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");

/// How long the supervisor may take to stop an idle plugin (its idle timeout is 300 ms).
const IDLE_STOP_DEADLINE: Duration = Duration::from_secs(10);

/// Calls that succeed, and calls the probe refuses with `FAILED_PRECONDITION` (a secret it was
/// not given), before and after the restart.
const OK_CALLS: usize = 5;
const REFUSED_CALLS: usize = 3;
const OK_CALLS_AFTER_RESTART: usize = 2;

/// The exposition a Prometheus server would scrape from `registry` now.
fn scrape(registry: &prometheus::Registry) -> String {
    let mut text = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut text)
        .unwrap();
    String::from_utf8(text).unwrap()
}

fn checked(tools: &otel::OtelTools, registry: &prometheus::Registry) -> (String, Checked) {
    let text = scrape(registry);
    let checked = promcheck::check(tools, &text);
    assert_eq!(
        checked.status,
        Some(0),
        "promcheck refused the exposition:\n{}\n{text}",
        checked.stderr
    );
    (text, checked)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervisors_plugin_metrics_lint_clean_parse_with_prometheus_and_count_the_calls_made() {
    let Some(tools) = otel::tools_or_skip(
        "a_supervisors_plugin_metrics_lint_clean_parse_with_prometheus_and_count_the_calls_made",
    ) else {
        return;
    };
    let registry = prometheus::Registry::new();
    let exporter = opentelemetry_prometheus::exporter()
        .with_registry(registry.clone())
        .build()
        .unwrap();
    let provider = SdkMeterProvider::builder().with_reader(exporter).build();

    let world = World::new();
    world.add_plugin(
        &PluginSpec::new("probe", PROBE).tables("[restart]\ninitial_backoff = \"10ms\""),
    );
    world.add_plugin(
        &PluginSpec::new("counter", bins::COUNTER_PLUGIN.path()).extra("idle_timeout = \"300ms\""),
    );
    let (delivery, run) = (world.delivery(), world.run());
    let supervisor = world
        .supervisor(Grants::new())
        .customize(move |b| {
            b.delivery_dir(&delivery)
                .private_dir_base(&run)
                .timeouts(
                    Timeouts::default()
                        .shutdown_grace(TEST_GRACE)
                        .terminate_grace(TEST_GRACE),
                )
                .host_service(AddHelperServer::new(Adder))
        })
        .meter(&provider.meter("tether"))
        .build();

    // The probe: calls that succeed, calls that fail with a known status, then a crash.
    let probe = supervisor.acquire("probe").await.unwrap();
    for _ in 0..OK_CALLS {
        get(&probe, "pid:").await.unwrap();
    }
    for _ in 0..REFUSED_CALLS {
        let err = get(&probe, "secret:missing").await.unwrap_err();
        assert!(
            matches!(err.kind(), UseErrorKind::Call { status } if status.code() == tonic::Code::FailedPrecondition),
            "{err}"
        );
    }
    // While it runs: its resources are measured.
    let (text, running) = checked(&tools, &registry);
    let plugin = [("tether_plugin_name", "probe")];
    assert!(
        running.sum("tether_plugin_memory_usage_bytes", &plugin) > 0.0,
        "{text}"
    );
    assert!(
        running.sum("tether_plugin_processes", &plugin) >= 1.0,
        "{text}"
    );
    assert_eq!(
        running
            .find("tether_plugin_cpu_time_seconds_total", &plugin)
            .len(),
        2,
        "user and system: {text}"
    );
    assert_eq!(
        running.sum("tether_plugin_calls_active", &plugin),
        0.0,
        "{text}"
    );

    put(&probe, "crash:", b"").await.unwrap_err();
    drop(probe);
    // Restarted on the next use.
    let probe = supervisor.acquire("probe").await.unwrap();
    for _ in 0..OK_CALLS_AFTER_RESTART {
        get(&probe, "pid:").await.unwrap();
    }
    drop(probe);

    // The counter: one call, which calls back into the host once; then it idles out.
    let counter = supervisor.acquire("counter").await.unwrap();
    counter
        .call(|channel| async move {
            CounterClient::new(channel)
                .put(PutRequest {
                    add_server: 0,
                    key: "c".into(),
                    value: 5,
                })
                .await
        })
        .await
        .unwrap();
    drop(counter);
    let counter = [("tether_plugin_name", "counter")];
    let started = Instant::now();
    let (text, metrics) = loop {
        // The idle stop happens in the supervisor's background: nothing outside it to wait on.
        let (text, metrics) = checked(&tools, &registry);
        if metrics.sum("tether_plugin_idle_stops_total", &counter) >= 1.0 {
            break (text, metrics);
        }
        assert!(
            started.elapsed() < IDLE_STOP_DEADLINE,
            "the counter was not stopped as idle:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!("the exposition, as promcheck read it cleanly:\n{text}");

    let client_calls = |plugin: &str, method: &str, status: &str| {
        metrics.sum(
            "rpc_client_call_duration_seconds_count",
            &[
                ("tether_plugin_name", plugin),
                ("rpc_method", method),
                ("rpc_response_status_code", status),
                ("rpc_system_name", "grpc"),
            ],
        )
    };
    let ok = (OK_CALLS + OK_CALLS_AFTER_RESTART) as f64;
    assert_eq!(client_calls("probe", "proto.KV/Get", "OK"), ok, "{text}");
    assert_eq!(
        client_calls("probe", "proto.KV/Get", "FAILED_PRECONDITION"),
        REFUSED_CALLS as f64,
        "{text}"
    );
    // The call the crash cut short ended with whatever status the broken connection gave it.
    assert_eq!(
        metrics.sum(
            "rpc_client_call_duration_seconds_count",
            &[
                ("tether_plugin_name", "probe"),
                ("rpc_method", "proto.KV/Put")
            ]
        ),
        1.0,
        "{text}"
    );
    // Every call landed in a bucket: the +Inf bucket equals the count.
    assert_eq!(
        metrics.sum(
            "rpc_client_call_duration_seconds_bucket",
            &[
                ("tether_plugin_name", "probe"),
                ("rpc_method", "proto.KV/Get"),
                ("le", "+Inf")
            ]
        ),
        ok + REFUSED_CALLS as f64,
        "{text}"
    );
    assert_eq!(
        client_calls("counter", "proto.Counter/Put", "OK"),
        1.0,
        "{text}"
    );
    assert_eq!(
        metrics.sum(
            "rpc_server_call_duration_seconds_count",
            &[
                ("tether_plugin_name", "counter"),
                ("rpc_method", "proto.AddHelper/Sum"),
                ("rpc_response_status_code", "OK")
            ]
        ),
        1.0,
        "the callback: {text}"
    );

    let probe = [("tether_plugin_name", "probe")];
    let success = [
        ("tether_plugin_name", "probe"),
        ("tether_plugin_start_outcome", "success"),
    ];
    assert_eq!(
        metrics.sum("tether_plugin_starts_total", &success),
        2.0,
        "{text}"
    );
    assert_eq!(
        metrics.sum("tether_plugin_start_duration_seconds_count", &success),
        2.0,
        "{text}"
    );
    assert_eq!(
        metrics.sum(
            "tether_plugin_crashes_total",
            &[
                ("tether_plugin_name", "probe"),
                ("tether_plugin_crash_reason", "exit")
            ]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        metrics.sum("tether_plugin_restarts_total", &probe),
        1.0,
        "{text}"
    );
    assert_eq!(
        metrics.sum("tether_plugin_idle_stops_total", &probe),
        0.0,
        "{text}"
    );
    assert_eq!(
        metrics.sum("tether_plugin_starts_total", &counter),
        1.0,
        "{text}"
    );
    assert_eq!(
        metrics.sum("tether_plugin_restarts_total", &counter),
        0.0,
        "{text}"
    );
    assert_eq!(
        metrics.sum("tether_plugin_idle_stops_total", &counter),
        1.0,
        "{text}"
    );
    // A stopped plugin has no resources to report.
    assert!(
        metrics
            .find("tether_plugin_memory_usage_bytes", &counter)
            .is_empty(),
        "{text}"
    );
    for (family, kind) in [
        ("rpc_client_call_duration_seconds", "histogram"),
        ("rpc_server_call_duration_seconds", "histogram"),
        ("tether_plugin_starts_total", "counter"),
        ("tether_plugin_memory_usage_bytes", "gauge"),
        ("tether_plugin_calls_active", "gauge"),
    ] {
        assert_eq!(
            metrics.types.get(family).map(String::as_str),
            Some(kind),
            "{family}: {:?}",
            metrics.types
        );
    }
    supervisor.shutdown().await;
    provider.shutdown().unwrap();
}
