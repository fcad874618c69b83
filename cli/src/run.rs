//! `tether run`: the agent. Runs a workflow's steps through the catalog's plugins with
//! [`tether_agent::host::run`], starting a plugin only when a step first needs it, shows
//! progress, and prints a summary. On `SIGHUP` it reloads the catalog and upgrades the plugins
//! that changed ([`crate::reload`]).

use std::io::IsTerminal as _;
use std::sync::Arc;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use tether_agent::host::{
    self, ArtifactPolicy, CallbackCounts, Observer, ProgressEvent, RunReport, Step, StepLines,
    Workflow,
};
use tether_broker::Supervisor;

use crate::args::RunArgs;
use crate::error::CliError;
use crate::installation::Installation;
use crate::output::outln;
use crate::reload::Reloads;

/// Runs the workflow `--repeat` times and prints the summary.
pub(crate) async fn run(args: RunArgs) -> Result<(), CliError> {
    let install = Installation::load(&args.catalog)?;
    for bad in install.bad_manifests() {
        tracing::warn!("skipping a bad manifest: {bad}");
    }
    let file = args
        .workflow
        .clone()
        .unwrap_or_else(|| install.beside("workflow.toml"));
    // A plugin whose manifest is broken is named by the workflow all the same: its step then
    // fails with the manifest's problems, not as an unknown plugin.
    let mut known = install.names();
    known.extend(install.broken_names());
    let workflow = Workflow::load(&file, &known).map_err(CliError::Workflow)?;
    // A step whose manifest is broken or whose program is nowhere fails now, before any
    // plugin starts.
    for step in &workflow.steps {
        install.manifest(&step.plugin)?;
        install.check_binary(&step.plugin)?;
    }

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
    let catalog = install.describe();
    let in_catalog = install.catalog.len();
    let names = install.names();
    let artifacts = args
        .artifacts
        .clone()
        .unwrap_or_else(|| install.beside("artifacts"));
    let policy = Arc::new(ArtifactPolicy::new(artifacts, &workflow));
    let counts = Arc::new(CallbackCounts::default());
    let total_steps = workflow.steps.len() as u64 * u64::from(args.repeat);
    let progress = Arc::new(Progress::new(total_steps));
    let metrics = crate::metrics::start(&args).await?;
    let mut builder = Supervisor::builder(install.catalog, state_dir)
        .grants(install.grants)
        .config_source(install.config);
    if let Some(metrics) = &metrics {
        builder = builder.meter(&metrics.meter());
    }
    #[cfg(feature = "kubernetes")]
    let builder = args.pods.apply(builder, install.secrets)?;
    #[cfg(not(feature = "kubernetes"))]
    let builder = builder.secrets(install.secrets);
    let broker = host::serve_host(
        builder,
        policy,
        Arc::clone(&counts),
        Arc::clone(&progress) as Arc<dyn Observer>,
    )
    .build();
    let reloads = Reloads::on_sighup(broker.clone(), args.catalog.clone());

    let started = Instant::now();
    let result = host::run(&broker, &workflow, args.repeat, progress.as_ref()).await;
    let elapsed = started.elapsed();
    reloads.stop().await;
    progress.finish();
    let started_plugins: Vec<&str> = names
        .iter()
        .filter(|n| broker.starts(n) > 0)
        .map(String::as_str)
        .collect();
    broker.shutdown().await;
    // The summary first, then the metrics' last scrape and export (on failure too).
    let printed = (|| {
        let outcome = result.map_err(CliError::Run)?;
        let report = RunReport {
            workflow: &workflow.name,
            file: &file.display().to_string(),
            catalog: &catalog,
            steps: workflow.steps.len(),
            runs: args.repeat,
            started: &started_plugins,
            in_catalog,
            callbacks: &counts.summary(),
            output: &outcome.output,
            elapsed,
            latencies: &outcome.latencies,
        };
        outln!("{report}")?;
        Ok(())
    })();
    if let Some(metrics) = metrics {
        metrics.finish().await;
    }
    printed
}

/// A progress bar on a terminal, plain lines (first run only) otherwise.
enum Progress {
    Bar(ProgressBar),
    Lines(StepLines),
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
            Self::Lines(StepLines::new(total))
        }
    }

    fn finish(&self) {
        if let Self::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

impl Observer for Progress {
    fn step_done(&self, step: &Step, message: &str) {
        match self {
            Self::Bar(bar) => {
                bar.set_message(format!("{} ({})", step.name, step.plugin));
                bar.inc(1);
            }
            Self::Lines(lines) => lines.step_done(step, message),
        }
    }

    /// The progress bar's message shows the report; plain lines do not.
    fn progress(&self, event: &ProgressEvent<'_>) {
        if let Self::Bar(bar) = self {
            bar.set_message(event.to_string());
        }
    }
}
