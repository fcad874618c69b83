//! The runners' rows: tether's KV plugin under the gVisor runner against the process runner
//! (launch → first call, unary), and the seeds' comparison — N workflow steps as one gVisor
//! container per step (the Argo/Tekton model: `kv-step`, a one-shot program doing the step's
//! work, in a sandbox prepared like a plugin's and deleted after) against the same N steps
//! through one long-lived plugin, under the process runner and under gVisor. Every number is
//! measured end to end by `kv-bench measure` (`launch`, `unary`, `workflow`) in the same
//! rounds as the other measurements; nothing is derived.
//!
//! The gVisor runner needs `runsc` and root. Without them the rows say why
//! ([`gvisor_unavailable`]) and the rest of the run goes on, unless
//! `TETHER_REQUIRE_PEERS=1`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::measurement::Value;
use crate::line::{Line, LineError};
use crate::stats::percentile;

/// The variable that makes a missing peer (here: `runsc`) fail the run instead of being
/// reported.
pub const REQUIRE_PEERS_ENV: &str = "TETHER_REQUIRE_PEERS";

/// Where a plugin runs in these rows; each is a system id of the results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerKind {
    /// The process runner (tether's default: a confined child process).
    Process,
    /// The gVisor runner (`runsc run` of a per-launch bundle).
    Gvisor,
}

impl RunnerKind {
    /// The system id of its values: `runner-process`, `runner-gvisor`.
    #[must_use]
    pub fn id(self) -> &'static str {
        match self {
            Self::Process => PROCESS_RUNNER,
            Self::Gvisor => GVISOR_RUNNER,
        }
    }

    fn host_args(self) -> &'static [&'static str] {
        match self {
            Self::Process => &[],
            Self::Gvisor => &["--gvisor"],
        }
    }
}

/// System id of the process runner's values.
pub const PROCESS_RUNNER: &str = "runner-process";
/// System id of the gVisor runner's values.
pub const GVISOR_RUNNER: &str = "runner-gvisor";
/// System id of the one-container-per-step values.
pub const CONTAINERS: &str = "containers-gvisor";

/// How a workflow's steps run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepModel {
    /// One gVisor sandbox per step running `kv-step`.
    Containers,
    /// One long-lived plugin under this runner, one `Put` per step.
    Plugin(RunnerKind),
}

impl StepModel {
    /// The system id of its values.
    #[must_use]
    pub fn id(self) -> &'static str {
        match self {
            Self::Containers => CONTAINERS,
            Self::Plugin(runner) => runner.id(),
        }
    }
}

/// Which of the two workflow sizes ([`RunnerCounts::steps`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkflowSize {
    /// The smaller N.
    Few,
    /// The larger N.
    Many,
}

impl WorkflowSize {
    /// Both, in report order.
    pub const ALL: [Self; 2] = [Self::Few, Self::Many];

    /// The metric id of a workflow's total time.
    #[must_use]
    pub fn id(self) -> &'static str {
        match self {
            Self::Few => "workflow_few",
            Self::Many => "workflow_many",
        }
    }

    /// Its number of steps.
    #[must_use]
    pub fn steps(self, counts: &RunnerCounts) -> u64 {
        match self {
            Self::Few => counts.steps[0],
            Self::Many => counts.steps[1],
        }
    }
}

/// One program run of the runners' rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerMeasurement {
    /// Spawn → first `Put` done, repeatedly.
    Launch(RunnerKind),
    /// Sequential 64-byte `Get`s.
    Unary(RunnerKind),
    /// One workflow of N steps, end to end.
    Workflow(WorkflowSize, StepModel),
}

/// How many launches, calls and steps the runners' rows take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunnerCounts {
    /// Launches per round.
    pub launches: u64,
    /// Timed sequential calls per round.
    pub unary_calls: u64,
    /// Untimed calls first.
    pub warmup: u64,
    /// The two workflow sizes (N steps).
    pub steps: [u64; 2],
}

impl RunnerCounts {
    /// The full benchmark.
    pub const FULL: Self = Self {
        launches: 20,
        unary_calls: 2_000,
        warmup: 100,
        steps: [20, 100],
    };

