//! Ending a plugin: the graceful sequence of [`PluginClient::shutdown`](crate::PluginClient::shutdown)
//! and the non-blocking one run when a running plugin is dropped.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::Signal;
use tether_proto::plugin::Empty;
use tether_proto::plugin::grpc_controller_client::GrpcControllerClient;
use tonic::transport::Channel;

use crate::confine::process::ProcessGroup;
use crate::launch::error::{ShutdownError, ShutdownErrorKind, ShutdownOutcome};
use crate::launch::launched::Launched;

/// How long to wait for the plugin to be reaped after `SIGKILL` before giving up (a process in
/// uninterruptible sleep cannot die sooner). Not configurable: `SIGKILL` cannot be caught.
pub const KILL_REAP_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the background stopper checks whether the plugin has exited.
const BACKGROUND_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// The graceful part of a shutdown.
#[derive(Debug)]
pub(crate) struct Graceful<'a> {
    /// The plugin's channel, for `GRPCController.Shutdown`.
    pub(crate) channel: &'a Channel,
    /// Timeout of the RPC.
    pub(crate) rpc_timeout: Duration,
    /// How long to wait for the exit after the RPC.
    pub(crate) grace: Duration,
}

impl Launched {
    /// Ends the plugin: asks it to shut down (if `graceful`), then `SIGTERM`, then `SIGKILL` to
    /// its process group, waiting for its exit after each; then removes its private directory.
    pub(crate) async fn shutdown(
        &mut self,
        graceful: Option<Graceful<'_>>,
    ) -> Result<ShutdownOutcome, ShutdownError> {
        let outcome = self.end_process(graceful).await?;
        if let Some(dir) = self.dir.take() {
            let path = dir.path().to_owned();
            dir.close().map_err(|source| {
                self.error(ShutdownErrorKind::Cleanup {
                    outcome,
                    dir: path,
                    source,
                })
            })?;
        }
        if let Some(janitor) = self.janitor.take() {
            janitor.unregister();
        }
        tracing::debug!(plugin = &*self.plugin, %outcome, "plugin shut down");
        Ok(outcome)
    }

    /// Kills the plugin's process group at once (`SIGKILL`, for a hung plugin), waits for the
    /// reaping and removes its private directory.
    pub(crate) async fn kill(&mut self) -> Result<ShutdownOutcome, ShutdownError> {
        let outcome = if let Some(status) = self.check()? {
            ShutdownOutcome::AlreadyExited(status)
        } else if !self.signal(Signal::KILL, "SIGKILL")? {
            self.exited_before_signal().await
        } else {
            match self.group.exited_within(KILL_REAP_TIMEOUT).await {
                Some(status) => ShutdownOutcome::Killed(status),
                None => {
                    return Err(self.error(ShutdownErrorKind::StillRunning {
                        waited: KILL_REAP_TIMEOUT,
                    }));
                }
            }
        };
        if let Some(dir) = self.dir.take() {
            let path = dir.path().to_owned();
            dir.close().map_err(|source| {
                self.error(ShutdownErrorKind::Cleanup {
                    outcome,
                    dir: path,
                    source,
                })
            })?;
        }
        if let Some(janitor) = self.janitor.take() {
            janitor.unregister();
        }
        Ok(outcome)
    }

