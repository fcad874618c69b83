//! The report's unit tests: summaries, goals, formatting, the table and splicing.

use serde_json::json;

use super::*;
use crate::suite::{Counts, System, SystemKind, Value};

fn results(pairs: &[(&str, &str, &[f64])]) -> Results {
    let mut r = Results::default();
    for (system, metric, values) in pairs {
        for v in *values {
            r.record(system, metric, Value::Number(*v));
        }
    }
    r
}

fn system(id: &'static str) -> System {
    System {
        id,
        label: id.to_uppercase(),
        kind: SystemKind::Floor {
            pingpong: "p".into(),
        },
    }
}

#[test]
fn the_summary_is_the_median_round() {
    let r = results(&[(TETHER, "unary_p50", &[90.0, 50.0, 60.0])]);
    assert_eq!(r.summary(TETHER, "unary_p50"), Some(Summary::Median(60.0)));
    assert_eq!(r.summary(TETHER, "launch_p50"), None);
}

#[test]
fn one_failed_round_makes_the_summary_a_failure() {
    let mut r = results(&[(BASELINE, "payload_64mib", &[100.0])]);
    r.record(
        BASELINE,
        "payload_64mib",
        Value::Failed("ResourceExhausted".into()),
    );
    assert_eq!(
        r.summary(BASELINE, "payload_64mib"),
        Some(Summary::Failed("ResourceExhausted".into()))
    );
    assert_eq!(r.ratio(TETHER, BASELINE, "payload_64mib"), None);
}

#[test]
fn a_ratio_goal_is_met_at_or_under_its_limit_and_reports_the_ratio() {
    let goal = GOALS.iter().find(|g| g.metric == "plugin_rss").unwrap();
    let r = results(&[
        (TETHER, "plugin_rss", &[6.0]),
        (BASELINE, "plugin_rss", &[15.0]),
    ]);
    let outcome = goal.judge(&r);
    assert_eq!(outcome.met, Some(true));
    assert_eq!(outcome.measured, "0.40×");
    let r = results(&[
        (TETHER, "plugin_rss", &[8.0]),
        (BASELINE, "plugin_rss", &[15.0]),
    ]);
    assert_eq!(goal.judge(&r).met, Some(false));
}

#[test]
fn floor_goals_compare_with_the_floor_in_both_directions() {
    let launch = GOALS.iter().find(|g| g.metric == "launch_p50").unwrap();
    let r = results(&[
        (TETHER, "launch_p50", &[5.0]),
        (FLOOR, "launch_p50", &[2.0]),
    ]);
    assert_eq!(launch.judge(&r).met, Some(true));
    let r = results(&[
        (TETHER, "launch_p50", &[5.1]),
        (FLOOR, "launch_p50", &[2.0]),
    ]);
    assert_eq!(launch.judge(&r).met, Some(false));
    let big = GOALS.iter().find(|g| g.metric == "payload_64mib").unwrap();
    let r = results(&[
        (TETHER, "payload_64mib", &[1_000.0]),
        (FLOOR, "payload_64mib", &[4_000.0]),
    ]);
    assert_eq!(
        big.judge(&r),
        Outcome {
            met: Some(false),
            measured: "0.25×".into()
        }
    );
    let r = results(&[
        (TETHER, "payload_64mib", &[2_000.0]),
        (FLOOR, "payload_64mib", &[4_000.0]),
    ]);
    assert_eq!(big.judge(&r).met, Some(true));
}

#[test]
fn an_absolute_goal_fails_beyond_its_limit_and_when_the_call_fails() {
    let goal = GOALS.iter().find(|g| g.metric == "catalog_load").unwrap();
    let r = results(&[(TETHER, "catalog_load", &[51.0])]);
    assert_eq!(
        goal.judge(&r),
        Outcome {
            met: Some(false),
            measured: "51.0 ms".into()
        }
    );
    let mut r = Results::default();
    r.record(TETHER, "catalog_load", Value::Failed("Internal".into()));
    assert_eq!(goal.judge(&r).met, Some(false));
}

