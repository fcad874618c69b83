//! The agent demo, one multi-call binary (the README's first command):
//!
//! - `agent-demo [--repeat N]` is the agent: it runs the demo's workflow
//!   (`examples/agent/workflow.toml`) through the demo's catalog (`examples/agent/catalog/`,
//!   with `grants.toml` and `secrets/` beside it), starting each step's plugin when a step first
//!   needs it, and prints progress lines and a summary — what `tether run` does for any catalog.
//! - `agent-demo step NAME` serves one of the demo's Rust steps: what the catalog's manifests
//!   run (`command = "bin/agent-demo"`, `args = ["step", NAME]`), each step its own confined
//!   plugin process with its own manifest, sandbox and secrets.
//!
//! One binary for both, so that one `cargo run` builds everything the demo runs.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{Parser, Subcommand};
use tether_agent::host::{
    self, ArtifactPolicy, CallbackCounts, Observer, RunReport, StepLines, Workflow,
};
use tether_broker::{Catalog, DirValueSource, Grants, Supervisor};

/// The demo's files: catalog, grants, secrets, workflow and artifacts.
const DEMO_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/agent");

/// The agent demo: a workflow of steps through plugins, each started only when first used.
#[derive(Debug, Parser)]
#[command(name = "agent-demo")]
struct Cli {
    /// Run the workflow this many times, with the plugins kept running (`--repeat 100`: 1,000
    /// steps).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve one of the demo's Rust steps as a plugin (what the catalog's manifests run).
    Step {
        /// The step plugin's name.
        name: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Step { name }) = cli.command {
        // The SDK builds its own runtime and logging.
        return tether_examples::agent::serve(&name).unwrap_or_else(|e| {
            eprintln!("agent-demo: error: {e}");
            ExitCode::from(2)
        });
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("agent-demo: error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(Path::new(DEMO_DIR), cli.repeat)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent-demo: error: {e}");
            let mut source = e.source();
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            ExitCode::FAILURE
        }
    }
}

/// Runs the workflow of the demo in `demo` `repeat` times and prints the summary.
async fn run(demo: &Path, repeat: u32) -> Result<(), Box<dyn Error>> {
    let catalog_dir = demo.join("catalog");
    let catalog = demo_catalog(&catalog_dir, std::env::current_exe()?)?;
    let names: Vec<String> = catalog.manifests().map(|m| m.name.clone()).collect();
    let file = demo.join("workflow.toml");
    let workflow = Workflow::load(&file, &names)?;
    let grants = Grants::load(&demo.join("grants.toml"))?;
    let state = tempfile::Builder::new().prefix("agent-demo-").tempdir()?;

    let policy = Arc::new(ArtifactPolicy::new(demo.join("artifacts"), &workflow));
    let counts = Arc::new(CallbackCounts::default());
    let lines = Arc::new(StepLines::new(
        workflow.steps.len() as u64 * u64::from(repeat),
    ));
    let builder = Supervisor::builder(catalog, state.path())
        .grants(grants)
        .secrets(DirValueSource::new(demo.join("secrets")));
    let supervisor = host::serve_host(
        builder,
        policy,
        Arc::clone(&counts),
        Arc::clone(&lines) as Arc<dyn Observer>,
    )
    .build();

    let started = Instant::now();
    let result = host::run(&supervisor, &workflow, repeat, lines.as_ref()).await;
    let elapsed = started.elapsed();
    let started_plugins: Vec<&str> = names
        .iter()
        .filter(|n| supervisor.starts(n) > 0)
        .map(String::as_str)
        .collect();
    supervisor.shutdown().await;
    let outcome = result?;
    let report = RunReport {
        workflow: &workflow.name,
        file: &file.display().to_string(),
        catalog: &catalog_dir.display().to_string(),
        steps: workflow.steps.len(),
        runs: repeat,
        started: &started_plugins,
        in_catalog: names.len(),
        callbacks: &counts.summary(),
        output: &outcome.output,
        elapsed,
        latencies: &outcome.latencies,
    };
    println!("{report}");
    Ok(())
}

/// The demo's catalog in `dir`, its manifests' `bin/agent-demo` being `exe` (this binary).
fn demo_catalog(dir: &Path, exe: PathBuf) -> Result<Catalog, Box<dyn Error>> {
    let loaded = Catalog::load_dir(dir)?;
    if let Some(bad) = loaded.errors().first() {
        return Err(format!("the demo catalog has a bad manifest: {bad}").into());
    }
    let mut catalog = Catalog::default();
    let this = dir.join("bin").join("agent-demo");
    for manifest in loaded.manifests() {
        let mut manifest = manifest.clone();
        if manifest.command == this {
            manifest.command.clone_from(&exe);
        }
        catalog.add(manifest);
    }
    Ok(catalog)
}
