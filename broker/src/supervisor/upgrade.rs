//! Replacing a running plugin with a new version without a failed call: [`Supervisor::upgrade`]
//! starts the new instance (its launch checks its health), switches new `acquire`s to it,
//! lets the old instance finish the calls of the leases taken before the switch, up to a grace,
//! then stops it. A new version that does not start or become healthy changes nothing.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::catalog::manifest::Manifest;
use crate::supervisor::error::{UpgradeError, UpgradeErrorKind, UseError};
use crate::supervisor::launch::launch;
use crate::supervisor::supervision::stop;
use crate::supervisor::version::Version;
use crate::supervisor::{Ended, Running, Slot, Supervisor};
use crate::telemetry::metrics::UpgradeOutcome;

/// How long an instance replaced by [`Supervisor::upgrade`] keeps serving the leases taken
/// before the switch: once they are all released it is stopped at once; when the grace runs out
/// first it is stopped all the same, and calls still running through those leases fail with
/// [`UseErrorKind::Replaced`](crate::error::UseErrorKind::Replaced). Thirty seconds, as
/// Kubernetes gives a Pod to end. Override with
/// [`SupervisorBuilder::upgrade_grace`](crate::supervisor::SupervisorBuilder::upgrade_grace).
pub const DEFAULT_UPGRADE_GRACE: Duration = Duration::from_secs(30);

/// What [`Supervisor::upgrade`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UpgradeReport {
    /// The plugin upgraded.
    pub plugin: String,
    /// The new version's instance, started and healthy; `None` when the plugin was not
    /// running: its next start runs the new version.
    pub new_pid: Option<u32>,
    /// How long the new instance took to start and pass its health check.
    pub start_duration: Option<Duration>,
    /// What became of the instance it replaced.
    pub old: OldInstance,
}

/// What became of the instance an upgrade replaced ([`UpgradeReport::old`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OldInstance {
    /// No instance was running at the switch.
    NotRunning,
    /// Every lease taken before the switch was released (their calls had finished) after
    /// `waited`; then it was stopped.
    Drained {
        /// Its process id.
        pid: u32,
        /// From the switch to the release of its last lease.
        waited: Duration,
    },
    /// The grace ran out with `leases` leases still held; it was stopped, and their calls
    /// fail with [`UseErrorKind::Replaced`](crate::error::UseErrorKind::Replaced).
    GraceExpired {
        /// Its process id.
        pid: u32,
        /// The leases still held.
        leases: usize,
    },
    /// It ended by itself while draining (a crash, a hang, its idle timeout, a shutdown).
    Ended {
        /// Its process id.
        pid: u32,
    },
}

impl fmt::Display for UpgradeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "plugin `{}` upgraded: ", self.plugin)?;
        let (Some(pid), Some(took)) = (self.new_pid, self.start_duration) else {
            return f.write_str("it was not running; its next start runs the new version");
        };
        write!(f, "its new instance (pid {pid}) was healthy after {took:?}")?;
        match self.old {
            OldInstance::NotRunning => f.write_str("; no old instance was running"),
            OldInstance::Drained { pid, waited } => write!(
                f,
                "; the old instance (pid {pid}) finished its calls {waited:?} after the switch and was stopped"
            ),
            OldInstance::GraceExpired { pid, leases } => write!(
                f,
                "; the old instance (pid {pid}) was stopped when the grace ran out, {leases} leases still holding it"
            ),
            OldInstance::Ended { pid } => {
                write!(
                    f,
                    "; the old instance (pid {pid}) ended by itself meanwhile"
                )
            }
        }
    }
}