#[test]
fn a_goal_without_a_baseline_is_not_measured_rather_than_met() {
    let r = results(&[(TETHER, "rate_c64", &[30_000.0])]);
    let goal = GOALS.iter().find(|g| g.metric == "rate_c64").unwrap();
    assert_eq!(goal.judge(&r).met, None);
}

#[test]
fn values_are_rounded_for_their_unit() {
    assert_eq!(format_value(7.734, "ms"), "7.73");
    assert_eq!(format_value(36.66, "ms"), "36.7");
    assert_eq!(format_value(134.7, "µs"), "135");
    assert_eq!(format_value(20_569.9, "calls/s"), "20,570");
    assert_eq!(format_value(1_234_567.0, "kB"), "1,234,567");
    assert_eq!(format_ratio(0.2109), "0.21");
    assert_eq!(format_ratio(1.486), "1.49");
    assert_eq!(format_ratio(12.4), "12");
}

#[test]
fn splicing_replaces_only_the_generated_section() {
    let doc = format!(
        "# Benchmarks\n\nintro\n\n{BEGIN_MARKER}\nold\n{END_MARKER}\n\n## Decisions\nkeep\n"
    );
    let new = format!("{BEGIN_MARKER}\nnew\n{END_MARKER}\n");
    let out = splice(&doc, &new);
    assert_eq!(
        out,
        format!(
            "# Benchmarks\n\nintro\n\n{BEGIN_MARKER}\nnew\n{END_MARKER}\n\n## Decisions\nkeep\n"
        )
    );
    assert_eq!(splice(&out, &new), out, "splicing twice changes nothing");
}

#[test]
fn splicing_without_markers_inserts_after_the_title_and_keeps_the_rest() {
    let new = format!("{BEGIN_MARKER}\nnew\n{END_MARKER}\n");
    let out = splice("# Benchmarks\n\n## Decisions\nkeep\n", &new);
    assert!(out.starts_with(&format!("# Benchmarks\n\n{BEGIN_MARKER}")));
    assert!(out.ends_with("## Decisions\nkeep\n"));
}

#[test]
fn the_table_puts_the_ratio_between_tether_and_go_plugin_and_marks_the_4_mib_cap() {
    let mut r = results(&[
        (TETHER, "unary_p50", &[50.0]),
        (BASELINE, "unary_p50", &[100.0]),
        (FLOOR, "unary_p50", &[40.0]),
    ]);
    r.record(
        BASELINE,
        "payload_64mib",
        Value::Failed("ResourceExhausted".into()),
    );
    let ctx = Context {
        date: "2026-11-30 23:00 UTC".into(),
        machine: "test machine".into(),
        load_before: Some([1.0, 2.0, 3.0]),
        load_after: None,
        tools: vec!["rustc 1".into()],
        counts: Counts::QUICK,
        quick: true,
        systems: vec![system(FLOOR), system(BASELINE), system(TETHER)],
    };
    let md = markdown(&r, &ctx);
    assert!(
        md.contains("| metric | TETHER | GO18 | ratio | FLOOR | tether ÷ floor |"),
        "{md}"
    );
    assert!(
        md.contains(
            "| unary 64 B round trip, sequential, p50 | 50.0 µs | 100 µs | 0.50× | 40.0 µs | 1.25× |"
        ),
        "{md}"
    );
    assert!(md.contains("fails (4 MiB cap)"), "{md}");
    assert!(
        md.contains("callback call ÷ plain call (multiplexed mode), p50s")
            && md.contains("(multiplexed broker mode)"),
        "the multiplexed callback has a row and a goal: {md}"
    );
    assert!(
        md.contains("| lazy catalog: plugin processes started | — | n/a | — | n/a | — |"),
        "go-plugin has no catalog: {md}"
    );
    assert!(md.starts_with(BEGIN_MARKER) && md.trim_end().ends_with(END_MARKER));
    let j = json(&r, &ctx);
    let unary = j["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "unary_p50")
        .unwrap();
    assert_eq!(unary["ratio_tether_to_go18"], json!(0.5));
    assert_eq!(unary["values"]["floor"]["summary"]["median"], json!(40.0));
}
