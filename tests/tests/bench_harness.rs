//! The benchmark harness (`tether-bench`) against the real programs it drives: every
//! measurement of tether's drivers `kv-bench`/`counter-bench`, go-plugin's `kvhost`/`counterhost` (v1.8,
//! and 1.0.1 for the plaintext callback) and the `pingpong` floor yields values the harness
//! accepts, with tiny counts. Nothing here asserts a timing — speed
//! is measured by `bash bench/run.sh`, not by tests.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::{Path, PathBuf};

use tether_bench::run::DEFAULT_RUN_TIMEOUT;
use tether_bench::suite::{
    CallbackMode, CounterPrograms, Counts, MIB, Measurement, PINNED_MEASUREMENT, Placement, System,
    SystemKind, TELEMETRY_MEASUREMENTS, TELEMETRY_PLACEMENT, TelemetryMode, Value,
};
use tether_tests::bins;
use tether_tests::peers::{self, GoPlugin};
use tether_tests::procs;

/// Smaller than `Counts::QUICK`: debug builds.
const SMOKE: Counts = Counts {
    rounds: 1,
    launches: 2,
    unary_calls: 5,
    rate_calls: 20,
    warmup: 1,
    rate_warmup: 2,
    rounds_1mib: 1,
    rounds_64mib: 1,
    live_plugins: 2,
    callback_pairs: 3,
    callback_warmup: 1,
    catalog_manifests: 50,
    catalog_used: 2,
    catalog_repeat: 1,
};

fn kv(
    id: &'static str,
    host: &Path,
    plugin: &Path,
    counter: Option<CounterPrograms>,
    tether: bool,
    multiplex: bool,
) -> System {
    System {
        id,
        label: id.into(),
        kind: SystemKind::KvHost {
            host: host.into(),
            plugin: plugin.into(),
            counter,
            tether,
            multiplex,
        },
    }
}

fn counter(
    host: &Path,
    plugin: &Path,
    host_args: &[&str],
    multiplex: bool,
) -> Option<CounterPrograms> {
    Some(CounterPrograms {
        host: host.into(),
        plugin: plugin.into(),
        host_args: host_args.iter().map(|&a| a.to_owned()).collect(),
        multiplex,
    })
}

/// Runs every measurement that applies to `system` and returns (measurement, metric, value).
fn measure_all(system: &System, work: &Path) -> Vec<(Measurement, &'static str, Value)> {
    let mut all = Vec::new();
    for m in Measurement::all() {
        if !m.applies_to(&system.kind) {
            continue;
        }
        let values = tether_bench::run::run(system, m, &SMOKE, work, DEFAULT_RUN_TIMEOUT)
            .unwrap_or_else(|e| panic!("{} {}: {e}", system.id, m.name()));
        assert!(
            !values.is_empty(),
            "{} {} gave no values",
            system.id,
            m.name()
        );
        all.extend(values.into_iter().map(|(id, v)| (m, id, v)));
    }
    all
}

fn assert_positive_except(values: &[(Measurement, &str, Value)], failing: &[&str]) {
    for (m, id, v) in values {
        match v {
            Value::Number(n) => assert!(
                n.is_finite() && *n >= 0.0 && !failing.contains(id),
                "{m:?} {id} = {n}"
            ),
            Value::Failed(code) => assert!(failing.contains(id), "{m:?} {id} failed: {code}"),
        }
    }
}

#[test]
fn every_measurement_of_the_tether_broker_yields_numbers_including_64_mib_messages() {
    let work = tempfile::tempdir().unwrap();
    let system = kv(
        "tether",
        Path::new(bins::KV_BENCH.path()),
        Path::new(bins::KV_PLUGIN.path()),
        counter(
            Path::new(bins::COUNTER_BENCH.path()),
            Path::new(bins::COUNTER_PLUGIN.path()),
            &[],
            true,
        ),
        true,
        true,
    );
    let values = measure_all(&system, work.path());
    assert_positive_except(&values, &[]);
    let has = |id: &str| values.iter().any(|(_, i, _)| *i == id);
    for id in [
        "launch_p99",
        "unary_p50",
        "unary_1kib_p99",
        "unary_64kib_p50",
        "rate_c64",
        "rate_mux_c64",
        "payload_64mib",
        "plugin_rss",
        "host_rss_per_plugin",
        "callback_p50",
        "callback_over_plain",
        "callback_mux_p50",
        "callback_mux_over_plain",
        "launch_off_p50",
        "catalog_load",
    ] {
        assert!(has(id), "no {id}");
    }
    let started = values
        .iter()
        .find(|(_, id, _)| *id == "catalog_started")
        .unwrap();
    assert_eq!(
        started.2,
        Value::Number(2.0),
        "a lazy catalog starts only the plugins used"
    );
    assert!(
        procs::in_dir(work.path()).is_empty(),
        "plugins left running"
    );
}

