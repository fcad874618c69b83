//! The runners' section of the generated report and its part of `bench-results.json`: the
//! gVisor runner against the process runner, and N workflow steps as one container per step
//! against one long-lived plugin, with their ratios (all from the same run).

use std::fmt::Write as _;

use serde_json::{Value as Json, json};

use super::format::{format_ratio, with_unit};
use super::results::{Results, Summary};
use super::splice::END_MARKER;
use crate::suite::{
    CONTAINERS, GVISOR_RUNNER, PROCESS_RUNNER, RunnerCounts, RunnerKind, StepModel, WorkflowSize,
};

/// What the runners' section is made from besides the results.
#[derive(Debug, Clone)]
pub struct RunnerReport {
    /// The counts used.
    pub counts: RunnerCounts,
    /// Why the rows were not measured, if they were not.
    pub unavailable: Option<String>,
}

/// The rows comparing the two runners: (metric id, label, unit).
const RUNNER_ROWS: &[(&str, &str, &str)] = &[
    (
        "launch_p50",
        "launch → first call done (AutoMTLS), p50",
        "ms",
    ),
    (
        "launch_p99",
        "launch → first call done (AutoMTLS), p99",
        "ms",
    ),
    ("unary_p50", "unary 64 B round trip, sequential, p50", "µs"),
    ("unary_p99", "unary 64 B round trip, sequential, p99", "µs"),
];

fn cell(results: &Results, system: &str, metric: &str, unit: &str) -> String {
    match results.summary(system, metric) {
        Some(Summary::Median(v)) => with_unit(v, unit),
        Some(Summary::Failed(code)) => format!("fails ({code})"),
        None => "—".into(),
    }
}

fn ratio(results: &Results, system: &str, other: &str, metric: &str) -> String {
    results
        .ratio(system, other, metric)
        .map_or_else(|| "—".into(), |r| format!("{}×", format_ratio(r)))
}

/// A workflow's total and its time per step.
fn workflow_cell(results: &Results, system: &str, size: WorkflowSize, steps: u64) -> String {
    match results.summary(system, size.id()) {
        Some(Summary::Median(total)) => format!(
            "{} ({} per step)",
            with_unit(total, "ms"),
            with_unit(total / steps as f64, "ms")
        ),
        Some(Summary::Failed(code)) => format!("fails ({code})"),
        None => "—".into(),
    }
}

/// The section, Markdown.
#[must_use]
pub fn markdown(results: &Results, report: &RunnerReport) -> String {
    let mut md = String::new();
    let c = &report.counts;
    // A blank line first: the section follows the goals table.
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "### Runners: gVisor vs process, and one container per step"
    );
    let _ = writeln!(md);
    if let Some(why) = &report.unavailable {
        let _ = writeln!(md, "**Not measured in this run: {why}.**");
        let _ = writeln!(md);
    }
    let _ = writeln!(
        md,
        "tether's `kv-bench` and `kv-plugin` in the same rounds as the table above, process \
         runner and gVisor runner (`runsc --network=none --host-uds=all`, cgroups left alone) \
         back to back: {} launches and {} sequential calls ({} warm-up calls first) per round \
         and runner.",
        c.launches, c.unary_calls, c.warmup
    );
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "| metric | process runner | gVisor runner | gVisor ÷ process |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|");
    for (id, label, unit) in RUNNER_ROWS {
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {} |",
            cell(results, PROCESS_RUNNER, id, unit),
            cell(results, GVISOR_RUNNER, id, unit),
            ratio(results, GVISOR_RUNNER, PROCESS_RUNNER, id)
        );
    }
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "The seeds' comparison, end to end: one workflow of N steps, each writing a 64-byte \
         value to its own file in the state directory. *One container per step* runs the \
         one-shot `kv-step KEY VALUE` under gVisor N times, each in a sandbox prepared by the \
         same code as a plugin's (`PluginClientBuilder::run_to_exit`: private directory, \
         bundle from the ELF closure, `runsc run`, container and bundle deleted after) — the \
         Argo/Tekton model. *Long-lived plugin* is launch + N `Put`s + shutdown of one \
         `kv-plugin`. One workflow per round and model; each cell is the median round."
    );
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "| N steps | one container per step (gVisor) | long-lived plugin, process runner | long-lived plugin, gVisor | containers ÷ plugin (process) | containers ÷ plugin (gVisor) |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---:|");
    let process = StepModel::Plugin(RunnerKind::Process).id();
    let gvisor = StepModel::Plugin(RunnerKind::Gvisor).id();
    for size in WorkflowSize::ALL {
        let steps = size.steps(c);
        let _ = writeln!(
            md,
            "| {steps} | {} | {} | {} | {} | {} |",
            workflow_cell(results, CONTAINERS, size, steps),
            workflow_cell(results, process, size, steps),
            workflow_cell(results, gvisor, size, steps),
            ratio(results, CONTAINERS, process, size.id()),
            ratio(results, CONTAINERS, gvisor, size.id())
        );
    }
    let _ = writeln!(md);
    md
}