    async fn end_process(
        &self,
        graceful: Option<Graceful<'_>>,
    ) -> Result<ShutdownOutcome, ShutdownError> {
        let plugin = &*self.plugin;
        if let Some(status) = self.check()? {
            return Ok(ShutdownOutcome::AlreadyExited(status));
        }
        if let Some(graceful) = graceful {
            let mut controller = GrpcControllerClient::new(graceful.channel.clone());
            match tokio::time::timeout(graceful.rpc_timeout, controller.shutdown(Empty {})).await {
                Ok(Ok(_)) => tracing::debug!(plugin, "plugin acknowledged the shutdown request"),
                // A plugin often exits before it can answer; that is no failure.
                Ok(Err(status)) => tracing::debug!(plugin, %status, "shutdown RPC failed"),
                Err(_) => tracing::debug!(plugin, "shutdown RPC timed out"),
            }
            if let Some(status) = self.group.exited_within(graceful.grace).await {
                return Ok(ShutdownOutcome::Graceful(status));
            }
            tracing::info!(
                plugin,
                grace = ?graceful.grace,
                "plugin did not exit after the shutdown request; sending SIGTERM to its process group"
            );
        }
        if !self.signal(Signal::TERM, "SIGTERM")? {
            return Ok(self.exited_before_signal().await);
        }
        if let Some(status) = self.group.exited_within(self.terminate_grace).await {
            return Ok(ShutdownOutcome::Terminated(status));
        }
        tracing::warn!(
            plugin,
            grace = ?self.terminate_grace,
            "plugin ignored SIGTERM; sending SIGKILL to its process group"
        );
        if !self.signal(Signal::KILL, "SIGKILL")? {
            return Ok(self.exited_before_signal().await);
        }
        match self.group.exited_within(KILL_REAP_TIMEOUT).await {
            Some(status) => Ok(ShutdownOutcome::Killed(status)),
            None => Err(ShutdownError::new(
                plugin,
                self.group.pid(),
                ShutdownErrorKind::StillRunning {
                    waited: KILL_REAP_TIMEOUT,
                },
            )),
        }
    }

    fn check(&self) -> Result<Option<std::process::ExitStatus>, ShutdownError> {
        self.group
            .check()
            .map_err(|source| self.error(ShutdownErrorKind::Wait { source }))
    }

    fn error(&self, kind: ShutdownErrorKind) -> ShutdownError {
        ShutdownError::new(self.plugin.to_string(), self.group.pid(), kind)
    }

    fn signal(&self, signal: Signal, name: &'static str) -> Result<bool, ShutdownError> {
        self.group.signal(signal).map_err(|source| {
            self.error(ShutdownErrorKind::Signal {
                signal: name,
                source,
            })
        })
    }

    /// The outcome when the plugin exited between two steps, just before a signal (`signal`
    /// returns `false` only once the exit status is recorded, so this does not wait).
    async fn exited_before_signal(&self) -> ShutdownOutcome {
        ShutdownOutcome::Terminated(self.group.exited().await)
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        let plugin = &*self.plugin;
        if self.group.exit_status().is_none() {
            tracing::debug!(plugin, "plugin dropped while running; terminating it");
            // SIGTERM now, so it is sent even if the host exits before the thread below runs.
            match self.group.signal(Signal::TERM) {
                Ok(false) => {}
                Ok(true) => {
                    let (group, name) = (Arc::clone(&self.group), Arc::clone(&self.plugin));
                    let grace = self.terminate_grace;
                    let janitor = self.janitor.take();
                    let spawned =
                        thread::Builder::new()
                            .name("tether-stop".into())
                            .spawn(move || {
                                if stop_blocking(&group, &name, grace)
                                    && let Some(janitor) = janitor
                                {
                                    janitor.unregister();
                                }
                            });
                    if let Err(e) = spawned {
                        tracing::warn!(
                            plugin,
                            error = %e,
                            "cannot start a thread to stop the plugin; killing it now"
                        );
                        let _ = self.group.signal(Signal::KILL);
                    }
                }
                Err(e) => tracing::warn!(plugin, error = %e, "cannot send SIGTERM to the plugin"),
            }
        }
        // Removed now rather than after the exit, so it is gone even if the host exits at once;
        // a plugin still running only loses its unlinked socket and temporary files.
        if let Some(dir) = self.dir.take() {
            let path = dir.path().to_owned();
            if let Err(e) = dir.close() {
                tracing::warn!(
                    plugin,
                    dir = %path.display(),
                    error = %e,
                    "cannot remove the plugin's private directory"
                );
            }
        }
        if self.group.exit_status().is_some()
            && let Some(janitor) = self.janitor.take()
        {
            janitor.unregister();
        }
    }
}

