//! The host side of `tether.agent.v1.Host`: what a run serves to every plugin it launches
//! (as a tether host service, see [`serve_host`](super::serve_host)), so steps can report
//! progress, log, and fetch artifacts.
//!
//! # Which artifacts a plugin may fetch
//! Least privilege: the host serves artifact `NAME` to plugin `P` only for a step of the
//! workflow that `P` runs and whose params name `NAME` (`artifact = "NAME"` or
//! `artifacts = [...]`, see [`Workflow`]). Which plugin is calling comes from the
//! connection (each plugin gets its own service instance), not from the request, so a plugin
//! cannot fetch for another plugin's step; the names come from the workflow file, so data a
//! step receives from an earlier plugin cannot widen what it may read. Names are plain file
//! names resolved in the artifact directory (`tether run --artifacts DIR`, default
//! `artifacts` next to the catalog), so no name can leave it (a symbolic link
//! the operator puts in that directory is followed: the directory is the operator's).

use std::collections::HashMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tether_proto::text::escape;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use super::observer::{Observer, ProgressEvent};
use super::workflow::Workflow;
use crate::v1::host_server::{Host, HostServer};
use crate::v1::{Ack, ArtifactChunk, FetchArtifactRequest, LogLevel, LogLine, ProgressReport};

/// How many bytes of an artifact travel in one `ArtifactChunk`.
pub const ARTIFACT_CHUNK_LEN: usize = 64 * 1024;

/// The largest artifact the host serves (bigger ones are refused with
/// `RESOURCE_EXHAUSTED`), matching the plugin side's own limit.
pub const MAX_ARTIFACT_LEN: u64 = crate::plugin::MAX_ARTIFACT_LEN;

/// What the plugins called back, for the summary.
#[derive(Debug, Default)]
pub struct CallbackCounts {
    /// Progress reports.
    pub progress: AtomicU64,
    /// Log lines.
    pub logs: AtomicU64,
    /// Artifacts served.
    pub fetches: AtomicU64,
    /// Bytes of the artifacts served.
    pub bytes_served: AtomicU64,
    /// Artifact fetches refused.
    pub refused: AtomicU64,
}

impl CallbackCounts {
    /// One line for the summary.
    #[must_use]
    pub fn summary(&self) -> String {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "{} progress reports, {} log lines, {} artifact fetches ({} bytes), {} refused",
            n(&self.progress),
            n(&self.logs),
            n(&self.fetches),
            n(&self.bytes_served),
            n(&self.refused)
        )
    }
}

/// Which artifacts each (plugin, step) may fetch, and where they are.
#[derive(Debug)]
pub struct ArtifactPolicy {
    dir: PathBuf,
    /// (plugin, step) → artifact names.
    allowed: HashMap<(String, String), Vec<String>>,
}

impl ArtifactPolicy {
    /// The policy of `workflow`, serving from `dir`.
    #[must_use]
    pub fn new(dir: PathBuf, workflow: &Workflow) -> Self {
        let mut allowed: HashMap<(String, String), Vec<String>> = HashMap::new();
        for step in &workflow.steps {
            allowed
                .entry((step.plugin.clone(), step.name.clone()))
                .or_default()
                .extend(step.artifacts.iter().cloned());
        }
        Self { dir, allowed }
    }

    /// Where `plugin` may read `name` for `step`, or why not.
    fn resolve(&self, plugin: &str, step: &str, name: &str) -> Result<PathBuf, Status> {
        let Some(names) = self.allowed.get(&(plugin.to_owned(), step.to_owned())) else {
            return Err(Status::permission_denied(format!(
                "plugin `{plugin}` runs no step `{step}` in this workflow, so it may fetch no artifacts for it"
            )));
        };
        if !names.iter().any(|n| n == name) {
            let granted = if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            };
            return Err(Status::permission_denied(format!(
                "step `{step}` (plugin `{plugin}`) may not fetch artifact `{name}`: only the artifacts its params name in the workflow are served (it names: {granted}); add `artifact = \"{name}\"` to the step's params to allow it"
            )));
        }
        // Every granted name passed `workflow::artifact_name` when the workflow was parsed.
        Ok(self.dir.join(name))
    }
}

/// The `Host` service for one plugin.
#[derive(Clone)]
pub struct AgentHost {
    plugin: String,
    policy: Arc<ArtifactPolicy>,
    counts: Arc<CallbackCounts>,
    /// Told about progress reports (e.g. a progress bar's message).
    observer: Arc<dyn Observer>,
}

impl std::fmt::Debug for AgentHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentHost")
            .field("plugin", &self.plugin)
            .field("policy", &self.policy)
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

impl AgentHost {
    /// The service for `plugin`.
    #[must_use]
    pub fn new(
        plugin: String,
        policy: Arc<ArtifactPolicy>,
        counts: Arc<CallbackCounts>,
        observer: Arc<dyn Observer>,
    ) -> HostServer<Self> {
        HostServer::new(Self {
            plugin,
            policy,
            counts,
            observer,
        })
    }
}

type ChunkStream = Pin<Box<dyn Stream<Item = Result<ArtifactChunk, Status>> + Send>>;

