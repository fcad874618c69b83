//! The suite's unit tests: evaluation of each measurement's line, which systems run what, the
//! metric table.

use super::*;
use crate::line::Line;

fn eval(m: Measurement, line: &str) -> Vec<(&'static str, Value)> {
    m.evaluate(&Line::parse(line).unwrap()).unwrap()
}

#[test]
fn launch_samples_become_p50_p90_and_p99_in_milliseconds() {
    let values = eval(Measurement::Launch, "samples_ns=3000000,1000000,2000000");
    assert_eq!(
        values,
        vec![
            ("launch_p50", Value::Number(2.0)),
            ("launch_p90", Value::Number(3.0)),
            ("launch_p99", Value::Number(3.0))
        ]
    );
}

#[test]
fn launch_with_namespaces_off_runs_right_after_launch_with_rows_of_its_own() {
    let all = Measurement::all();
    assert_eq!(all[..2], [Measurement::Launch, Measurement::LaunchLayers]);
    assert_eq!(
        Measurement::LaunchLayers.host_args(),
        ["--namespaces", "off"]
    );
    let values = eval(
        Measurement::LaunchLayers,
        "samples_ns=3000000,1000000,2000000",
    );
    assert_eq!(
        values,
        vec![
            ("launch_layers_p50", Value::Number(2.0)),
            ("launch_layers_p90", Value::Number(3.0))
        ]
    );
    assert!(TETHER_ONLY.contains(&"launch_layers_p50"));
}

#[test]
fn unary_samples_become_microseconds() {
    let values = eval(Measurement::Unary { size: 64 }, "samples_ns=50000");
    assert_eq!(values[0], ("unary_p50", Value::Number(50.0)));
}

#[test]
fn each_unary_size_has_rows_of_its_own_and_passes_its_size() {
    let kib = eval(Measurement::Unary { size: 1024 }, "samples_ns=50000");
    assert_eq!(kib[0], ("unary_1kib_p50", Value::Number(50.0)));
    let big = eval(Measurement::Unary { size: 65_536 }, "samples_ns=50000");
    assert_eq!(big[1], ("unary_64kib_p99", Value::Number(50.0)));
    let args = Measurement::Unary { size: 1024 }.args(&Counts::QUICK);
    assert_eq!(args[args.len() - 2..], ["--size", "1024"]);
}

#[test]
fn the_multiplexed_rate_has_its_own_row_and_runs_only_on_hosts_that_offer_it() {
    let muxed = Measurement::Rate {
        concurrency: 64,
        multiplex: true,
    };
    let values = eval(muxed, "calls=1000 elapsed_ns=500000000");
    assert_eq!(values, vec![("rate_mux_c64", Value::Number(2000.0))]);
    assert_eq!(muxed.host_args(), ["--multiplex"]);
    let host = |multiplex| SystemKind::KvHost {
        host: "h".into(),
        plugin: "p".into(),
        counter: None,
        tether: false,
        multiplex,
    };
    assert!(muxed.applies_to(&host(true)));
    assert!(!muxed.applies_to(&host(false)));
    let plain = Measurement::Rate {
        concurrency: 64,
        multiplex: false,
    };
    assert!(plain.applies_to(&host(false)));
    assert!(plain.host_args().is_empty());
}

#[test]
fn a_rate_is_calls_over_elapsed_seconds() {
    let values = eval(
        Measurement::Rate {
            concurrency: 64,
            multiplex: false,
        },
        "calls=1000 elapsed_ns=500000000",
    );
    assert_eq!(values, vec![("rate_c64", Value::Number(2000.0))]);
}

#[test]
fn a_payload_rate_is_megabytes_per_second_and_a_refusal_is_kept() {
    let ok = eval(
        Measurement::Payload { size: MIB },
        "bytes=4000000 elapsed_ns=2000000000",
    );
    assert_eq!(ok, vec![("payload_1mib", Value::Number(2.0))]);
    let refused = eval(
        Measurement::Payload { size: 64 * MIB },
        "failed=ResourceExhausted",
    );
    assert_eq!(
        refused,
        vec![("payload_64mib", Value::Failed("ResourceExhausted".into()))]
    );
}

#[test]
fn host_rss_growth_is_spread_over_the_plugins_after_the_first() {
    let values = eval(
        Measurement::HostRss,
        "first_kb=8000 last_kb=8990 plugins=100",
    );
    assert_eq!(values, vec![("host_rss_per_plugin", Value::Number(10.0))]);
}

