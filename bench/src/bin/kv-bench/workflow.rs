//! `kv-bench measure workflow`: N workflow steps end to end, in one of two models.
//!
//! - `plugin`: one long-lived plugin (the launcher's runner: the process runner, or gVisor with
//!   `--gvisor`) started, given N `Put`s of a 64-byte value (one per step, each to its own
//!   key), and shut down;
//! - `containers`: the model of a workflow engine that starts one container per step (Argo,
//!   Tekton): N runs of the one-shot `kv-step KEY VALUE` under gVisor, each in a sandbox of its
//!   own prepared by the same code as a plugin's ([`run_to_exit`]: private directory, bundle
//!   from the program's ELF closure, `runsc run`, container and bundle removed after).
//!
//! Both write the same N files into the working directory, which is checked afterwards. Each
//! of `--repeat` samples times the whole workflow: `samples_ns=…`.
//!
//! [`run_to_exit`]: tether_broker::PluginClientBuilder::run_to_exit

use std::path::{Path, PathBuf};
use std::time::Instant;

use tether_broker::launch::{GvisorOptions, Runner};
use tether_broker::{HandshakeConfig, PluginClient};
use tether_examples::kv::PutRequest;

use crate::launcher::{BENCH_VALUE, Failure, Launcher, interruptible, kv_client};
use crate::samples::join_ns;

/// How a workflow's steps run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Model {
    /// One long-lived plugin, one call per step.
    Plugin,
    /// One gVisor sandbox per step, running `kv-step`.
    Containers,
}

/// The key step `i` writes.
fn step_key(i: u64) -> String {
    format!("step-{i}")
}

/// Runs `steps` steps `repeat` times in `model` and returns the `measure` line.
pub(crate) async fn run(
    launcher: &Launcher,
    model: Model,
    steps: u64,
    repeat: u64,
    step_program: Option<&Path>,
) -> Result<String, Failure> {
    let state = std::env::current_dir()?;
    let value = String::from_utf8_lossy(BENCH_VALUE).into_owned();
    let mut samples = Vec::new();
    for _ in 0..repeat {
        for i in 0..steps {
            let _ = std::fs::remove_file(state.join(format!("kv_{}", step_key(i))));
        }
        let t0 = Instant::now();
        match model {
            Model::Plugin => interruptible(plugin_steps(launcher, &state, steps)).await??,
            Model::Containers => {
                let program = step_program
                    .ok_or("--model containers needs --step PROGRAM (the one-shot kv-step)")?;
                interruptible(container_steps(program, &state, steps, &value)).await??;
            }
        }
        samples.push(t0.elapsed());
        for i in 0..steps {
            let path = state.join(format!("kv_{}", step_key(i)));
            let written = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if written != BENCH_VALUE {
                return Err(format!("{} holds the wrong value", path.display()).into());
            }
        }
    }
    Ok(format!("steps={steps} samples_ns={}", join_ns(&samples)))
}

/// Launch (working in `state`), one `Put` per step, shutdown.
async fn plugin_steps(launcher: &Launcher, state: &Path, steps: u64) -> Result<(), Failure> {
    let plugin = launcher.builder()?.current_dir(state).start().await?;
    let mut kv = kv_client(plugin.channel());
    let mut outcome = Ok(());
    for i in 0..steps {
        let put = kv
            .put(PutRequest {
                key: step_key(i),
                value: BENCH_VALUE.to_vec(),
            })
            .await;
        if let Err(status) = put {
            outcome = Err(format!("step {i}: put failed: {status}").into());
            break;
        }
    }
    plugin.shutdown().await?;
    outcome
}

/// One gVisor sandbox per step.
async fn container_steps(
    program: &Path,
    state: &Path,
    steps: u64,
    value: &str,
) -> Result<(), Failure> {
    for i in 0..steps {
        let status = PluginClient::builder(program)
            .args([step_key(i), value.to_owned()])
            .name(format!("step-{i}"))
            .runner(Runner::Gvisor(GvisorOptions::new()))
            .current_dir(PathBuf::from(state))
            .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
            .run_to_exit()
            .await?;
        if !status.success() {
            return Err(format!("step {i}: kv-step exited with {status}").into());
        }
    }
    Ok(())
}
