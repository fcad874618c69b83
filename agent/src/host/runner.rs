//! Running a workflow through a [`Supervisor`]: each step's plugin is acquired when the step
//! needs it (so a plugin starts only when first used), called with
//! `tether.agent.v1.Executor/Execute`, and handed the previous step's outputs.

use std::sync::Arc;
use std::time::Instant;

use tether_broker::error::UseErrorKind;
use tether_broker::{Supervisor, SupervisorBuilder, UseError};

use super::latencies::Latencies;
use super::observer::Observer;
use super::service::{AgentHost, ArtifactPolicy, CallbackCounts};
use super::workflow::Workflow;
use crate::v1::executor_client::ExecutorClient;
use crate::v1::{ExecuteRequest, Phase};

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// A step's plugin could not be started or used.
    #[error("step `{step}` could not run")]
    Step {
        /// The step.
        step: String,
        /// What went wrong with its plugin.
        #[source]
        source: Box<UseError>,
    },
    /// The step's plugin answered `Execute` with `Unimplemented`: it does not serve
    /// `tether.agent.v1.Executor` (a plugin of another protocol in the catalog, or a step
    /// naming the wrong plugin).
    #[error(
        "step `{step}`: plugin `{plugin}` does not implement tether.agent.v1.Executor (it answered Execute with Unimplemented); a step's plugin must serve tether.agent.v1.Executor/Execute (examples/proto/agent.proto; in Rust `tether_agent::plugin::serve_step`, in Python an `ExecutorServicer` as in sdk-python/examples/agent_executor.py), or name another plugin in the workflow"
    )]
    NotAnExecutor {
        /// The step.
        step: String,
        /// Its plugin.
        plugin: String,
    },
    /// A step ran and reported failure ([`Phase::Failed`]).
    #[error(
        "step `{step}` (plugin `{plugin}`) failed: {}",
        tether_proto::text::escape(message)
    )]
    StepFailed {
        /// The step.
        step: String,
        /// Its plugin.
        plugin: String,
        /// The plugin's message.
        message: String,
    },
}

/// What a completed run produced.
#[derive(Debug)]
pub struct Outcome {
    /// Every step's duration (acquire and call).
    pub latencies: Latencies,
    /// The last step's outputs (a JSON object).
    pub output: String,
}

/// Gives every plugin `builder` launches its own `tether.agent.v1.Host` service, which knows
/// whose calls it serves: artifacts by `policy`, callbacks counted in `counts`, progress
/// reports told to `observer`.
pub fn serve_host(
    builder: SupervisorBuilder,
    policy: Arc<ArtifactPolicy>,
    counts: Arc<CallbackCounts>,
    observer: Arc<dyn Observer>,
) -> SupervisorBuilder {
    builder.customize(move |plugin| {
        let host = AgentHost::new(
            plugin.plugin_name(),
            Arc::clone(&policy),
            Arc::clone(&counts),
            Arc::clone(&observer),
        );
        plugin.host_service(host)
    })
}

/// Runs every step of `workflow`, `repeat` times; each step's input is the previous step's
/// outputs (`{}` for the first step of each run).
///
/// # Errors
/// The first step whose plugin cannot be used or which reports failure stops the run.
pub async fn run(
    broker: &Supervisor,
    workflow: &Workflow,
    repeat: u32,
    observer: &dyn Observer,
) -> Result<Outcome, RunError> {
    let mut latencies = Latencies::default();
    let mut input = String::new();
    for _ in 0..repeat {
        input = "{}".to_owned();
        for step in &workflow.steps {
            let began = Instant::now();
            let unusable = |source: UseError| match source.kind() {
                UseErrorKind::Call { status, .. }
                    if status.code() == tonic::Code::Unimplemented =>
                {
                    RunError::NotAnExecutor {
                        step: step.name.clone(),
                        plugin: step.plugin.clone(),
                    }
                }
                _ => RunError::Step {
                    step: step.name.clone(),
                    source: Box::new(source),
                },
            };
            let lease = broker.acquire(&step.plugin).await.map_err(unusable)?;
            let request = ExecuteRequest {
                step: step.name.clone(),
                params_json: step.params_json.clone(),
                input_json: input.clone(),
            };
            let response = lease
                .call(|channel| async move { ExecutorClient::new(channel).execute(request).await })
                .await
                .map_err(unusable)?;
            drop(lease);
            latencies.push(began.elapsed());
            if response.phase() != Phase::Succeeded {
                return Err(RunError::StepFailed {
                    step: step.name.clone(),
                    plugin: step.plugin.clone(),
                    message: response.message,
                });
            }
            observer.step_done(step, &response.message);
            input = response.outputs_json;
        }
    }
    Ok(Outcome {
        latencies,
        output: input,
    })
}
