//! The telemetry section of the generated report: tether's host with telemetry off, metrics
//! on and tracing on, alternating in the same rounds, and each mode's cost as its ratio to
//! `off` run by run; and its part of `bench-results.json`.

use std::fmt::Write as _;

use serde_json::{Value as Json, json};

use super::format::{format_ratio, with_unit};
use super::results::{Paired, Results, Summary};
use crate::suite::{TELEMETRY_BUDGET, TELEMETRY_REPEATS, TELEMETRY_ROWS, TelemetryMode};

/// What the section is made from besides the results.
#[derive(Debug, Clone)]
pub struct TelemetryReport {
    /// The host's and the plugin's CPUs, or why the runs could not be pinned.
    pub placement: Result<(usize, usize), String>,
    /// Rounds of the run.
    pub rounds: u32,
    /// Timed sequential calls per unary run.
    pub unary_calls: u64,
    /// Timed calls per 64-caller run.
    pub rate_calls: u64,
}

fn cell(results: &Results, system: &str, metric: &str, unit: &str) -> String {
    match results.summary(system, metric) {
        Some(Summary::Median(v)) => with_unit(v, unit),
        Some(Summary::Failed(code)) => format!("fails ({code})"),
        None => "—".into(),
    }
}

/// Whether a ratio to `off` is within the budget: at most 1.03 for a time, at least 0.97 for a
/// rate.
#[must_use]
pub fn within_budget(ratio: f64, lower_is_better: bool) -> bool {
    if lower_is_better {
        ratio <= 1.0 + TELEMETRY_BUDGET
    } else {
        ratio >= 1.0 - TELEMETRY_BUDGET
    }
}

fn ratio_cells(paired: Option<Paired>, lower_is_better: bool) -> (String, &'static str) {
    match paired {
        Some(p) => (
            format!(
                "{}× ({}–{}×, {} pairs)",
                format_ratio(p.median),
                format_ratio(p.min),
                format_ratio(p.max),
                p.pairs
            ),
            if within_budget(p.median, lower_is_better) {
                "yes"
            } else {
                "**no**"
            },
        ),
        None => ("—".into(), "not measured"),
    }
}

/// The section, Markdown.
#[must_use]
pub fn markdown(results: &Results, report: &TelemetryReport) -> String {
    let mut md = String::new();
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "### The cost of telemetry: off vs metrics on vs tracing on"
    );
    let _ = writeln!(md);
    match &report.placement {
        Ok((host, plugin)) => {
            let _ = writeln!(
                md,
                "tether's `kv-bench` and `kv-plugin` pinned host on CPU {host}, plugin on CPU \
                 {plugin}; `--telemetry off|metrics|tracing` alternating, {} runs of each per \
                 round and measurement ({} rounds; {} timed sequential calls, or {} calls from \
                 64 callers, per run), the modes' order rotating. *metrics*: the host's \
                 per-plugin metrics (`telemetry::Metrics`) on a real OpenTelemetry SDK \
                 `MeterProvider` whose one reader is a `ManualReader` that is never collected \
                 (every call aggregated, nothing exported). *tracing*: an OpenTelemetry layer \
                 (`tracing-opentelemetry`, `INFO`) on an SDK `TracerProvider` with no span \
                 processor and no exporter (every call a sampled, recorded span; its \
                 `traceparent` sent to the plugin). Cells are medians of the runs; a ratio is \
                 the median of run-by-run ratios to the `off` run beside it (smallest–largest). \
                 The issue's budget: within {:.0} %.",
                TELEMETRY_REPEATS,
                report.rounds,
                report.unary_calls,
                report.rate_calls,
                TELEMETRY_BUDGET * 100.0
            );
        }
        Err(why) => {
            let _ = writeln!(md, "**Not measured in this run: {why}.**");
        }
    }
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "| metric | off | metrics on | metrics ÷ off | within 3 % | tracing on | tracing ÷ off | within 3 % |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---|---:|---:|---|");
    let off = TelemetryMode::Off.id();
    for (id, label, unit, lower) in TELEMETRY_ROWS {
        let mut row = format!("| {label} | {} |", cell(results, off, id, unit));
        for mode in [TelemetryMode::Metrics, TelemetryMode::Tracing] {
            let (ratio, ok) = ratio_cells(results.paired_ratios(mode.id(), off, id), lower);
            let _ = write!(
                row,
                " {} | {ratio} | {ok} |",
                cell(results, mode.id(), id, unit)
            );
        }
        let _ = writeln!(md, "{row}");
    }
    let _ = writeln!(md);
    md
}

