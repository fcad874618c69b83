//! The pinned section of the generated report: the floor and tether per placement (both on
//! one CPU, on two CPUs), side by side, with "unary vs floor" per placement; and its part of
//! `bench-results.json`.

use std::fmt::Write as _;

use serde_json::{Value as Json, json};

use super::format::{format_ratio, with_unit};
use super::results::{Results, Summary};
use crate::suite::Placement;

/// The unary goal the floor judges (issue 14): tether's p50 ≤ this many times the floor's.
pub const UNARY_GOAL_TIMES_FLOOR: f64 = 2.5;

/// What the section is made from besides the results.
#[derive(Debug, Clone)]
pub struct PlacementReport {
    /// The CPUs the harness could use.
    pub allowed: Vec<usize>,
    /// Placements that could not be made here, and why.
    pub unavailable: Vec<(Placement, String)>,
    /// Timed calls per run.
    pub calls: u64,
}

fn cell(results: &Results, system: &str, metric: &str) -> String {
    match results.summary(system, metric) {
        Some(Summary::Median(v)) => with_unit(v, "µs"),
        Some(Summary::Failed(code)) => format!("fails ({code})"),
        None => "—".into(),
    }
}

/// The section, Markdown.
#[must_use]
pub fn markdown(results: &Results, report: &PlacementReport) -> String {
    let mut md = String::new();
    let _ = writeln!(md);
    let _ = writeln!(md, "### The floor and tether per CPU placement (pinned)");
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "The same 64 B sequential calls ({} timed per run) with the placement chosen by \
         `sched_setaffinity` instead of left to the scheduler: *both on one CPU* pins the \
         host (the floor's parent) to CPU {one} and its plugin (echo child) stays with it; *on \
         two CPUs* moves the plugin's threads to the next CPU (`kv-bench`/`pingpong \
         --plugin-cpu`). Each placement runs for the floor and for tether in every round, \
         the order rotating; cells are median rounds, the last column the median of the \
         rounds' own tether ÷ floor ratios (smallest–largest).",
        report.calls,
        one = report
            .allowed
            .first()
            .map_or_else(|| "?".into(), ToString::to_string),
    );
    let _ = writeln!(md);
    for (placement, why) in &report.unavailable {
        let _ = writeln!(md, "**{} not measured: {why}.**", placement.label());
        let _ = writeln!(md);
    }
    let _ = writeln!(
        md,
        "| placement | floor p50 | tether p50 | tether ÷ floor (p50) | unary ≤ {}× the floor | floor p99 | tether p99 | tether ÷ floor, per round |",
        format_ratio(UNARY_GOAL_TIMES_FLOOR)
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---|---:|---:|---:|");
    for placement in Placement::ALL {
        let (tether, floor) = (placement.id(false), placement.id(true));
        let ratio = results.ratio(tether, floor, "unary_p50");
        let status = match ratio {
            Some(r) if r <= UNARY_GOAL_TIMES_FLOOR => "met",
            Some(_) => "**not met**",
            None => "not measured",
        };
        let paired = results
            .paired_ratios(tether, floor, "unary_p50")
            .map_or_else(
                || "—".into(),
                |p| {
                    format!(
                        "{}× ({}–{}×)",
                        format_ratio(p.median),
                        format_ratio(p.min),
                        format_ratio(p.max)
                    )
                },
            );
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {status} | {} | {} | {paired} |",
            placement.label(),
            cell(results, floor, "unary_p50"),
            cell(results, tether, "unary_p50"),
            ratio.map_or_else(|| "—".into(), |r| format!("{}×", format_ratio(r))),
            cell(results, floor, "unary_p99"),
            cell(results, tether, "unary_p99"),
        );
    }
    let _ = writeln!(md);
    md
}

/// The section's part of `bench-results.json`.
#[must_use]
pub fn json(results: &Results, report: &PlacementReport) -> Json {
    let summary = |system: &str, metric: &str| match results.summary(system, metric) {
        Some(Summary::Median(m)) => json!({ "median": m }),
        Some(Summary::Failed(code)) => json!({ "failed": code }),
        None => Json::Null,
    };
    let placements: Vec<Json> = Placement::ALL
        .iter()
        .map(|&p| {
            let (tether, floor) = (p.id(false), p.id(true));
            json!({
                "placement": p.label(),
                "floor_unary_p50_us": summary(floor, "unary_p50"),
                "tether_unary_p50_us": summary(tether, "unary_p50"),
                "floor_unary_p99_us": summary(floor, "unary_p99"),
                "tether_unary_p99_us": summary(tether, "unary_p99"),
                "ratio_tether_to_floor_p50": results.ratio(tether, floor, "unary_p50"),
                "paired_ratio_tether_to_floor_p50": results
                    .paired_ratios(tether, floor, "unary_p50")
                    .map(|r| json!({ "median": r.median, "min": r.min, "max": r.max, "pairs": r.pairs })),
            })
        })
        .collect();
    json!({
        "allowed_cpus": report.allowed,
        "unavailable": report.unavailable.iter().map(|(p, why)| json!({ "placement": p.label(), "why": why })).collect::<Vec<_>>(),
        "placements": placements,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::Value;

    #[test]
    fn each_placement_shows_the_floor_tether_and_their_ratio_per_round() {
        let mut results = Results::default();
        for (floor, tether) in [(4.0, 30.0), (5.0, 30.0)] {
            results.record("floor-one-cpu", "unary_p50", Value::Number(floor));
            results.record("tether-one-cpu", "unary_p50", Value::Number(tether));
        }
        for (floor, tether) in [(60.0, 60.0), (50.0, 75.0)] {
            results.record("floor-two-cpus", "unary_p50", Value::Number(floor));
            results.record("tether-two-cpus", "unary_p50", Value::Number(tether));
        }
        let report = PlacementReport {
            allowed: vec![0, 1],
            unavailable: Vec::new(),
            calls: 5000,
        };
        let md = markdown(&results, &report);
        assert!(
            md.contains("| both on one CPU | 4.50 µs | 30.0 µs | 6.67× | **not met** |"),
            "{md}"
        );
        assert!(md.contains("| 6.75× (6.00–7.50×) |"), "{md}");
        assert!(
            md.contains("| on two CPUs | 55.0 µs | 67.5 µs | 1.23× | met |"),
            "{md}"
        );
        assert!(md.contains("| 1.25× (1.00–1.50×) |"), "{md}");
        let json = json(&results, &report);
        assert_eq!(
            json["placements"][1]["paired_ratio_tether_to_floor_p50"]["median"],
            1.25
        );
    }
}
