//! The harness's rounds beyond the main table: the floor and tether pinned per CPU placement,
//! and tether's telemetry modes alternating (`tether-bench` runs one of each per round), and
//! how every run's values are printed and kept.

use std::path::Path;

use crate::report::Results;
use crate::report::placement::PlacementReport;
use crate::report::telemetry::TelemetryReport;
use crate::suite::{
    Counts, PINNED_MEASUREMENT, Placement, System, TELEMETRY_MEASUREMENTS, TELEMETRY_PLACEMENT,
    TELEMETRY_REPEATS, TelemetryMode, Value,
};

/// What the placements' section is made from besides the results.
#[must_use]
pub fn placement_report(allowed: &[usize], counts: &Counts) -> PlacementReport {
    PlacementReport {
        allowed: allowed.to_vec(),
        unavailable: Placement::ALL
            .iter()
            .filter_map(|&p| p.pinned(allowed).err().map(|why| (p, why)))
            .collect(),
        calls: counts.unary_calls,
    }
}

/// What the telemetry section is made from besides the results.
#[must_use]
pub fn telemetry_report(allowed: &[usize], counts: &Counts) -> TelemetryReport {
    TelemetryReport {
        placement: TELEMETRY_PLACEMENT
            .pinned(allowed)
            .map(|p| (p.host, p.plugin.unwrap_or(p.host))),
        rounds: counts.rounds,
        unary_calls: counts.unary_calls,
        rate_calls: counts.rate_calls,
    }
}

/// What the pinned rounds (the placements, the telemetry modes) run with.
#[derive(Debug)]
pub struct Pinning<'a> {
    /// tether's system.
    pub tether: &'a System,
    /// The floor's.
    pub floor: &'a System,
    /// The harness's own CPUs.
    pub allowed: &'a [usize],
    /// How long one run may take.
    pub timeout: std::time::Duration,
    /// The runs' working directory.
    pub work: &'a Path,
    /// The counts.
    pub counts: &'a Counts,
}

/// The system `id` of `systems`.
pub fn find<'a>(systems: &'a [System], id: &str) -> Result<&'a System, String> {
    systems
        .iter()
        .find(|s| s.id == id)
        .ok_or_else(|| format!("no system {id}"))
}

/// One round of the placements: the floor and tether, both on one CPU and on two, the order
/// rotating with the round. A placement this machine cannot make is left out (the report says
/// why).
pub fn placements(p: &Pinning<'_>, round: u32, results: &mut Results) {
    let mut runs: Vec<(Placement, bool)> = Placement::ALL
        .iter()
        .flat_map(|&placement| [(placement, true), (placement, false)])
        .collect();
    let turn = round as usize % runs.len();
    runs.rotate_left(turn);
    for (placement, floor) in runs {
        let Ok(pinned) = placement.pinned(p.allowed) else {
            continue;
        };
        let system = if floor { p.floor } else { p.tether };
        eprint!(
            "round {}/{}: unary 64 B, {:<16} {:<8} ",
            round + 1,
            p.counts.rounds,
            placement.label(),
            system.id
        );
        let outcome = crate::run::run_pinned(
            system,
            PINNED_MEASUREMENT,
            p.counts,
            p.work,
            p.timeout,
            &pinned,
            &[],
        );
        record(results, placement.id(floor), round, outcome);
    }
}

/// One round of the telemetry modes: each measurement [`TELEMETRY_REPEATS`] times per mode, the
/// modes alternating and their order rotating, all in [`TELEMETRY_PLACEMENT`].
pub fn telemetry(p: &Pinning<'_>, round: u32, results: &mut Results) {
    let Ok(pinned) = TELEMETRY_PLACEMENT.pinned(p.allowed) else {
        return;
    };
    for repeat in 0..TELEMETRY_REPEATS {
        for measurement in TELEMETRY_MEASUREMENTS {
            let mut modes = TelemetryMode::ALL;
            let turn = (round * TELEMETRY_REPEATS + repeat) as usize % modes.len();
            modes.rotate_left(turn);
            for mode in modes {
                eprint!(
                    "round {}/{}: {:<16} telemetry {:<8} ",
                    round + 1,
                    p.counts.rounds,
                    measurement.name(),
                    mode.args()[1]
                );
                let outcome = crate::run::run_pinned(
                    p.tether,
                    measurement,
                    p.counts,
                    p.work,
                    p.timeout,
                    &pinned,
                    &mode.args(),
                );
                record(results, mode.id(), round, outcome);
            }
        }
    }
}

/// Prints one run's values (or its failure) on the progress line and keeps them for `system`.
pub fn record(
    results: &mut Results,
    system: &str,
    round: u32,
    outcome: Result<Vec<(&'static str, Value)>, crate::run::RunError>,
) {
    match outcome {
        Ok(values) => {
            let shown: Vec<String> = values
                .iter()
                .map(|(id, v)| match v {
                    Value::Number(n) => format!("{id}={n:.2}"),
                    Value::Failed(code) => format!("{id}=failed({code})"),
                })
                .collect();
            eprintln!("{}", shown.join(" "));
            for (id, value) in values {
                results.record(system, id, value);
            }
        }
        Err(e) => {
            eprintln!("FAILED: {e}");
            results.record_error(format!("round {}: {e}", round + 1));
        }
    }
}