/// The blocking tail of a drop: wait out the grace after `SIGTERM`, then `SIGKILL` and wait for
/// the reaping. Runs on its own thread. Whether the plugin was reaped.
fn stop_blocking(group: &ProcessGroup, plugin: &str, grace: Duration) -> bool {
    if wait_blocking(group, grace) {
        return true;
    }
    tracing::warn!(
        plugin,
        ?grace,
        "plugin ignored SIGTERM; sending SIGKILL to its process group"
    );
    match group.signal(Signal::KILL) {
        Ok(false) => return true,
        Ok(true) => {}
        Err(e) => tracing::warn!(plugin, error = %e, "cannot send SIGKILL to the plugin"),
    }
    if wait_blocking(group, KILL_REAP_TIMEOUT) {
        return true;
    }
    tracing::warn!(plugin, pid = group.pid(), "plugin still runs after SIGKILL");
    false
}

/// Polls for the plugin's exit until `timeout`; whether it exited.
fn wait_blocking(group: &ProcessGroup, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        match group.check() {
            Ok(Some(_)) => return true,
            Ok(None) => {}
            Err(_) => return false,
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(BACKGROUND_POLL_INTERVAL);
    }
}

#[cfg(test)]
mod tests {
    use std::process::Stdio;

    use super::*;
    use crate::launch::private_dir::PrivateDir;
    use crate::launch::runner::view::PluginView;

    fn launch(script: &str) -> Launched {
        let child = tokio::process::Command::new("/bin/sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let dir = PrivateDir::create(None).unwrap();
        Launched {
            group: ProcessGroup::new(child, "test".into()).unwrap(),
            view: PluginView::same(dir.path()),
            sockets: None,
            diagnose: None,
            dir: Some(dir),
            plugin: "test".into(),
            terminate_grace: Duration::from_millis(200),
            janitor: None,
        }
    }

    #[tokio::test]
    async fn a_plugin_that_honours_sigterm_is_terminated_and_its_directory_removed() {
        let mut launched = launch("exec sleep 30");
        let dir = launched.dir.as_ref().unwrap().path().to_owned();
        let outcome = launched.shutdown(None).await.unwrap();
        assert!(
            matches!(outcome, ShutdownOutcome::Terminated(_)),
            "{outcome:?}"
        );
        assert!(!dir.exists());
    }

    #[tokio::test]
    async fn a_plugin_that_ignores_sigterm_is_killed() {
        let mut launched = launch("trap '' TERM; sleep 30; sleep 30");
        // Give the shell time to install the trap.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let outcome = launched.shutdown(None).await.unwrap();
        assert!(matches!(outcome, ShutdownOutcome::Killed(_)), "{outcome:?}");
    }

    #[tokio::test]
    async fn a_plugin_that_already_exited_is_reported_as_such() {
        let mut launched = launch("exit 4");
        launched
            .group
            .exited_within(Duration::from_secs(5))
            .await
            .unwrap();
        let outcome = launched.shutdown(None).await.unwrap();
        assert!(matches!(outcome, ShutdownOutcome::AlreadyExited(s) if s.code() == Some(4)));
    }

    #[tokio::test]
    async fn dropping_a_running_plugin_ends_it_and_removes_its_directory_without_blocking() {
        let launched = launch("exec sleep 30");
        let group = Arc::clone(&launched.group);
        let dir = launched.dir.as_ref().unwrap().path().to_owned();
        let t0 = Instant::now();
        drop(launched);
        assert!(t0.elapsed() < Duration::from_millis(50), "drop blocked");
        let status = group.exited_within(Duration::from_secs(5)).await.unwrap();
        assert!(!status.success());
        let deadline = Instant::now() + Duration::from_secs(5);
        while dir.exists() {
            assert!(
                Instant::now() < deadline,
                "{} was not removed",
                dir.display()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