#[test]
fn go_plugin_refuses_64_mib_messages_and_yields_every_other_measurement() {
    let Some(go) = peers::go_or_skip(GoPlugin::V18, "go_plugin_refuses_64_mib_messages") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let system = kv(
        "go18",
        &go.host,
        &go.plugin,
        counter(&go.counter_host, &go.counter_plugin, &[], true),
        false,
        true,
    );
    let values = measure_all(&system, work.path());
    assert_positive_except(&values, &["payload_64mib"]);
    assert!(values.iter().any(|(_, id, _)| *id == "callback_p50"));
    assert!(values.iter().any(|(_, id, _)| *id == "callback_mux_p50"));
    assert!(values.iter().any(|(_, id, _)| *id == "unary_64kib_p50"));
    assert!(
        values.iter().any(|(_, id, _)| *id == "rate_mux_c64"),
        "kvhost takes --multiplex"
    );
    assert!(
        !values.iter().any(|(_, id, _)| *id == "catalog_load"),
        "go-plugin has no catalog"
    );
    let big = values
        .iter()
        .find(|(m, _, _)| *m == Measurement::Payload { size: 64 * MIB })
        .unwrap();
    assert_eq!(big.2, Value::Failed("ResourceExhausted".into()));
    assert!(
        procs::in_dir(work.path()).is_empty(),
        "plugins left running"
    );
}

#[test]
fn go_plugin_1_0_1_measures_a_callback_in_plaintext() {
    let Some(go) = peers::go_or_skip(
        GoPlugin::V101,
        "go_plugin_1_0_1_measures_a_callback_in_plaintext",
    ) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let system = kv(
        "go101",
        &go.host,
        &go.plugin,
        counter(
            &go.counter_host,
            &go.counter_plugin,
            &["--plaintext"],
            false,
        ),
        false,
        false,
    );
    let m = Measurement::Callback {
        mode: CallbackMode::Default,
    };
    let values = tether_bench::run::run(&system, m, &SMOKE, work.path(), DEFAULT_RUN_TIMEOUT)
        .unwrap_or_else(|e| panic!("go101 callback: {e}"));
    let ids: Vec<&str> = values.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        ids,
        [
            "callback_plain_p50",
            "callback_p50",
            "callback_p99",
            "callback_over_plain"
        ]
    );
    assert!(
        procs::in_dir(work.path()).is_empty(),
        "plugins left running"
    );
}

#[test]
fn the_raw_socket_floor_yields_launch_unary_payload_and_memory() {
    let work = tempfile::tempdir().unwrap();
    let system = System {
        id: "floor",
        label: "floor".into(),
        kind: SystemKind::Floor {
            pingpong: PathBuf::from(bins::PINGPONG.path()),
        },
    };
    let values = measure_all(&system, work.path());
    assert_positive_except(&values, &[]);
    let ids: Vec<&str> = values.iter().map(|(_, id, _)| *id).collect();
    assert_eq!(
        ids,
        [
            "launch_p50",
            "launch_p90",
            "launch_p99",
            "unary_p50",
            "unary_p99",
            "unary_1kib_p50",
            "unary_1kib_p99",
            "unary_64kib_p50",
            "unary_64kib_p99",
            "payload_1mib",
            "payload_64mib",
            "plugin_rss"
        ]
    );
}

#[test]
fn tether_and_the_floor_yield_pinned_numbers_in_each_placement_and_each_telemetry_mode() {
    let allowed = tether_bench::affinity::allowed_cpus().unwrap();
    if allowed.len() < 2 {
        eprintln!("SKIPPED: the two-CPU placement needs two CPUs, this test may use {allowed:?}");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let tether = kv(
        "tether",
        Path::new(bins::KV_BENCH.path()),
        Path::new(bins::KV_PLUGIN.path()),
        None,
        true,
        true,
    );
    let floor = System {
        id: "floor",
        label: "floor".into(),
        kind: SystemKind::Floor {
            pingpong: PathBuf::from(bins::PINGPONG.path()),
        },
    };
    let run = |system: &System, m: Measurement, placement: Placement, extra: &[&str]| {
        let pinned = placement.pinned(&allowed).unwrap();
        let values = tether_bench::run::run_pinned(
            system,
            m,
            &SMOKE,
            work.path(),
            DEFAULT_RUN_TIMEOUT,
            &pinned,
            extra,
        )
        .unwrap_or_else(|e| panic!("{} {} {placement:?} {extra:?}: {e}", system.id, m.name()));
        assert_positive_except(
            &values
                .iter()
                .map(|(id, v)| (m, *id, v.clone()))
                .collect::<Vec<_>>(),
            &[],
        );
        values.into_iter().map(|(id, _)| id).collect::<Vec<_>>()
    };
    for placement in Placement::ALL {
        for system in [&tether, &floor] {
            assert_eq!(
                run(system, PINNED_MEASUREMENT, placement, &[]),
                ["unary_p50", "unary_p99"]
            );
        }
    }
    for mode in TelemetryMode::ALL {
        let ids: Vec<&str> = TELEMETRY_MEASUREMENTS
            .iter()
            .flat_map(|&m| run(&tether, m, TELEMETRY_PLACEMENT, &mode.args()))
            .collect();
        assert_eq!(ids, ["unary_p50", "unary_p99", "rate_c64"], "{mode:?}");
    }
    assert!(
        procs::in_dir(work.path()).is_empty(),
        "plugins left running"
    );
}
