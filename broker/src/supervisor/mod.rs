//! The lazy lifecycle: a [`Supervisor`] starts a catalog's plugins on first use, stops them when
//! idle, notices crashes and hangs, and restarts with exponential backoff.

pub(crate) mod builder;
mod calls;
pub(crate) mod error;
pub(crate) mod launch;
pub(crate) mod lease;
mod reload;
mod restart;
pub(crate) mod supervision;
mod upgrade;
mod version;

use std::collections::{BTreeMap, VecDeque};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use tether_transport::internal::lock;

use tether_transport::telemetry::TracedChannel;
use tokio::sync::{Mutex, Notify, watch};

use crate::launch::client::PluginClient;
use crate::supervisor::error::{UseError, UseErrorKind};
use crate::telemetry::metrics::StartOutcome;
use builder::Options;
pub use builder::SupervisorBuilder;
pub use launch::launch;
use lease::lease;
pub use lease::{
    CRASH_SETTLE_TIMEOUT, CRASH_STDERR_TIMEOUT, DEFAULT_CALL_TIMEOUT,
    DEFAULT_RECYCLE_AFTER_DEADLINES, Lease,
};
pub use reload::{ReloadReport, Unchanged};
pub use supervision::{DEFAULT_HEALTH_INTERVAL, DEFAULT_HUNG_TIMEOUT};
use supervision::{stop, supervise};
pub use upgrade::{DEFAULT_UPGRADE_GRACE, OldInstance, UpgradeReport};
use version::Version;

/// Runs a catalog's plugins lazily: a plugin starts on its first use ([`Supervisor::acquire`]),
/// concurrent first uses share one start, it stops after its manifest's idle timeout, and it is
/// restarted after a crash (with exponential backoff, up to the manifest's limit). A running
/// plugin is replaced by a new version without a failed call with [`Supervisor::upgrade`]
/// (or [`Supervisor::reload`] for a whole catalog).
///
/// ```no_run
/// # mod kv { pub mod kv_client { pub struct KvClient<T>(T); impl<T> KvClient<T> { pub fn new(t: T) -> Self { Self(t) } pub async fn get(&mut self, _: super::GetRequest) -> Result<tonic::Response<Vec<u8>>, tonic::Status> { unimplemented!() } } } pub struct GetRequest { pub key: String } }
/// use tether_broker::{Supervisor, Catalog, DirValueSource, Grants};
///
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let catalog = Catalog::load_dir("/etc/tether/plugins".as_ref())?;
/// let supervisor = Supervisor::builder(catalog, "/var/lib/tether/state")
///     .grants(Grants::load("/etc/tether/grants.toml".as_ref())?)
///     .secrets(DirValueSource::new("/run/secrets"))
///     .build();
/// // Starts `kv` (only `kv`) now; fails fast with a typed error if it crashes mid-call.
/// let kv = supervisor.acquire("kv").await?;
/// let value = kv
///     .call(|channel| async move {
///         kv::kv_client::KvClient::new(channel)
///             .get(kv::GetRequest { key: "a".into() })
///             .await
///     })
///     .await?;
/// drop(kv); // idle from now on; stopped after the manifest's idle timeout
/// supervisor.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Supervisor {
    inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) slots: BTreeMap<String, Arc<Slot>>,
    pub(super) options: Options,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("plugins", &self.slots.len())
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub(super) struct Slot {
    /// The plugin's name (every version's manifest has it).
    pub(super) name: String,
    pub(super) state: Mutex<SlotState>,
    pub(super) starts: AtomicU64,
    /// Held by an upgrade from its start to its end: one upgrade of a plugin at a time.
    pub(super) upgrading: Mutex<()>,
}

#[derive(Debug)]
pub(super) struct SlotState {
    /// The version a start runs: replaced by an upgrade.
    pub(super) version: Arc<Version>,
    pub(super) running: Option<Arc<Running>>,
    /// Instances an upgrade replaced, finishing their leases' calls (up to the grace).
    pub(super) draining: Vec<Arc<Running>>,
    pub(super) crashes: VecDeque<Crash>,
    pub(super) shut_down: bool,
    /// The last run crashed or hung: the next successful start is a restart.
    pub(super) restart_due: bool,
}

#[derive(Debug, Clone)]
pub(super) struct Crash {
    pub(super) at: Instant,
    pub(super) status: ExitStatus,
    pub(super) stderr_tail: String,
}

/// How a running plugin ended.
#[derive(Debug, Clone)]
pub(super) enum Ended {
    Crashed(ExitStatus, String),
    Hung(String),
    Stopped,
    /// Replaced by an upgrade and stopped with leases still held after this grace.
    Replaced(Duration),
}

#[derive(Debug)]
pub(super) struct Running {
    /// The version this instance runs.
    pub(super) version: Arc<Version>,
    pub(super) client: StdMutex<Option<PluginClient>>,
    pub(super) channel: TracedChannel,
    /// The plugin's callback broker (closed when the plugin ends).
    pub(super) broker: crate::callbacks::GrpcBroker,
    pub(super) pid: u32,
    pub(super) process_limit: crate::confine::ProcessLimit,
    pub(super) world: crate::confine::WorldMechanism,
    pub(super) leases: watch::Sender<usize>,
    pub(super) last_release: StdMutex<Instant>,
    pub(super) ended: watch::Sender<Option<Ended>>,
    pub(super) call_timeout: Duration,
    pub(super) recycle_after_deadlines: u32,
    /// Calls in a row that ran out their deadline.
    pub(super) deadlines_in_a_row: AtomicU32,
    /// Tells the supervisor to kill the plugin as hung.
    pub(super) recycle: Notify,
}

