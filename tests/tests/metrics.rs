//! Per-plugin metrics from a real supervisor with real plugins, read the way Prometheus reads
//! them: the host's `MeterProvider` has opentelemetry-prometheus's reader, the exposition is
//! linted and parsed by `promcheck` (promlint and Prometheus's own scrape parser), and the
//! values are the calls, callbacks, crashes, restarts, idle stops, deadlines and failed starts
//! the tests made.

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
use tether_examples::streams_proto::SleepRequest;
use tether_examples::streams_proto::streams_client::StreamsClient;
use tether_tests::bins;
use tether_tests::lease::{eventually, get, put};
use tether_tests::otel;
use tether_tests::promcheck::{self, Checked};
use tether_tests::world::{PluginSpec, TEST_GRACE, World};

const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");
const STREAMS_PLUGIN: &str = env!("CARGO_BIN_EXE_streams-plugin");
const EXIT_BEFORE_HANDSHAKE: &str = env!("CARGO_BIN_EXE_exit-before-handshake");

/// The supervisor's call timeout in the deadline test: calls without a deadline of their own
/// are abandoned after it.
const CALL_TIMEOUT: Duration = Duration::from_millis(400);

/// The deadline the deadline test's first hanging call carries itself (`grpc-timeout`).
const GRPC_DEADLINE: Duration = Duration::from_millis(50);

/// How long the deadline test's hanging calls ask the plugin to sleep: far past any deadline.
const AN_HOUR_MS: u64 = 3_600_000;

/// How long the supervisor may take to kill a hung plugin in the background.
const HANG_KILL_DEADLINE: Duration = Duration::from_secs(10);

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

