//! What a finished run tells a person: the summary `tether run` (and the agent demo) print, and
//! plain progress lines for a terminal-less stderr.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::latencies::Latencies;
use super::observer::Observer;
use super::workflow::Step;

/// How many steps get a progress line each before [`StepLines`] reports only every tenth of
/// the run.
pub const ALL_LINES_UP_TO: u64 = 20;

/// A run's summary, one fact a line:
///
/// ```text
/// workflow: release-note (examples/agent/workflow.toml)
/// catalog: examples/agent/catalog (from $TETHER_CATALOG)
/// steps run: 10 (10 steps x 1 runs)
/// plugins: 6 started of 7 in catalog (checksum, hash, json-transform, notifier, template, word-count)
/// callbacks: 1 progress reports, 1 log lines, 1 artifact fetches (325 bytes), 0 refused
/// output: {"channel":"releases"}
/// total time: 52.60 ms
/// per step: p50 1.20 ms, p99 9.80 ms
/// throughput: 190 steps/s
/// ```
#[derive(Debug)]
pub struct RunReport<'a> {
    /// The workflow's name.
    pub workflow: &'a str,
    /// Where the workflow came from.
    pub file: &'a str,
    /// Where the catalog came from.
    pub catalog: &'a str,
    /// Steps in one run of the workflow.
    pub steps: usize,
    /// How many times the workflow ran.
    pub runs: u32,
    /// The plugins that were started, by name.
    pub started: &'a [&'a str],
    /// Plugins in the catalog.
    pub in_catalog: usize,
    /// The callbacks' counts ([`CallbackCounts::summary`](super::CallbackCounts::summary)).
    pub callbacks: &'a str,
    /// The last step's outputs.
    pub output: &'a str,
    /// The whole run's duration.
    pub elapsed: Duration,
    /// Every step's duration.
    pub latencies: &'a Latencies,
}

impl fmt::Display for RunReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.latencies;
        writeln!(f, "workflow: {} ({})", self.workflow, self.file)?;
        writeln!(f, "catalog: {}", self.catalog)?;
        writeln!(
            f,
            "steps run: {} ({} steps x {} runs)",
            l.len(),
            self.steps,
            self.runs
        )?;
        writeln!(
            f,
            "plugins: {} started of {} in catalog ({})",
            self.started.len(),
            self.in_catalog,
            self.started.join(", ")
        )?;
        writeln!(f, "callbacks: {}", self.callbacks)?;
        writeln!(f, "output: {}", self.output)?;
        writeln!(f, "total time: {}", human(self.elapsed))?;
        writeln!(
            f,
            "per step: p50 {}, p99 {}",
            human(l.quantile(0.50)),
            human(l.quantile(0.99))
        )?;
        write!(
            f,
            "throughput: {:.0} steps/s",
            l.len() as f64 / self.elapsed.as_secs_f64()
        )
    }
}

/// `d` in µs, ms or s, whichever reads best.
#[must_use]
pub fn human(d: Duration) -> String {
    let micros = d.as_secs_f64() * 1e6;
    if micros < 1000.0 {
        format!("{micros:.0} µs")
    } else if micros < 1e6 {
        format!("{:.2} ms", micros / 1e3)
    } else {
        format!("{:.2} s", micros / 1e6)
    }
}

/// Progress as plain stderr lines, `[N/TOTAL] STEP (PLUGIN): MESSAGE`: one for each of the
/// first [`ALL_LINES_UP_TO`] steps, then one every tenth of the run (one line per step would
/// drown a long run).
#[derive(Debug)]
pub struct StepLines {
    total: u64,
    done: AtomicU64,
}

impl StepLines {
    /// Lines for a run of `total` steps.
    #[must_use]
    pub fn new(total: u64) -> Self {
        Self {
            total,
            done: AtomicU64::new(0),
        }
    }
}

impl Observer for StepLines {
    fn step_done(&self, step: &Step, message: &str) {
        let n = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let total = self.total;
        if n <= ALL_LINES_UP_TO || n == total || n.is_multiple_of((total / 10).max(1)) {
            let message = tether_proto::text::escape(message);
            eprintln!("[{n}/{total}] {} ({}): {message}", step.name, step.plugin);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_the_unit_that_fits() {
        assert_eq!(human(Duration::from_micros(250)), "250 µs");
        assert_eq!(human(Duration::from_micros(52_600)), "52.60 ms");
        assert_eq!(human(Duration::from_millis(1_500)), "1.50 s");
    }

    #[test]
    fn the_report_names_the_started_plugins_and_counts_the_steps() {
        let mut latencies = Latencies::default();
        for ms in [1, 2, 3] {
            latencies.push(Duration::from_millis(ms));
        }
        let report = RunReport {
            workflow: "w",
            file: "w.toml",
            catalog: "cat",
            steps: 3,
            runs: 1,
            started: &["a", "b"],
            in_catalog: 4,
            callbacks: "0 progress reports",
            output: "{}",
            elapsed: Duration::from_millis(6),
            latencies: &latencies,
        }
        .to_string();
        assert!(
            report.contains("steps run: 3 (3 steps x 1 runs)"),
            "{report}"
        );
        assert!(
            report.contains("plugins: 2 started of 4 in catalog (a, b)"),
            "{report}"
        );
        assert!(report.ends_with("throughput: 500 steps/s"), "{report}");
    }
}