/// The section's part of `bench-results.json`.
#[must_use]
pub fn json(results: &Results, report: &TelemetryReport) -> Json {
    let off = TelemetryMode::Off.id();
    let rows: Vec<Json> = TELEMETRY_ROWS
        .iter()
        .map(|&(id, label, unit, lower)| {
            let mut modes = serde_json::Map::new();
            for mode in TelemetryMode::ALL {
                let summary = match results.summary(mode.id(), id) {
                    Some(Summary::Median(m)) => json!(m),
                    _ => Json::Null,
                };
                let paired = results.paired_ratios(mode.id(), off, id);
                modes.insert(
                    mode.id().to_owned(),
                    json!({
                        "median": summary,
                        "ratio_to_off": paired.map(|p| json!({ "median": p.median, "min": p.min, "max": p.max, "pairs": p.pairs })),
                        "within_budget": paired.map(|p| within_budget(p.median, lower)),
                    }),
                );
            }
            json!({ "id": id, "label": label, "unit": unit, "modes": modes })
        })
        .collect();
    json!({
        "placement": match &report.placement {
            Ok((host, plugin)) => json!({ "host_cpu": host, "plugin_cpu": plugin }),
            Err(why) => json!({ "unavailable": why }),
        },
        "budget": TELEMETRY_BUDGET,
        "repeats_per_round": TELEMETRY_REPEATS,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::Value;

    #[test]
    fn each_mode_is_judged_on_its_run_by_run_ratios_to_off_in_the_direction_of_its_metric() {
        let mut results = Results::default();
        for (off, metrics, tracing) in [(50.0, 51.0, 60.0), (60.0, 61.2, 66.0)] {
            results.record("telemetry-off", "unary_p50", Value::Number(off));
            results.record("telemetry-metrics", "unary_p50", Value::Number(metrics));
            results.record("telemetry-tracing", "unary_p50", Value::Number(tracing));
        }
        for (off, metrics, tracing) in [
            (100_000.0, 98_000.0, 80_000.0),
            (90_000.0, 88_200.0, 72_000.0),
        ] {
            results.record("telemetry-off", "rate_c64", Value::Number(off));
            results.record("telemetry-metrics", "rate_c64", Value::Number(metrics));
            results.record("telemetry-tracing", "rate_c64", Value::Number(tracing));
        }
        let report = TelemetryReport {
            placement: Ok((0, 1)),
            rounds: 1,
            unary_calls: 5000,
            rate_calls: 30_000,
        };
        let md = markdown(&results, &report);
        assert!(
            md.contains("| unary 64 B round trip, sequential, p50 | 55.0 µs | 56.1 µs | 1.02× (1.02–1.02×, 2 pairs) | yes | 63.0 µs | 1.15× (1.10–1.20×, 2 pairs) | **no** |"),
            "{md}"
        );
        assert!(md.contains("| 0.98× (0.98–0.98×, 2 pairs) | yes |"), "{md}");
        assert!(
            md.contains("| 0.80× (0.80–0.80×, 2 pairs) | **no** |"),
            "{md}"
        );
        let json = json(&results, &report);
        assert_eq!(
            json["rows"][2]["modes"]["telemetry-metrics"]["within_budget"],
            true
        );
        assert_eq!(
            json["rows"][0]["modes"]["telemetry-tracing"]["within_budget"],
            false
        );
    }
}