impl Supervisor {
    /// Replaces plugin `manifest.name`'s version with `manifest` (a new binary, arguments,
    /// confinement…) without a failed call:
    ///
    /// 1. the new instance is started, and its launch checks its health, while the running
    ///    one goes on serving;
    /// 2. from then on [`acquire`](Self::acquire) hands out the new instance;
    /// 3. the old instance keeps serving the [`Lease`](crate::Lease)s taken before the switch
    ///    until they are all released, up to the grace ([`DEFAULT_UPGRADE_GRACE`]), then it is
    ///    stopped (Shutdown RPC, `SIGTERM`, `SIGKILL`, as any stop); this returns then.
    ///
    /// When the plugin is not running, the new manifest is checked (grants, values) and its
    /// next start runs it. The new version's crashes count afresh against its restart policy.
    ///
    /// ```no_run
    /// # async fn f(supervisor: tether_broker::Supervisor) -> Result<(), Box<dyn std::error::Error>> {
    /// let manifest = tether_broker::Manifest::parse(
    ///     &std::fs::read_to_string("/etc/tether/plugins/kv.toml")?,
    ///     "/etc/tether/plugins/kv.toml".as_ref(),
    /// )?;
    /// match supervisor.upgrade(manifest).await {
    ///     Ok(report) => println!("{report}"),
    ///     // The running version keeps serving; the error names the phase and the cause.
    ///     Err(e) => eprintln!("{e}"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// An [`UpgradeError`]: no such plugin, or the new version was refused or did not start or
    /// become healthy ([`UpgradePhase`](crate::error::UpgradePhase) says where). The running
    /// version keeps serving, and nothing of the new one is left behind.
    pub async fn upgrade(&self, manifest: Manifest) -> Result<UpgradeReport, UpgradeError> {
        let name = manifest.name.clone();
        let Some(slot) = self.inner.slots.get(&name) else {
            return Err(UpgradeError::new(name, UpgradeErrorKind::UnknownPlugin));
        };
        let _one_at_a_time = slot.upgrading.lock().await;
        let version = {
            let state = slot.state.lock().await;
            let metrics = self.inner.options.metrics.as_ref();
            Arc::new(state.version.next(manifest, metrics))
        };
        let result = self.switch(slot, &version).await;
        let outcome = match &result {
            Ok(report) => {
                tracing::info!(plugin = name, "{report}");
                UpgradeOutcome::Success
            }
            Err(e) => {
                tracing::info!(plugin = name, phase = %e.phase(), "{e}");
                UpgradeOutcome::Failure
            }
        };
        if let Some(metrics) = &version.metrics {
            metrics.upgraded(outcome);
        }
        result
    }

    /// Starts `version`, switches to it and drains the instance it replaces.
    async fn switch(
        &self,
        slot: &Arc<Slot>,
        version: &Arc<Version>,
    ) -> Result<UpgradeReport, UpgradeError> {
        let name = &slot.name;
        let not_started = |e: UseError| UpgradeError::new(name, UpgradeErrorKind::NotStarted(e));
        {
            let mut state = slot.state.lock().await;
            if state.shut_down {
                return Err(UpgradeError::new(name, UpgradeErrorKind::ShutDown));
            }
            let running = state
                .running
                .as_ref()
                .is_some_and(|r| r.ended.borrow().is_none());
            if !running {
                // Checked as far as it can be without running it; its next start runs it.
                let options = &self.inner.options;
                let checked = launch(
                    &version.manifest,
                    &options.grants,
                    &*options.secrets,
                    &*options.config,
                );
                // The builder is only the proof that the manifest can be launched.
                drop(checked.map_err(not_started)?);
                state.version = Arc::clone(version);
                state.crashes.clear();
                return Ok(UpgradeReport {
                    plugin: name.clone(),
                    new_pid: None,
                    start_duration: None,
                    old: OldInstance::NotRunning,
                });
            }
        }
        let began = Instant::now();
        let client = self
            .start_measured(slot, version)
            .await
            .map_err(not_started)?;
        let start_duration = began.elapsed();
        let mut state = slot.state.lock().await;
        if state.shut_down {
            drop(state);
            if let Err(e) = client.shutdown().await {
                tracing::warn!(plugin = name, error = %e, "stopping the new instance failed");
            }
            return Err(UpgradeError::new(name, UpgradeErrorKind::ShutDown));
        }
        let running = self.run(slot, Arc::clone(version), client);
        state.version = Arc::clone(version);
        state.crashes.clear();
        state.restart_due = false;
        let old = state
            .running
            .replace(Arc::clone(&running))
            .filter(|r| r.ended.borrow().is_none());
        if let Some(old) = &old {
            state.draining.push(Arc::clone(old));
        }
        drop(state);
        let old = match old {
            Some(old) => {
                let outcome = drain(name, &old, self.inner.options.upgrade_grace).await;
                let mut state = slot.state.lock().await;
                state.draining.retain(|r| !Arc::ptr_eq(r, &old));
                outcome
            }
            None => OldInstance::NotRunning,
        };
        Ok(UpgradeReport {
            plugin: name.clone(),
            new_pid: Some(running.pid),
            start_duration: Some(start_duration),
            old,
        })
    }
}

/// Waits until `old`'s leases are all released or `grace` runs out, then stops it; or returns
/// when it ends by itself first.
async fn drain(plugin: &str, old: &Running, grace: Duration) -> OldInstance {
    let pid = old.pid;
    let switched = Instant::now();
    let mut leases = old.leases.subscribe();
    let mut ended = old.ended.subscribe();
    let released = tokio::time::timeout(grace, async {
        tokio::select! {
            _ = leases.wait_for(|held| *held == 0) => true,
            _ = ended.wait_for(Option::is_some) => false,
        }
    })
    .await;
    let outcome = match released {
        Ok(false) => return OldInstance::Ended { pid },
        Ok(true) => OldInstance::Drained {
            pid,
            waited: switched.elapsed(),
        },
        Err(_elapsed) => OldInstance::GraceExpired {
            pid,
            leases: *old.leases.borrow(),
        },
    };
    old.process_ended();
    stop(plugin, old, Ended::Replaced(grace)).await;
    outcome
}
