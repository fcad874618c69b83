//! Running a program to its exit with everything a plugin launch prepares — the private
//! directory, the delivered files, the environment, the runner (the process runner's
//! confinement, or the gVisor runner's bundle and `runsc run`) and the janitor — but no
//! handshake and no connection: a one-shot job, the model of a workflow engine that starts one
//! container per step (Argo, Tekton). `bench/` measures that model against a long-lived plugin
//! with it, so both are prepared by the same code.

use std::process::ExitStatus;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt as _;

use crate::launch::builder::PluginClientBuilder;
use crate::launch::error::{ShutdownError, StartError};
use crate::launch::launched::Spawned;
use crate::launch::output::{self, SharedTail, StderrTail};
use crate::launch::settings::HandshakeConfig;
use crate::launch::stages;

/// Why [`PluginClientBuilder::run_to_exit`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunOnceError {
    /// The program could not be started.
    #[error(transparent)]
    Start(#[from] StartError),
    /// It ran, but its private directory (or, under gVisor, its bundle) could not be removed.
    #[error(transparent)]
    Cleanup(#[from] ShutdownError),
}

impl PluginClientBuilder<HandshakeConfig> {
    /// Runs the program once, prepared and confined exactly as [`start`](Self::start) would
    /// launch it, and waits for it to exit; then removes everything the launch made (under
    /// gVisor: the container and its bundle). No TLS identity is made and no handshake is
    /// read (the program still finds the protocol's variables in its environment): what it prints
    /// on stdout is discarded, its stderr goes to the [output sink](Self::output_sink) and the
    /// log as a plugin's does. The [start timeout](Self::start_timeout) does not apply; the
    /// program runs until it exits.
    ///
    /// # Errors
    /// [`RunOnceError::Start`] when the program cannot be started (the errors of a plugin
    /// launch's prepare and spawn phases), [`RunOnceError::Cleanup`] when what the run made
    /// cannot be removed.
    pub async fn run_to_exit(self) -> Result<ExitStatus, RunOnceError> {
        let settings = self.settings;
        let name: Arc<str> = settings.display_name().into();
        let (spawned, _) = stages::launch(&settings, &self.handshake, &name, false)
            .await
            .map_err(|failure| StartError::new(&name, failure, None))?;
        let Spawned {
            mut launched,
            mut stdout,
            stderr,
            ..
        } = spawned;
        let tail: SharedTail = Arc::new(Mutex::new(StderrTail::new(
            settings.output_limits.stderr_tail_len,
        )));
        let mut stderr_done = output::drain_stderr(
            stderr,
            Arc::clone(&name),
            launched.group.pid(),
            tail,
            settings.output_sink.clone(),
        );
        let stdout_done = tokio::spawn(async move {
            let mut sink = [0_u8; 4096];
            while matches!(stdout.read(&mut sink).await, Ok(n) if n > 0) {}
        });
        let status = launched.group.exited().await;
        // Its pipes close with it (or with the last process of its group, which the exit
        // ended).
        let _ = stdout_done.await;
        let _ = stderr_done.wait_for(|done| *done).await;
        launched.shutdown(None).await?;
        Ok(status)
    }
}
