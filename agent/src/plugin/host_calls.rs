//! A step's calls back to the host (`tether.agent.v1.Host`): progress, log lines, artifacts;
//! and connections through the host to other plugins of its catalog, when granted.

use tether_sdk::GrpcBroker;
use tether_sdk::telemetry::TracedChannel;
use tokio_stream::StreamExt as _;

use super::step_error::StepError;
use crate::v1::host_client::HostClient;
use crate::v1::{FetchArtifactRequest, LogLevel, LogLine, ProgressReport};

/// The largest artifact a step accepts from the host: a host that streams more is cut off
/// with an error instead of filling the plugin's memory.
pub const MAX_ARTIFACT_LEN: u64 = 64 * 1024 * 1024;

/// The host's `tether.agent.v1.Host` service, for one step. Reached through the broker's host
/// services (a tether host serves them to every plugin; `tether call` and go-plugin hosts do
/// not, and then every call fails with a clear error).
#[derive(Debug, Clone)]
pub struct HostCalls {
    broker: GrpcBroker,
    step: String,
}

impl HostCalls {
    /// Calls for `step`, through the plugin's `broker`.
    #[must_use]
    pub fn new(broker: GrpcBroker, step: impl Into<String>) -> Self {
        Self {
            broker,
            step: step.into(),
        }
    }

    /// The step these calls are for.
    #[must_use]
    pub fn step(&self) -> &str {
        &self.step
    }

    async fn client(&self) -> Result<HostClient<TracedChannel>, StepError> {
        let channel = self.broker.host_services().await.map_err(|e| {
            StepError(format!(
                "cannot reach the host's tether.agent.v1.Host service (run the step with `tether run`, which serves it): {e}"
            ))
        })?;
        Ok(HostClient::new(channel))
    }

    /// Reports `done` of `total` units of work (0 = unknown) with a short `message`.
    ///
    /// # Errors
    /// When the host cannot be reached or refuses the report.
    pub async fn progress(&self, done: u64, total: u64, message: &str) -> Result<(), StepError> {
        self.client()
            .await?
            .report_progress(ProgressReport {
                step: self.step.clone(),
                done,
                total,
                message: message.to_owned(),
            })
            .await
            .map_err(|s| StepError(format!("reporting progress to the host: {}", s.message())))?;
        Ok(())
    }

    /// Writes `message` into the host's log at `level`.
    ///
    /// # Errors
    /// When the host cannot be reached or refuses the line.
    pub async fn log(&self, level: LogLevel, message: &str) -> Result<(), StepError> {
        self.client()
            .await?
            .log(LogLine {
                step: self.step.clone(),
                level: level.into(),
                message: message.to_owned(),
            })
            .await
            .map_err(|s| StepError(format!("logging to the host: {}", s.message())))?;
        Ok(())
    }

    /// A connection to the services of catalog plugin `plugin`, relayed by the host, which
    /// starts it if needed — when the operator's grants let this plugin call it (`calls =
    /// ["NAME"]` under `[plugins.THIS]`; docs/PROTOCOL.md §10.3). Use it with that plugin's
    /// client (e.g. [`ExecutorClient`](crate::v1::executor_client::ExecutorClient)).
    ///
    /// # Errors
    /// When the host refuses (not granted: the message names the grants line to add; not in
    /// its catalog; it could not start) or cannot be reached.
    pub async fn open_plugin(&self, plugin: &str) -> Result<TracedChannel, StepError> {
        self.broker.open_plugin(plugin).await.map_err(|e| {
            StepError(format!(
                "cannot call plugin `{plugin}` through the host: {e}"
            ))
        })
    }

    /// Fetches the host's artifact `name`, reporting progress after every chunk.
    ///
    /// # Errors
    /// When the host refuses (the workflow does not name `name` in this step's params), the
    /// artifact does not exist, or it is larger than [`MAX_ARTIFACT_LEN`].
    pub async fn fetch_artifact(&self, name: &str) -> Result<Vec<u8>, StepError> {
        let refused = |s: tonic::Status| {
            StepError(format!(
                "the host refused artifact `{name}`: {} ({:?})",
                s.message(),
                s.code()
            ))
        };
        let mut client = self.client().await?;
        let mut chunks = client
            .fetch_artifact(FetchArtifactRequest {
                step: self.step.clone(),
                name: name.to_owned(),
            })
            .await
            .map_err(refused)?
            .into_inner();
        let mut bytes = Vec::new();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(refused)?;
            if chunk.total_size > MAX_ARTIFACT_LEN
                || (bytes.len() + chunk.data.len()) as u64 > MAX_ARTIFACT_LEN
            {
                return Err(StepError(format!(
                    "artifact `{name}` is larger than {MAX_ARTIFACT_LEN} bytes (MAX_ARTIFACT_LEN)"
                )));
            }
            bytes.extend_from_slice(&chunk.data);
            let total = chunk.total_size;
            self.progress(bytes.len() as u64, total, &format!("fetching {name}"))
                .await?;
        }
        Ok(bytes)
    }
}