#[tonic::async_trait]
impl Host for AgentHost {
    async fn report_progress(
        &self,
        request: Request<ProgressReport>,
    ) -> Result<Response<Ack>, Status> {
        let report = request.into_inner();
        self.counts.progress.fetch_add(1, Ordering::Relaxed);
        let event = ProgressEvent {
            plugin: &self.plugin,
            step: &report.step,
            done: report.done,
            total: report.total,
            message: &report.message,
        };
        tracing::debug!(
            target: "tether::agent",
            plugin = %self.plugin,
            step = %escape(&report.step),
            "progress {}: {}",
            event.amount(),
            escape(&report.message)
        );
        self.observer.progress(&event);
        Ok(Response::new(Ack {}))
    }

    async fn log(&self, request: Request<LogLine>) -> Result<Response<Ack>, Status> {
        let line = request.into_inner();
        self.counts.logs.fetch_add(1, Ordering::Relaxed);
        let (plugin, step, message) = (&self.plugin, escape(&line.step), escape(&line.message));
        macro_rules! emit {
            ($level:expr) => {
                tracing::event!(target: "tether::agent", $level, plugin = %plugin, step = %step, "{message}")
            };
        }
        match line.level() {
            LogLevel::Trace => emit!(tracing::Level::TRACE),
            LogLevel::Debug => emit!(tracing::Level::DEBUG),
            LogLevel::Unspecified | LogLevel::Info => emit!(tracing::Level::INFO),
            LogLevel::Warn => emit!(tracing::Level::WARN),
            LogLevel::Error => emit!(tracing::Level::ERROR),
        }
        Ok(Response::new(Ack {}))
    }

    type FetchArtifactStream = ChunkStream;

    async fn fetch_artifact(
        &self,
        request: Request<FetchArtifactRequest>,
    ) -> Result<Response<ChunkStream>, Status> {
        let FetchArtifactRequest { step, name } = request.into_inner();
        let path = self
            .policy
            .resolve(&self.plugin, &step, &name)
            .inspect_err(|status| {
                self.counts.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(target: "tether::agent", plugin = %self.plugin, step = %escape(&step), "refused artifact fetch: {}", escape(status.message()));
            })?;
        let bytes = read_artifact(&path, &name).await?;
        self.counts.fetches.fetch_add(1, Ordering::Relaxed);
        self.counts
            .bytes_served
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let total_size = bytes.len() as u64;
        let chunks: Vec<Result<ArtifactChunk, Status>> = if bytes.is_empty() {
            vec![Ok(ArtifactChunk {
                data: Vec::new(),
                total_size,
            })]
        } else {
            bytes
                .chunks(ARTIFACT_CHUNK_LEN)
                .map(|c| {
                    Ok(ArtifactChunk {
                        data: c.to_vec(),
                        total_size,
                    })
                })
                .collect()
        };
        Ok(Response::new(Box::pin(tokio_stream::iter(chunks))))
    }
}

/// Reads the artifact at `path`, refusing what is missing, not a regular file, or too large.
async fn read_artifact(path: &std::path::Path, name: &str) -> Result<Vec<u8>, Status> {
    let meta = tokio::fs::metadata(path).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Status::not_found(format!(
                "there is no artifact `{name}` in the host's artifact directory"
            ))
        } else {
            Status::internal(format!("reading artifact `{name}`: {e}"))
        }
    })?;
    if !meta.is_file() {
        return Err(Status::not_found(format!(
            "artifact `{name}` is not a regular file"
        )));
    }
    if meta.len() > MAX_ARTIFACT_LEN {
        return Err(Status::resource_exhausted(format!(
            "artifact `{name}` has {} bytes, more than the {MAX_ARTIFACT_LEN} served",
            meta.len()
        )));
    }
    tokio::fs::read(path)
        .await
        .map_err(|e| Status::internal(format!("reading artifact `{name}`: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> ArtifactPolicy {
        let text = "name = \"w\"\n[[steps]]\nname = \"sum\"\nplugin = \"checksum\"\nparams = { artifact = \"notes.md\" }\n[[steps]]\nname = \"other\"\nplugin = \"word-count\"\n";
        let plugins = vec!["checksum".to_owned(), "word-count".to_owned()];
        let workflow = Workflow::parse(text, std::path::Path::new("w.toml"), &plugins).unwrap();
        ArtifactPolicy::new(PathBuf::from("/artifacts"), &workflow)
    }

    #[test]
    fn a_step_gets_the_artifact_its_params_name() {
        let path = policy().resolve("checksum", "sum", "notes.md").unwrap();
        assert_eq!(path, PathBuf::from("/artifacts/notes.md"));
    }

    #[test]
    fn an_artifact_the_params_do_not_name_is_refused() {
        let err = policy()
            .resolve("checksum", "sum", "secrets.txt")
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied);
        assert!(err.message().contains("notes.md"), "{err:?}");
    }

    #[test]
    fn a_plugin_cannot_fetch_for_another_plugins_step() {
        let err = policy()
            .resolve("word-count", "sum", "notes.md")
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied);
        assert!(err.message().contains("runs no step `sum`"), "{err:?}");
    }

    #[test]
    fn the_summary_counts_each_kind_of_callback() {
        let counts = CallbackCounts::default();
        counts.progress.fetch_add(3, Ordering::Relaxed);
        counts.logs.fetch_add(1, Ordering::Relaxed);
        assert!(
            counts
                .summary()
                .starts_with("3 progress reports, 1 log lines"),
            "{}",
            counts.summary()
        );
    }
}