#[test]
fn a_callback_run_yields_both_p50s_and_their_ratio() {
    let values = eval(
        Measurement::Callback {
            mode: CallbackMode::Default,
        },
        "unary_ns=100000,200000,300000 callback_ns=600000,500000,400000",
    );
    assert_eq!(
        values,
        vec![
            ("callback_plain_p50", Value::Number(200.0)),
            ("callback_p50", Value::Number(500.0)),
            ("callback_p99", Value::Number(600.0)),
            ("callback_over_plain", Value::Number(2.5)),
        ]
    );
}

#[test]
fn a_catalog_run_yields_milliseconds_and_the_most_processes_any_repeat_started() {
    let values = eval(
        Measurement::Catalog,
        "load_ns=3000000,1000000,2000000 use_ns=9000000,8000000,7000000 started=2,3,2",
    );
    assert_eq!(
        values,
        vec![
            ("catalog_load", Value::Number(2.0)),
            ("catalog_use", Value::Number(8.0)),
            ("catalog_started", Value::Number(3.0)),
        ]
    );
}

#[test]
fn tether_only_measurements_skip_go_plugin_and_callbacks_need_counter_programs() {
    let go = SystemKind::KvHost {
        host: "kvhost".into(),
        plugin: "kvplugin".into(),
        counter: None,
        tether: false,
        multiplex: false,
    };
    assert!(!Measurement::Catalog.applies_to(&go));
    assert!(!Measurement::LaunchConfinementOff.applies_to(&go));
    assert!(!Measurement::LaunchLayers.applies_to(&go));
    let callback = Measurement::Callback {
        mode: CallbackMode::Default,
    };
    assert!(!callback.applies_to(&go));
    assert!(Measurement::Launch.applies_to(&go));
}

#[test]
fn the_multiplexed_callback_runs_only_on_hosts_that_take_multiplex() {
    let with = |multiplex| SystemKind::KvHost {
        host: "kvhost".into(),
        plugin: "kvplugin".into(),
        counter: Some(CounterPrograms {
            host: "counterhost".into(),
            plugin: "counterplugin".into(),
            host_args: Vec::new(),
            multiplex,
        }),
        tether: false,
        multiplex: false,
    };
    let muxed = Measurement::Callback {
        mode: CallbackMode::Multiplexed,
    };
    let default = Measurement::Callback {
        mode: CallbackMode::Default,
    };
    assert!(muxed.applies_to(&with(true)));
    assert!(!muxed.applies_to(&with(false)));
    assert!(default.applies_to(&with(false)));
    assert_eq!(muxed.host_args(), ["--multiplex"]);
    assert!(default.host_args().is_empty());
}

#[test]
fn zero_elapsed_time_is_rejected_rather_than_infinite() {
    let line = Line::parse("calls=10 elapsed_ns=0").unwrap();
    assert!(
        Measurement::Rate {
            concurrency: 1,
            multiplex: false
        }
        .evaluate(&line)
        .is_err()
    );
}

#[test]
fn every_measurement_yields_only_metrics_the_report_knows() {
    for m in Measurement::all() {
        let line = match m {
            Measurement::Launch
            | Measurement::LaunchLayers
            | Measurement::Unary { .. }
            | Measurement::LaunchConfinementOff => "samples_ns=1,2",
            Measurement::Callback { .. } => "unary_ns=1,2 callback_ns=3,4",
            Measurement::Catalog => "load_ns=1 use_ns=2 started=2",
            _ => {
                "calls=1 elapsed_ns=1 bytes=1 rss_kb=1 first_kb=1 last_kb=2 plugins=2 first_fds=1 last_fds=3"
            }
        };
        for (id, _) in eval(m, line) {
            assert!(metric(id).is_some(), "{id} from {m:?} has no MetricSpec");
        }
    }
}

#[test]
fn the_floor_skips_measurements_it_cannot_make() {
    let floor = SystemKind::Floor {
        pingpong: "pingpong".into(),
    };
    assert!(Measurement::Unary { size: 1024 }.applies_to(&floor));
    assert!(
        !Measurement::Rate {
            concurrency: 16,
            multiplex: false
        }
        .applies_to(&floor)
    );
    assert!(!Measurement::HostRss.applies_to(&floor));
}

#[test]
fn quick_counts_are_smaller_than_full_ones() {
    let (q, f) = (Counts::QUICK, Counts::FULL);
    assert!(q.rounds < f.rounds && q.unary_calls < f.unary_calls);
    assert!(f.rounds >= 3, "the issue asks for at least three rounds");
}