    /// A smoke run (`--quick`).
    pub const QUICK: Self = Self {
        launches: 2,
        unary_calls: 50,
        warmup: 5,
        steps: [2, 5],
    };
}

/// The programs the rows run (release builds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerPrograms {
    /// `kv-bench`.
    pub host: PathBuf,
    /// `kv-plugin`.
    pub plugin: PathBuf,
    /// `kv-step`, the one-shot step.
    pub step: PathBuf,
}

/// Why the gVisor rows cannot run here (no `runsc` in `PATH`, not root), or `None`.
#[must_use]
pub fn gvisor_unavailable() -> Option<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if !std::env::split_paths(&path).any(|dir| dir.join("runsc").is_file()) {
        return Some("runsc is not installed (Debian/Ubuntu: `apt-get install runsc`)".to_owned());
    }
    if effective_uid() != Some(0) {
        return Some("the gVisor runner runs as root here; run bench/run.sh as root".to_owned());
    }
    None
}

/// This process's effective user id (`/proc/self/status`).
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let ids = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    ids.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `TETHER_REQUIRE_PEERS=1`.
#[must_use]
pub fn peers_required() -> bool {
    std::env::var(REQUIRE_PEERS_ENV).is_ok_and(|v| v == "1")
}

impl RunnerMeasurement {
    /// Every runner measurement, in the order a round runs them (process and gVisor
    /// alternating).
    #[must_use]
    pub fn all() -> Vec<Self> {
        use RunnerKind::{Gvisor, Process};
        let mut all = vec![
            Self::Launch(Process),
            Self::Launch(Gvisor),
            Self::Unary(Process),
            Self::Unary(Gvisor),
        ];
        for size in WorkflowSize::ALL {
            all.extend([
                Self::Workflow(size, StepModel::Containers),
                Self::Workflow(size, StepModel::Plugin(Process)),
                Self::Workflow(size, StepModel::Plugin(Gvisor)),
            ]);
        }
        all
    }

