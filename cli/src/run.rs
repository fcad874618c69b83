//! `tether run`: the agent. Runs a workflow's steps through the catalog's plugins, starting a
//! plugin only when a step first needs it, and prints a summary.

use std::io::IsTerminal as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tether_broker::Broker;
use tether_examples::agent::v1::executor_client::ExecutorClient;
use tether_examples::agent::v1::{ExecuteRequest, Phase};

use crate::agent_host::{AgentHost, ArtifactPolicy, CallbackCounts};
use crate::args::RunArgs;
use crate::error::CliError;
use crate::installation::{Installation, demo_dir};
use crate::stats::Latencies;
use crate::workflow::Workflow;

/// Runs the workflow `--repeat` times and prints the summary.
pub(crate) async fn run(args: RunArgs) -> Result<(), CliError> {
    let install = Installation::load(&args.catalog)?;
    for bad in &install.bad_manifests {
        tracing::warn!("skipping a bad manifest: {bad}");
    }
    let file = args
        .workflow
        .clone()
        .unwrap_or_else(|| demo_dir().join("workflow.toml"));
    let workflow = Workflow::load(&file, &install.names()).map_err(CliError::Workflow)?;

    let temp_state;
    let state_dir = match &args.state_dir {
        Some(dir) => dir.clone(),
        None => {
            temp_state = tempfile::Builder::new()
                .prefix("tether-run-")
                .tempdir()
                .map_err(CliError::StateDir)?;
            temp_state.path().to_owned()
        }
    };
    let in_catalog = install.catalog.len();
    let names = install.names();
    let artifacts = args.artifacts.clone().unwrap_or_else(|| {
        install
            .dir
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .join("artifacts")
    });
    let policy = Arc::new(ArtifactPolicy::new(artifacts, &workflow));
    let counts = Arc::new(CallbackCounts::default());
    let total_steps = workflow.steps.len() as u64 * u64::from(args.repeat);
    let progress = Progress::new(total_steps);
    let bar = progress.bar();
    let host_counts = Arc::clone(&counts);
    let broker = Broker::builder(install.catalog, state_dir)
        .grants(install.grants)
        .secrets(install.secrets)
        .config_source(install.config)
        // Every plugin gets its own `tether.agent.v1.Host`, which knows whose calls it serves.
        .customize(move |builder| {
            let host = AgentHost::new(
                builder.plugin_name(),
                Arc::clone(&policy),
                Arc::clone(&host_counts),
                bar.clone(),
            );
            builder.host_service(host)
        })
        .build();

    let started = Instant::now();
    let result = run_steps(&broker, &workflow, args.repeat, &progress).await;
    let elapsed = started.elapsed();
    progress.finish();
    let started_plugins: Vec<&str> = names
        .iter()
        .filter(|n| broker.starts(n) > 0)
        .map(String::as_str)
        .collect();
    broker.shutdown().await;
    let (latencies, output) = result?;

    println!("workflow: {} ({})", workflow.name, file.display());
    println!(
        "steps run: {} ({} steps x {} runs)",
        latencies.len(),
        workflow.steps.len(),
        args.repeat
    );
    println!(
        "plugins: {} started of {} in catalog ({})",
        started_plugins.len(),
        in_catalog,
        started_plugins.join(", ")
    );
    println!("callbacks: {}", counts.summary());
    println!("output: {output}");
    println!("total time: {}", format_duration(elapsed));
    println!(
        "per step: p50 {}, p99 {}",
        format_duration(latencies.quantile(0.50)),
        format_duration(latencies.quantile(0.99))
    );
    println!(
        "throughput: {:.0} steps/s",
        latencies.len() as f64 / elapsed.as_secs_f64()
    );
    Ok(())
}

/// Runs every step `repeat` times; each step's input is the previous step's outputs. Returns
/// the latencies and the last step's outputs.
async fn run_steps(
    broker: &Broker,
    workflow: &Workflow,
    repeat: u32,
    progress: &Progress,
) -> Result<(Latencies, String), CliError> {
    let mut latencies = Latencies::default();
    let mut input = String::new();
    for _ in 0..repeat {
        input = "{}".to_owned();
        for step in &workflow.steps {
            let began = Instant::now();
            let lease = broker
                .acquire(&step.plugin)
                .await
                .map_err(|source| CliError::Step {
                    step: step.name.clone(),
                    source: Box::new(source),
                })?;
            let request = ExecuteRequest {
                step: step.name.clone(),
                params_json: step.params_json.clone(),
                input_json: input.clone(),
            };
            let response = lease
                .call(|channel| async move { ExecutorClient::new(channel).execute(request).await })
                .await
                .map_err(|source| CliError::Step {
                    step: step.name.clone(),
                    source: Box::new(source),
                })?;
            drop(lease);
            latencies.push(began.elapsed());
            if response.phase() != Phase::Succeeded {
                return Err(CliError::StepFailed {
                    step: step.name.clone(),
                    plugin: step.plugin.clone(),
                    message: response.message,
                });
            }
            progress.step(&step.name, &step.plugin, &response.message);
            input = response.outputs_json;
        }
    }
    Ok((latencies, input))
}

/// A progress bar on a terminal, plain lines (first run only) otherwise.
enum Progress {
    Bar(ProgressBar),
    Lines {
        total: u64,
        done: std::cell::Cell<u64>,
    },
}

impl Progress {
    fn new(total: u64) -> Self {
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(total);
            if let Ok(style) =
                ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} steps {msg}")
            {
                bar.set_style(style.progress_chars("=> "));
            }
            Self::Bar(bar)
        } else {
            Self::Lines {
                total,
                done: std::cell::Cell::new(0),
            }
        }
    }

    /// The progress bar, when there is one.
    fn bar(&self) -> Option<ProgressBar> {
        match self {
            Self::Bar(bar) => Some(bar.clone()),
            Self::Lines { .. } => None,
        }
    }

    fn step(&self, step: &str, plugin: &str, message: &str) {
        match self {
            Self::Bar(bar) => {
                bar.set_message(format!("{step} ({plugin})"));
                bar.inc(1);
            }
            Self::Lines { total, done } => {
                let n = done.get() + 1;
                done.set(n);
                // One line per step would drown a long run: lines for the first 20 steps,
                // then every 10%.
                if n <= 20 || n == *total || n % (*total / 10).max(1) == 0 {
                    eprintln!("[{n}/{total}] {step} ({plugin}): {message}");
                }
            }
        }
    }

    fn finish(&self) {
        if let Self::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

fn format_duration(d: Duration) -> String {
    let micros = d.as_secs_f64() * 1e6;
    if micros < 1000.0 {
        format!("{micros:.0} µs")
    } else if micros < 1e6 {
        format!("{:.2} ms", micros / 1e3)
    } else {
        format!("{:.2} s", micros / 1e6)
    }
}