/// A `MeterProvider` whose reader is OpenTelemetry's Prometheus exporter into a new registry.
fn prometheus_provider() -> (prometheus::Registry, SdkMeterProvider) {
    let registry = prometheus::Registry::new();
    let exporter = opentelemetry_prometheus::exporter()
        .with_registry(registry.clone())
        .build()
        .unwrap();
    let provider = SdkMeterProvider::builder().with_reader(exporter).build();
    (registry, provider)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervisors_plugin_metrics_lint_clean_parse_with_prometheus_and_count_the_calls_made() {
    let Some(tools) = otel::tools_or_skip(
        "a_supervisors_plugin_metrics_lint_clean_parse_with_prometheus_and_count_the_calls_made",
    ) else {
        return;
    };
    let (registry, provider) = prometheus_provider();

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

/// A `Sleep` of `millis` through `lease`, carrying `grpc_deadline` as its own deadline if given.
async fn sleep_call(
    lease: &tether_broker::Lease,
    millis: u64,
    grpc_deadline: Option<Duration>,
) -> Result<(), tether_broker::UseError> {
    lease
        .call(|channel| async move {
            let mut request = tonic::Request::new(SleepRequest { millis });
            if let Some(deadline) = grpc_deadline {
                request.set_timeout(deadline);
            }
            StreamsClient::new(channel).sleep(request).await
        })
        .await
        .map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_run_out_their_deadline_count_as_deadline_exceeded_and_the_recycled_plugin_as_a_hang()
 {
    let Some(tools) = otel::tools_or_skip(
        "calls_that_run_out_their_deadline_count_as_deadline_exceeded_and_the_recycled_plugin_as_a_hang",
    ) else {
        return;
    };
    let (registry, provider) = prometheus_provider();
    let world = World::new();
    world.add_plugin(
        &PluginSpec::new("sleeper", STREAMS_PLUGIN).tables("[restart]\ninitial_backoff = \"10ms\""),
    );
    let (delivery, run) = (world.delivery(), world.run());
    let supervisor = world
        .supervisor(Grants::new())
        .customize(move |b| {
            b.delivery_dir(&delivery).private_dir_base(&run).timeouts(
                Timeouts::default()
                    .shutdown_grace(TEST_GRACE)
                    .terminate_grace(TEST_GRACE),
            )
        })
        .call_timeout(CALL_TIMEOUT)
        .recycle_after_deadlines(2)
        .meter(&provider.meter("tether"))
        .build();

    let lease = supervisor.acquire("sleeper").await.unwrap();
    sleep_call(&lease, 0, None).await.unwrap();
    // 1. The call's own deadline runs out.
    let err = sleep_call(&lease, AN_HOUR_MS, Some(GRPC_DEADLINE))
        .await
        .unwrap_err();
    assert!(matches!(err.kind(), UseErrorKind::Call { .. }), "{err}");
    // 2. A call without one is abandoned at the supervisor's call timeout: the second deadline
    //    in a row, so the plugin is killed as hung.
    let err = sleep_call(&lease, AN_HOUR_MS, None).await.unwrap_err();
    assert!(
        matches!(
            err.kind(),
            UseErrorKind::DeadlineExceeded { recycled: true, .. }
        ),
        "{err}"
    );
    drop(lease);
    let hang = [
        ("tether_plugin_name", "sleeper"),
        ("tether_plugin_crash_reason", "hang"),
    ];
    eventually("the hung plugin is killed", HANG_KILL_DEADLINE, || {
        checked(&tools, &registry)
            .1
            .sum("tether_plugin_crashes_total", &hang)
            >= 1.0
    })
    .await;
    // 3. The next use restarts it, and it answers.
    let lease = supervisor.acquire("sleeper").await.unwrap();
    sleep_call(&lease, 0, None).await.unwrap();
    drop(lease);

    let (text, metrics) = checked(&tools, &registry);
    eprintln!("the exposition, as promcheck read it cleanly:\n{text}");
    let sleeps = |status: &str, le: Option<&str>| {
        let mut labels = vec![
            ("tether_plugin_name", "sleeper"),
            ("rpc_method", "streams.Streams/Sleep"),
            ("rpc_response_status_code", status),
        ];
        let name = match le {
            Some(le) => {
                labels.push(("le", le));
                "rpc_client_call_duration_seconds_bucket"
            }
            None => "rpc_client_call_duration_seconds_count",
        };
        metrics.sum(name, &labels)
    };
    assert_eq!(sleeps("OK", None), 2.0, "{text}");
    assert_eq!(sleeps("DEADLINE_EXCEEDED", None), 2.0, "{text}");
    for status in ["CANCELLED", "UNAVAILABLE", "UNKNOWN"] {
        assert_eq!(sleeps(status, None), 0.0, "no call ended {status}: {text}");
    }
    // Each ran its deadline out, no less: the 50 ms one within 250 ms, the 400 ms one not.
    assert_eq!(sleeps("DEADLINE_EXCEEDED", Some("+Inf")), 2.0, "{text}");
    assert_eq!(sleeps("DEADLINE_EXCEEDED", Some("0.25")), 1.0, "{text}");
    assert_eq!(sleeps("DEADLINE_EXCEEDED", Some("0.025")), 0.0, "{text}");
    let deadline_seconds = metrics.sum(
        "rpc_client_call_duration_seconds_sum",
        &[("rpc_response_status_code", "DEADLINE_EXCEEDED")],
    );
    assert!(
        deadline_seconds >= (GRPC_DEADLINE + CALL_TIMEOUT).as_secs_f64(),
        "{deadline_seconds} s: {text}"
    );

    let sleeper = [("tether_plugin_name", "sleeper")];
    assert_eq!(
        metrics.sum("tether_plugin_crashes_total", &hang),
        1.0,
        "{text}"
    );
    assert_eq!(
        metrics.sum("tether_plugin_crashes_total", &sleeper),
        1.0,
        "no exit besides the hang: {text}"
    );
    assert_eq!(
        metrics.sum("tether_plugin_restarts_total", &sleeper),
        1.0,
        "{text}"
    );
    assert_eq!(
        metrics.sum(
            "tether_plugin_starts_total",
            &[
                ("tether_plugin_name", "sleeper"),
                ("tether_plugin_start_outcome", "success")
            ]
        ),
        2.0,
        "{text}"
    );
    assert_eq!(
        metrics.sum(
            "tether_plugin_calls_active",
            &[
                ("tether_plugin_name", "sleeper"),
                ("tether_call_side", "client")
            ]
        ),
        0.0,
        "the abandoned calls are no longer in flight: {text}"
    );
    supervisor.shutdown().await;
    provider.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_that_fail_count_as_failures_with_their_duration_and_nothing_as_running() {
    let Some(tools) = otel::tools_or_skip(
        "starts_that_fail_count_as_failures_with_their_duration_and_nothing_as_running",
    ) else {
        return;
    };
    let (registry, provider) = prometheus_provider();
    let world = World::new();
    // Exits with status 3 before its handshake.
    world.add_plugin(
        &PluginSpec::new("broken", EXIT_BEFORE_HANDSHAKE)
            .tables("[restart]\ninitial_backoff = \"10ms\""),
    );
    // Asks for a secret the grants do not give: refused before anything starts.
    world.add_plugin(&PluginSpec::new("needy", PROBE).secrets(&["token"]));
    let (delivery, run) = (world.delivery(), world.run());
    let supervisor = world
        .supervisor(Grants::new())
        .customize(move |b| b.delivery_dir(&delivery).private_dir_base(&run))
        .meter(&provider.meter("tether"))
        .build();

    const BROKEN_STARTS: usize = 2;
    for _ in 0..BROKEN_STARTS {
        let err = supervisor.acquire("broken").await.unwrap_err();
        assert!(
            err.plugin() == "broken" && matches!(err.kind(), UseErrorKind::Start(_)),
            "{err}"
        );
    }
    let err = supervisor.acquire("needy").await.unwrap_err();
    assert!(
        err.plugin() == "needy" && matches!(err.kind(), UseErrorKind::NotGranted(_)),
        "{err}"
    );

    let (text, metrics) = checked(&tools, &registry);
    eprintln!("the exposition, as promcheck read it cleanly:\n{text}");
    for (plugin, failures) in [("broken", BROKEN_STARTS as f64), ("needy", 1.0)] {
        let outcome = |outcome| {
            [
                ("tether_plugin_name", plugin),
                ("tether_plugin_start_outcome", outcome),
            ]
        };
        assert_eq!(
            metrics.sum("tether_plugin_starts_total", &outcome("failure")),
            failures,
            "{plugin}: {text}"
        );
        assert_eq!(
            metrics.sum(
                "tether_plugin_start_duration_seconds_count",
                &outcome("failure")
            ),
            failures,
            "{plugin}: {text}"
        );
        assert_eq!(
            metrics.sum("tether_plugin_starts_total", &outcome("success")),
            0.0,
            "{plugin}: {text}"
        );
        let named = [("tether_plugin_name", plugin)];
        for never in [
            "tether_plugin_crashes_total",
            "tether_plugin_restarts_total",
            "rpc_client_call_duration_seconds_count",
        ] {
            assert_eq!(metrics.sum(never, &named), 0.0, "{plugin} {never}: {text}");
        }
        for gauge in [
            "tether_plugin_memory_usage_bytes",
            "tether_plugin_processes",
        ] {
            assert!(
                metrics.find(gauge, &named).is_empty(),
                "{plugin} {gauge}: {text}"
            );
        }
    }
    // The launch that failed took time (a process ran and exited); its duration is recorded.
    let broken_seconds = metrics.sum(
        "tether_plugin_start_duration_seconds_sum",
        &[("tether_plugin_name", "broken")],
    );
    assert!(broken_seconds > 0.0, "{text}");
    supervisor.shutdown().await;
    provider.shutdown().unwrap();
}