/// `generated` (the report's section, markers included) with the runners' section before its
/// end marker.
#[must_use]
pub fn insert(generated: &str, section: &str) -> String {
    match generated.rfind(END_MARKER) {
        Some(at) => format!("{}{section}{}", &generated[..at], &generated[at..]),
        None => format!("{generated}{section}"),
    }
}

/// The section's part of `bench-results.json`.
#[must_use]
pub fn json(results: &Results, report: &RunnerReport) -> Json {
    let summary = |system: &str, metric: &str| match results.summary(system, metric) {
        Some(Summary::Median(m)) => json!({ "median": m }),
        Some(Summary::Failed(code)) => json!({ "failed": code }),
        None => Json::Null,
    };
    let runners: Vec<Json> = RUNNER_ROWS
        .iter()
        .map(|(id, label, unit)| {
            json!({
                "id": id, "label": label, "unit": unit,
                "process": summary(PROCESS_RUNNER, id),
                "gvisor": summary(GVISOR_RUNNER, id),
                "ratio_gvisor_to_process": results.ratio(GVISOR_RUNNER, PROCESS_RUNNER, id),
            })
        })
        .collect();
    let process = StepModel::Plugin(RunnerKind::Process).id();
    let gvisor = StepModel::Plugin(RunnerKind::Gvisor).id();
    let workflows: Vec<Json> = WorkflowSize::ALL
        .iter()
        .map(|size| {
            let id = size.id();
            json!({
                "steps": size.steps(&report.counts), "unit": "ms",
                "containers_gvisor": summary(CONTAINERS, id),
                "plugin_process": summary(process, id),
                "plugin_gvisor": summary(gvisor, id),
                "ratio_containers_to_plugin_process": results.ratio(CONTAINERS, process, id),
                "ratio_containers_to_plugin_gvisor": results.ratio(CONTAINERS, gvisor, id),
            })
        })
        .collect();
    let c = &report.counts;
    json!({
        "unavailable": report.unavailable,
        "counts": { "launches": c.launches, "unary_calls": c.unary_calls, "warmup": c.warmup, "steps": c.steps },
        "runners": runners,
        "workflows": workflows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::Value;

    #[test]
    fn the_section_shows_both_runners_their_ratio_and_the_workflow_ratios() {
        let mut results = Results::default();
        results.record(PROCESS_RUNNER, "launch_p50", Value::Number(5.0));
        results.record(GVISOR_RUNNER, "launch_p50", Value::Number(100.0));
        results.record(CONTAINERS, "workflow_few", Value::Number(3000.0));
        results.record(PROCESS_RUNNER, "workflow_few", Value::Number(30.0));
        results.record(GVISOR_RUNNER, "workflow_few", Value::Number(150.0));
        let report = RunnerReport {
            counts: RunnerCounts::FULL,
            unavailable: None,
        };
        let md = markdown(&results, &report);
        assert!(md.contains("| 5.00 ms | 100 ms | 20× |"), "{md}");
        assert!(
            md.contains("| 20 | 3,000 ms (150 ms per step) | 30.0 ms (1.50 ms per step) | 150 ms (7.50 ms per step) | 100× | 20× |"),
            "{md}"
        );
        let json = json(&results, &report);
        assert_eq!(
            json["workflows"][0]["ratio_containers_to_plugin_gvisor"],
            20.0
        );
    }

    #[test]
    fn rows_that_could_not_run_say_why_and_the_section_goes_before_the_end_marker() {
        let report = RunnerReport {
            counts: RunnerCounts::QUICK,
            unavailable: Some("runsc is not installed".into()),
        };
        let md = markdown(&Results::default(), &report);
        assert!(
            md.contains("Not measured in this run: runsc is not installed."),
            "{md}"
        );
        let generated = format!("begin\n{END_MARKER}\n");
        let joined = insert(&generated, "SECTION\n");
        assert_eq!(joined, format!("begin\nSECTION\n{END_MARKER}\n"));
    }
}