    /// The system id its values are recorded under.
    #[must_use]
    pub fn system(&self) -> &'static str {
        match self {
            Self::Launch(runner) | Self::Unary(runner) => runner.id(),
            Self::Workflow(_, model) => model.id(),
        }
    }

    /// A short name for progress messages.
    #[must_use]
    pub fn name(&self, counts: &RunnerCounts) -> String {
        match self {
            Self::Launch(_) => "launch".into(),
            Self::Unary(_) => "unary".into(),
            Self::Workflow(size, _) => format!("workflow N={}", size.steps(counts)),
        }
    }

    /// The `kv-bench` command, run in `work_dir` (a workflow's state directory).
    #[must_use]
    pub fn command(
        &self,
        programs: &RunnerPrograms,
        counts: &RunnerCounts,
        work_dir: &Path,
    ) -> Command {
        let mut cmd = Command::new(&programs.host);
        match *self {
            Self::Launch(runner) => {
                cmd.args(runner.host_args()).args([
                    "measure",
                    "launch",
                    "--count",
                    &counts.launches.to_string(),
                ]);
            }
            Self::Unary(runner) => {
                cmd.args(runner.host_args()).args([
                    "measure",
                    "unary",
                    "--calls",
                    &counts.unary_calls.to_string(),
                    "--warmup",
                    &counts.warmup.to_string(),
                ]);
            }
            Self::Workflow(size, model) => {
                let steps = size.steps(counts).to_string();
                match model {
                    StepModel::Containers => {
                        cmd.args(["measure", "workflow", "--steps", &steps])
                            .args(["--model", "containers", "--step"])
                            .arg(&programs.step);
                    }
                    StepModel::Plugin(runner) => {
                        cmd.args(runner.host_args())
                            .args(["measure", "workflow", "--steps", &steps])
                            .args(["--model", "plugin"]);
                    }
                }
            }
        }
        cmd.env("KV_PLUGIN", &programs.plugin)
            .current_dir(work_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// The metric values of one run's output line.
    ///
    /// # Errors
    /// A [`LineError`] for a missing key or no samples.
    pub fn evaluate(&self, line: &Line) -> Result<Vec<(&'static str, Value)>, LineError> {
        let samples: Vec<f64> = line
            .numbers("samples_ns")?
            .into_iter()
            .map(|n| n as f64)
            .collect();
        let pct = |p: f64, scale: f64| {
            percentile(&samples, p)
                .map(|v| Value::Number(v / scale))
                .ok_or_else(|| LineError::NotANumber {
                    key: "samples_ns".into(),
                    value: String::new(),
                })
        };
        Ok(match self {
            Self::Launch(_) => vec![
                ("launch_p50", pct(0.5, 1e6)?),
                ("launch_p99", pct(0.99, 1e6)?),
            ],
            Self::Unary(_) => vec![
                ("unary_p50", pct(0.5, 1e3)?),
                ("unary_p99", pct(0.99, 1e3)?),
            ],
            Self::Workflow(size, _) => vec![(size.id(), pct(0.5, 1e6)?)],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn programs() -> RunnerPrograms {
        RunnerPrograms {
            host: "/b/kv-bench".into(),
            plugin: "/b/kv-plugin".into(),
            step: "/b/kv-step".into(),
        }
    }

    fn args(cmd: &Command) -> Vec<String> {
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_gvisor_rows_run_kv_bench_with_gvisor_and_the_process_rows_without() {
        let counts = RunnerCounts::QUICK;
        let dir = Path::new("/tmp");
        let gvisor =
            RunnerMeasurement::Launch(RunnerKind::Gvisor).command(&programs(), &counts, dir);
        assert_eq!(
            args(&gvisor),
            ["--gvisor", "measure", "launch", "--count", "2"]
        );
        let process =
            RunnerMeasurement::Unary(RunnerKind::Process).command(&programs(), &counts, dir);
        assert_eq!(
            args(&process),
            ["measure", "unary", "--calls", "50", "--warmup", "5"]
        );
        let envs: Vec<_> = process.get_envs().collect();
        assert_eq!(
            envs,
            [(
                std::ffi::OsStr::new("KV_PLUGIN"),
                Some(std::ffi::OsStr::new("/b/kv-plugin"))
            )]
        );
    }

    #[test]
    fn containers_run_the_one_shot_step_and_plugins_the_long_lived_model() {
        let counts = RunnerCounts::FULL;
        let dir = Path::new("/tmp");
        let containers = RunnerMeasurement::Workflow(WorkflowSize::Many, StepModel::Containers)
            .command(&programs(), &counts, dir);
        assert_eq!(
            args(&containers),
            [
                "measure",
                "workflow",
                "--steps",
                "100",
                "--model",
                "containers",
                "--step",
                "/b/kv-step"
            ]
        );
        let plugin =
            RunnerMeasurement::Workflow(WorkflowSize::Few, StepModel::Plugin(RunnerKind::Gvisor))
                .command(&programs(), &counts, dir);
        assert_eq!(
            args(&plugin),
            [
                "--gvisor", "measure", "workflow", "--steps", "20", "--model", "plugin"
            ]
        );
    }

    #[test]
    fn every_measurement_is_recorded_under_its_own_system_and_metric() {
        let line = Line::parse("steps=20 samples_ns=2000000,4000000,3000000\n").unwrap();
        let m = RunnerMeasurement::Workflow(WorkflowSize::Few, StepModel::Containers);
        assert_eq!(m.system(), CONTAINERS);
        assert_eq!(
            m.evaluate(&line).unwrap(),
            [("workflow_few", Value::Number(3.0))]
        );
        let launch = RunnerMeasurement::Launch(RunnerKind::Gvisor);
        assert_eq!(launch.system(), GVISOR_RUNNER);
        let values = launch.evaluate(&line).unwrap();
        assert_eq!(values[0], ("launch_p50", Value::Number(3.0)));
        assert_eq!(RunnerMeasurement::all().len(), 10);
        assert!(
            RunnerMeasurement::Unary(RunnerKind::Process)
                .evaluate(&Line::parse("samples_ns=\n").unwrap())
                .is_err()
        );
    }
}