impl Running {
    pub(super) fn take_client(&self) -> Option<PluginClient> {
        lock(&self.client).take()
    }

    /// Tells the metrics this instance's process ended (a newer instance's stays observed).
    pub(super) fn process_ended(&self) {
        if let Some(metrics) = &self.version.metrics {
            metrics.process_ended_of(self.pid);
        }
    }
}

impl Supervisor {
    /// The plugin `name`, started if it is not running (once, however many callers ask at the
    /// same time).
    ///
    /// # Errors
    /// A [`UseError`]: unknown plugin, request not granted, missing secret, failed start, or
    /// [`KeepsCrashing`](UseErrorKind::KeepsCrashing). After a crash this waits out the backoff.
    pub async fn acquire(&self, name: &str) -> Result<Lease, UseError> {
        let slot = self
            .inner
            .slots
            .get(name)
            .ok_or_else(|| UseError::new(name, UseErrorKind::UnknownPlugin))?;
        let mut state = slot.state.lock().await;
        if state.shut_down {
            return Err(UseError::new(name, UseErrorKind::ShutDown));
        }
        if let Some(running) = &state.running
            && running.ended.borrow().is_none()
        {
            return Ok(lease(name, running));
        }
        state.running = None;
        self.wait_for_restart(slot, &mut state).await?;
        let version = Arc::clone(&state.version);
        let client = self.start_measured(slot, &version).await?;
        if std::mem::take(&mut state.restart_due)
            && let Some(metrics) = &version.metrics
        {
            metrics.restarted();
        }
        let running = self.run(slot, version, client);
        state.running = Some(Arc::clone(&running));
        Ok(lease(name, &running))
    }

    /// Starts `version` of `slot`'s plugin, measuring the start.
    pub(super) async fn start_measured(
        &self,
        slot: &Slot,
        version: &Version,
    ) -> Result<PluginClient, UseError> {
        let started = Instant::now();
        let client = self.start(version).await;
        if let Some(metrics) = &version.metrics {
            let outcome = match &client {
                Ok(_) => StartOutcome::Success,
                Err(_) => StartOutcome::Failure,
            };
            metrics.start_ended(outcome, started.elapsed());
        }
        if client.is_ok() {
            slot.starts.fetch_add(1, Ordering::Relaxed);
        }
        client
    }

    /// The running instance of `version` that `client` is, supervised from now on.
    pub(super) fn run(
        &self,
        slot: &Arc<Slot>,
        version: Arc<Version>,
        client: PluginClient,
    ) -> Arc<Running> {
        if let Some(metrics) = &version.metrics
            && version.manifest.runner.name() != "kubernetes"
        {
            let cgroup = match client.process_limit() {
                crate::confine::ProcessLimit::Cgroup { dir, .. } => Some(dir.clone()),
                _ => None,
            };
            metrics.process_started(client.pid(), cgroup);
        }
        let running = Arc::new(Running {
            version,
            pid: client.pid(),
            process_limit: client.process_limit().clone(),
            world: client.world_mechanism(),
            channel: client.channel(),
            broker: client.broker(),
            client: StdMutex::new(Some(client)),
            leases: watch::Sender::new(0),
            last_release: StdMutex::new(Instant::now()),
            ended: watch::Sender::new(None),
            call_timeout: self.inner.options.call_timeout,
            recycle_after_deadlines: self.inner.options.recycle_after_deadlines,
            deadlines_in_a_row: AtomicU32::new(0),
            recycle: Notify::new(),
        });
        tokio::spawn(supervise(
            Arc::clone(&self.inner),
            Arc::clone(slot),
            Arc::clone(&running),
        ));
        running
    }

    /// How many times plugin `name` has been started by this supervisor.
    #[must_use]
    pub fn starts(&self, name: &str) -> u64 {
        self.inner
            .slots
            .get(name)
            .map_or(0, |s| s.starts.load(Ordering::Relaxed))
    }

    /// The pid of plugin `name` if it is running.
    pub async fn pid(&self, name: &str) -> Option<u32> {
        let slot = self.inner.slots.get(name)?;
        let state = slot.state.lock().await;
        state
            .running
            .as_ref()
            .filter(|r| r.ended.borrow().is_none())
            .map(|r| r.pid)
    }

    /// Stops every running plugin gracefully; later `acquire`s fail with
    /// [`UseErrorKind::ShutDown`].
    pub async fn shutdown(&self) {
        for slot in self.inner.slots.values() {
            let (running, draining) = {
                let mut state = slot.state.lock().await;
                state.shut_down = true;
                (state.running.take(), std::mem::take(&mut state.draining))
            };
            for running in running.into_iter().chain(draining) {
                running.process_ended();
                stop(&slot.name, &running, Ended::Stopped).await;
            }
        }
    }
}
