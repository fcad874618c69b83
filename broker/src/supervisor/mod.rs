//! The lazy lifecycle: a [`Broker`] starts a catalog's plugins on first use, stops them when
//! idle, notices crashes and hangs, and restarts with exponential backoff.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, Notify, watch};
use tonic::transport::Channel;

use crate::catalog::Catalog;
use crate::catalog::delivery::Delivery;
use crate::catalog::grants::{Grants, NotGranted};
use crate::catalog::manifest::Manifest;
use crate::catalog::secrets::{MemorySecretSource, SecretSource};
use crate::launch::builder::{HandshakeConfig, PluginClientBuilder};
use crate::launch::client::PluginClient;
use crate::launch::error::StartError;
use crate::launch::health::{self, HealthFailure};

/// How often a running plugin's health is checked. Override with
/// [`BrokerBuilder::health_interval`].
pub const DEFAULT_HEALTH_INTERVAL: Duration = Duration::from_secs(10);

/// How long a periodic health check may take before the plugin counts as hung and is killed.
/// Override with [`BrokerBuilder::health_timeout`].
pub const DEFAULT_HUNG_TIMEOUT: Duration = Duration::from_secs(5);

/// After a call fails, how long to wait for the plugin's exit to be noticed before reporting the
/// call's own error instead of a crash. Longer than [`CRASH_STDERR_TIMEOUT`].
pub const CRASH_SETTLE_TIMEOUT: Duration = Duration::from_secs(1);

/// After a crash, how long to wait for the last bytes of the plugin's stderr before reporting
/// the crash with the tail read so far.
pub const CRASH_STDERR_TIMEOUT: Duration = Duration::from_millis(300);

/// How long [`Lease::call`] waits for a call's answer before failing it with
/// [`UseError::DeadlineExceeded`]. A host-side deadline: it holds even when the plugin ignores
/// the gRPC deadline (`grpc-timeout`) a request carries. Give a call a shorter deadline with
/// [`tonic::Request::set_timeout`]; override for all calls with [`BrokerBuilder::call_timeout`].
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The recycling policy for hung handlers: after this many calls in a row on one plugin process
/// ran out their deadline — [`DEFAULT_CALL_TIMEOUT`] (or [`BrokerBuilder::call_timeout`]), or
/// a gRPC status `DEADLINE_EXCEEDED` (grpc-go) or `CANCELLED: Timeout expired` (tonic) — the
/// plugin counts as hung: it is killed (its whole process group) and started afresh on the next
/// [`Broker::acquire`]. A call that ends any other way resets the count. Health checks cannot
/// see this kind of hang: the health service answers while a handler is stuck. Override with
/// [`BrokerBuilder::recycle_after_deadlines`] (`0` never recycles).
pub const DEFAULT_RECYCLE_AFTER_DEADLINES: u32 = 3;

/// Why a plugin could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UseError {
    /// No plugin of that name loaded from the catalog.
    #[error(
        "no plugin named `{plugin}` in the catalog; check its manifest (bad manifests are listed by `Catalog::errors`)"
    )]
    UnknownPlugin {
        /// The name asked for.
        plugin: String,
    },
    /// The manifest asks for a secret or config file that is not granted.
    #[error(transparent)]
    NotGranted(#[from] NotGranted),
    /// A granted value is not in its source.
    #[error(
        "plugin `{plugin}` needs {kind} `{name}`, but the {kind} source ({source_name}) has no value of that name; add it there"
    )]
    MissingValue {
        /// The plugin.
        plugin: String,
        /// `secret` or `config`.
        kind: &'static str,
        /// The name.
        name: String,
        /// The source's description.
        source_name: String,
    },
    /// A value source could not be read.
    #[error("cannot read {kind} `{name}` for plugin `{plugin}`: {source}")]
    Source {
        /// The plugin.
        plugin: String,
        /// `secret` or `config`.
        kind: &'static str,
        /// The name.
        name: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The plugin's state (working) directory cannot be made.
    #[error("cannot create the state directory {} of plugin `{plugin}`: {source}", path.display())]
    StateDir {
        /// The plugin.
        plugin: String,
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Starting the plugin failed.
    #[error(transparent)]
    Start(#[from] Box<StartError>),
    /// The plugin exited while in use.
    #[error(
        "plugin `{plugin}` crashed ({status}); calls in flight failed. stderr (tail): {stderr_tail:?}. It is restarted on the next use"
    )]
    Crashed {
        /// The plugin.
        plugin: String,
        /// Its exit status (code or signal).
        status: ExitStatus,
        /// The end of what it wrote to stderr.
        stderr_tail: String,
    },
    /// The plugin stopped answering health checks and was killed.
    #[error(
        "plugin `{plugin}` hung ({reason}) and was killed; calls in flight failed. It is restarted on the next use"
    )]
    Hung {
        /// The plugin.
        plugin: String,
        /// What the health check saw.
        reason: String,
    },
    /// The call got no answer within the host-side call timeout ([`DEFAULT_CALL_TIMEOUT`]).
    #[error(
        "plugin `{plugin}` did not answer within {timeout:?}{}",
        if *recycled { "; its calls keep running out their deadline, so it was killed and is restarted on the next use" } else { "; the call was abandoned (raise `call_timeout` if the call is legitimately slow)" }
    )]
    DeadlineExceeded {
        /// The plugin.
        plugin: String,
        /// The call timeout that ran out.
        timeout: Duration,
        /// Whether this call completed the run of deadlines after which the plugin is recycled
        /// ([`DEFAULT_RECYCLE_AFTER_DEADLINES`]).
        recycled: bool,
    },
    /// The plugin crashed too often: it is not restarted.
    #[error(
        "plugin `{plugin}` keeps crashing: {crashes} crashes within {window:?} (the manifest allows {max_restarts} restarts); last exit {last_status}, stderr (tail): {stderr_tail:?}. Fix the plugin; it is restarted once its crashes are older than {window:?}"
    )]
    KeepsCrashing {
        /// The plugin.
        plugin: String,
        /// Recent crashes.
        crashes: usize,
        /// The restart window.
        window: Duration,
        /// The restarts the manifest allows.
        max_restarts: u32,
        /// The last crash's exit status.
        last_status: ExitStatus,
        /// The end of its stderr then.
        stderr_tail: String,
    },
    /// The call failed while the plugin kept running: the plugin's own answer.
    #[error("plugin `{plugin}` answered with an error: {status}")]
    Call {
        /// The plugin.
        plugin: String,
        /// The gRPC status.
        status: Box<tonic::Status>,
    },
    /// The broker was shut down.
    #[error("the broker is shut down; plugin `{plugin}` cannot be used")]
    ShutDown {
        /// The plugin.
        plugin: String,
    },
}

type Customize = dyn Fn(PluginClientBuilder<HandshakeConfig>) -> PluginClientBuilder<HandshakeConfig>
    + Send
    + Sync;

/// Configures a [`Broker`]; made by [`Broker::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct BrokerBuilder {
    catalog: Catalog,
    grants: Grants,
    secrets: Arc<dyn SecretSource>,
    config: Arc<dyn SecretSource>,
    state_dir: PathBuf,
    health_interval: Duration,
    health_timeout: Duration,
    call_timeout: Duration,
    recycle_after_deadlines: u32,
    customize: Option<Arc<Customize>>,
}

impl std::fmt::Debug for BrokerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerBuilder")
            .field("plugins", &self.catalog.len())
            .field("state_dir", &self.state_dir)
            .finish_non_exhaustive()
    }
}

impl BrokerBuilder {
    /// The grants (default: nothing granted).
    pub fn grants(mut self, grants: Grants) -> Self {
        self.grants = grants;
        self
    }

    /// Where secret values come from (default: an empty in-memory source).
    pub fn secrets(mut self, source: impl SecretSource + 'static) -> Self {
        self.secrets = Arc::new(source);
        self
    }

    /// Where config file contents come from (default: an empty in-memory source).
    pub fn config_source(mut self, source: impl SecretSource + 'static) -> Self {
        self.config = Arc::new(source);
        self
    }

    /// See [`DEFAULT_HEALTH_INTERVAL`].
    pub fn health_interval(mut self, interval: Duration) -> Self {
        self.health_interval = interval;
        self
    }

    /// See [`DEFAULT_HUNG_TIMEOUT`].
    pub fn health_timeout(mut self, timeout: Duration) -> Self {
        self.health_timeout = timeout;
        self
    }

    /// See [`DEFAULT_CALL_TIMEOUT`].
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// See [`DEFAULT_RECYCLE_AFTER_DEADLINES`]; `0` never recycles.
    pub fn recycle_after_deadlines(mut self, calls: u32) -> Self {
        self.recycle_after_deadlines = calls;
        self
    }

    /// Adjusts every launch's [`PluginClientBuilder`] (timeouts, runtime directory…) after the
    /// manifest has been applied.
    pub fn customize(
        mut self,
        f: impl Fn(PluginClientBuilder<HandshakeConfig>) -> PluginClientBuilder<HandshakeConfig>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.customize = Some(Arc::new(f));
        self
    }

    /// Builds the broker. Nothing is started until first use.
    pub fn build(self) -> Broker {
        let slots = self
            .catalog
            .manifests()
            .map(|m| {
                (
                    m.name.clone(),
                    Arc::new(Slot {
                        manifest: m.clone(),
                        state: Mutex::new(SlotState::default()),
                        starts: AtomicU64::new(0),
                    }),
                )
            })
            .collect();
        Broker {
            inner: Arc::new(Inner {
                slots,
                grants: self.grants,
                secrets: self.secrets,
                config: self.config,
                state_dir: self.state_dir,
                health_interval: self.health_interval,
                health_timeout: self.health_timeout,
                call_timeout: self.call_timeout,
                recycle_after_deadlines: self.recycle_after_deadlines,
                customize: self.customize,
            }),
        }
    }
}

/// Runs a catalog's plugins lazily: a plugin starts on its first use ([`Broker::acquire`]),
/// concurrent first uses share one start, it stops after its manifest's idle timeout, and it is
/// restarted after a crash (with exponential backoff, up to the manifest's limit).
///
/// ```no_run
/// # mod kv { pub mod kv_client { pub struct KvClient<T>(T); impl<T> KvClient<T> { pub fn new(t: T) -> Self { Self(t) } pub async fn get(&mut self, _: super::GetRequest) -> Result<tonic::Response<Vec<u8>>, tonic::Status> { unimplemented!() } } } pub struct GetRequest { pub key: String } }
/// use tether_broker::{Broker, Catalog, DirSecretSource, Grants};
///
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let catalog = Catalog::load_dir("/etc/tether/plugins".as_ref())?;
/// let broker = Broker::builder(catalog, "/var/lib/tether/state")
///     .grants(Grants::load("/etc/tether/grants.toml".as_ref())?)
///     .secrets(DirSecretSource::new("/run/secrets"))
///     .build();
/// // Starts `kv` (only `kv`) now; fails fast with a typed error if it crashes mid-call.
/// let kv = broker.acquire("kv").await?;
/// let value = kv
///     .call(|channel| async move {
///         kv::kv_client::KvClient::new(channel)
///             .get(kv::GetRequest { key: "a".into() })
///             .await
///     })
///     .await?;
/// drop(kv); // idle from now on; stopped after the manifest's idle timeout
/// broker.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Broker {
    inner: Arc<Inner>,
}

struct Inner {
    slots: BTreeMap<String, Arc<Slot>>,
    grants: Grants,
    secrets: Arc<dyn SecretSource>,
    config: Arc<dyn SecretSource>,
    state_dir: PathBuf,
    health_interval: Duration,
    health_timeout: Duration,
    call_timeout: Duration,
    recycle_after_deadlines: u32,
    customize: Option<Arc<Customize>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("plugins", &self.slots.len())
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Slot {
    manifest: Manifest,
    state: Mutex<SlotState>,
    starts: AtomicU64,
}

#[derive(Debug, Default)]
struct SlotState {
    running: Option<Arc<Running>>,
    crashes: VecDeque<Crash>,
    shut_down: bool,
}

#[derive(Debug, Clone)]
struct Crash {
    at: Instant,
    status: ExitStatus,
    stderr_tail: String,
}

/// How a running plugin ended.
#[derive(Debug, Clone)]
enum Ended {
    Crashed(ExitStatus, String),
    Hung(String),
    Stopped,
}

#[derive(Debug)]
struct Running {
    client: StdMutex<Option<PluginClient>>,
    channel: Channel,
    pid: u32,
    process_limit: crate::ProcessLimit,
    leases: watch::Sender<usize>,
    last_release: StdMutex<Instant>,
    ended: watch::Sender<Option<Ended>>,
    call_timeout: Duration,
    recycle_after_deadlines: u32,
    /// Calls in a row that ran out their deadline.
    deadlines_in_a_row: AtomicU32,
    /// Tells the supervisor to kill the plugin as hung.
    recycle: Notify,
}

impl Running {
    fn take_client(&self) -> Option<PluginClient> {
        self.client
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// One use of a running plugin: keeps it from being stopped as idle while held.
#[derive(Debug)]
pub struct Lease {
    plugin: String,
    channel: Channel,
    pid: u32,
    running: Arc<Running>,
}

impl Broker {
    /// A broker for `catalog`; each plugin's working (state) directory is
    /// `state_dir/<plugin name>`, created on first start (mode `0700`).
    pub fn builder(catalog: Catalog, state_dir: impl Into<PathBuf>) -> BrokerBuilder {
        BrokerBuilder {
            catalog,
            grants: Grants::new(),
            secrets: Arc::new(MemorySecretSource::new()),
            config: Arc::new(MemorySecretSource::new()),
            state_dir: state_dir.into(),
            health_interval: DEFAULT_HEALTH_INTERVAL,
            health_timeout: DEFAULT_HUNG_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            recycle_after_deadlines: DEFAULT_RECYCLE_AFTER_DEADLINES,
            customize: None,
        }
    }

    /// The plugin `name`, started if it is not running (once, however many callers ask at the
    /// same time).
    ///
    /// # Errors
    /// A [`UseError`]: unknown plugin, request not granted, missing secret, failed start, or
    /// [`KeepsCrashing`](UseError::KeepsCrashing). After a crash this waits out the backoff.
    pub async fn acquire(&self, name: &str) -> Result<Lease, UseError> {
        let slot = self
            .inner
            .slots
            .get(name)
            .ok_or_else(|| UseError::UnknownPlugin {
                plugin: name.to_owned(),
            })?;
        let mut state = slot.state.lock().await;
        if state.shut_down {
            return Err(UseError::ShutDown {
                plugin: name.to_owned(),
            });
        }
        if let Some(running) = &state.running
            && running.ended.borrow().is_none()
        {
            return Ok(lease(name, running));
        }
        state.running = None;
        self.wait_for_restart(slot, &mut state).await?;
        let client = self.start(&slot.manifest).await?;
        slot.starts.fetch_add(1, Ordering::Relaxed);
        let running = Arc::new(Running {
            pid: client.pid(),
            process_limit: client.process_limit().clone(),
            channel: client.channel(),
            client: StdMutex::new(Some(client)),
            leases: watch::Sender::new(0),
            last_release: StdMutex::new(Instant::now()),
            ended: watch::Sender::new(None),
            call_timeout: self.inner.call_timeout,
            recycle_after_deadlines: self.inner.recycle_after_deadlines,
            deadlines_in_a_row: AtomicU32::new(0),
            recycle: Notify::new(),
        });
        state.running = Some(Arc::clone(&running));
        let lease = lease(name, &running);
        tokio::spawn(supervise(
            Arc::clone(&self.inner),
            Arc::clone(slot),
            running,
        ));
        Ok(lease)
    }

    /// How many times plugin `name` has been started by this broker.
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
    /// [`UseError::ShutDown`].
    pub async fn shutdown(&self) {
        for slot in self.inner.slots.values() {
            let running = {
                let mut state = slot.state.lock().await;
                state.shut_down = true;
                state.running.take()
            };
            if let Some(running) = running {
                stop(&slot.manifest.name, &running, Ended::Stopped).await;
            }
        }
    }

    async fn wait_for_restart(&self, slot: &Slot, state: &mut SlotState) -> Result<(), UseError> {
        let policy = slot.manifest.restart;
        let now = Instant::now();
        while state
            .crashes
            .front()
            .is_some_and(|c| now.duration_since(c.at) > policy.window)
        {
            state.crashes.pop_front();
        }
        let Some(last) = state.crashes.back().cloned() else {
            return Ok(());
        };
        let crashes = state.crashes.len();
        if crashes > usize::try_from(policy.max_restarts).unwrap_or(usize::MAX) {
            return Err(UseError::KeepsCrashing {
                plugin: slot.manifest.name.clone(),
                crashes,
                window: policy.window,
                max_restarts: policy.max_restarts,
                last_status: last.status,
                stderr_tail: last.stderr_tail,
            });
        }
        let backoff = policy.backoff(u32::try_from(crashes).unwrap_or(u32::MAX));
        let wait = backoff.saturating_sub(last.at.elapsed());
        if !wait.is_zero() {
            tracing::info!(plugin = %slot.manifest.name, ?wait, crashes, "restarting a crashed plugin after backoff");
            tokio::time::sleep(wait).await;
        }
        Ok(())
    }

    async fn start(&self, manifest: &Manifest) -> Result<PluginClient, UseError> {
        let inner = &self.inner;
        let plugin = &manifest.name;
        inner.grants.check(manifest)?;
        let mut delivery = Delivery::new();
        for (kind, names, source) in [
            ("secret", &manifest.secrets, &inner.secrets),
            ("config", &manifest.config, &inner.config),
        ] {
            for name in names {
                let value = source
                    .fetch(name)
                    .map_err(|source| UseError::Source {
                        plugin: plugin.clone(),
                        kind,
                        name: name.clone(),
                        source,
                    })?
                    .ok_or_else(|| UseError::MissingValue {
                        plugin: plugin.clone(),
                        kind,
                        name: name.clone(),
                        source_name: source.describe(),
                    })?;
                delivery = if kind == "secret" {
                    delivery.secret(name.clone(), value)
                } else {
                    delivery.config(name.clone(), value)
                };
            }
        }
        let state_dir = inner.state_dir.join(plugin);
        {
            use std::os::unix::fs::DirBuilderExt as _;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&state_dir)
                .map_err(|source| UseError::StateDir {
                    plugin: plugin.clone(),
                    path: state_dir.clone(),
                    source,
                })?;
        }
        let mut builder = PluginClient::builder(&manifest.command)
            .name(plugin.clone())
            .args(&manifest.args)
            .current_dir(&state_dir)
            .sandbox(manifest.sandbox)
            .limits(manifest.limits)
            .deliver(delivery)
            .handshake(
                HandshakeConfig::new(&manifest.cookie_key, &manifest.cookie_value)
                    .app_versions(manifest.app_versions.iter().copied()),
            );
        for name in &manifest.env_allow {
            builder = builder.env_allow(name);
        }
        for path in &manifest.sandbox_allow_exec {
            builder = builder.sandbox_allow_exec(path);
        }
        for path in &manifest.sandbox_allow_read {
            builder = builder.sandbox_allow_read(path);
        }
        if let Some(hash) = &manifest.sha256 {
            builder = builder.sha256(hash.clone());
        }
        if let Some(customize) = &inner.customize {
            builder = customize(builder);
        }
        builder
            .start()
            .await
            .map_err(|e| UseError::Start(Box::new(e)))
    }
}

fn lease(plugin: &str, running: &Arc<Running>) -> Lease {
    running.leases.send_modify(|n| *n += 1);
    Lease {
        plugin: plugin.to_owned(),
        channel: running.channel.clone(),
        pid: running.pid,
        running: Arc::clone(running),
    }
}

impl Lease {
    /// The gRPC channel to the plugin. Prefer [`call`](Self::call), which turns a crash during
    /// the call into [`UseError::Crashed`].
    #[must_use]
    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }

    /// The plugin's process id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// What limits the number of the plugin's processes (see
    /// [`PluginClient::process_limit`](crate::PluginClient::process_limit)).
    #[must_use]
    pub fn process_limit(&self) -> &crate::ProcessLimit {
        &self.running.process_limit
    }

    /// Runs one call (`f` gets the channel); if the plugin crashes or hangs meanwhile the call
    /// fails at once with [`UseError::Crashed`] (exit status or signal and the tail of its
    /// stderr) or [`UseError::Hung`]. `f` may hold a whole streaming conversation (open the
    /// stream, read and write it, return the result): a crash ends it the same way.
    ///
    /// The call may take [`DEFAULT_CALL_TIMEOUT`] (see [`BrokerBuilder::call_timeout`]); calls
    /// that keep running out their deadline get the plugin recycled
    /// ([`DEFAULT_RECYCLE_AFTER_DEADLINES`]).
    ///
    /// # Errors
    /// As described, [`UseError::DeadlineExceeded`], or [`UseError::Call`] with the plugin's
    /// own error status.
    pub async fn call<T, F, Fut>(&self, f: F) -> Result<T, UseError>
    where
        F: FnOnce(Channel) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let mut ended = self.running.ended.subscribe();
        let timeout = self.running.call_timeout;
        let result = tokio::select! {
            biased;
            result = tokio::time::timeout(timeout, f(self.channel.clone())) => result,
            Ok(end) = ended.wait_for(Option::is_some) => {
                return Err(self.ended_error(end.clone()));
            }
        };
        let result = match result {
            Ok(result) => result,
            Err(_elapsed) => {
                let recycled = self.count_deadline(true);
                return Err(UseError::DeadlineExceeded {
                    plugin: self.plugin.clone(),
                    timeout,
                    recycled,
                });
            }
        };
        match result {
            Ok(response) => {
                self.count_deadline(false);
                Ok(response.into_inner())
            }
            Err(status) => {
                if self.count_deadline(ran_out_of_time(&status)) {
                    return Err(UseError::Call {
                        plugin: self.plugin.clone(),
                        status: Box::new(status),
                    });
                }
                // A transport error may arrive before the exit is noticed.
                let end =
                    tokio::time::timeout(CRASH_SETTLE_TIMEOUT, ended.wait_for(Option::is_some))
                        .await;
                match end {
                    Ok(Ok(end)) => Err(self.ended_error(end.clone())),
                    _ => Err(UseError::Call {
                        plugin: self.plugin.clone(),
                        status: Box::new(status),
                    }),
                }
            }
        }
    }

    /// Counts a call that ran out of time (`true`) or resets the count; whether this call
    /// completed the run after which the plugin is recycled.
    fn count_deadline(&self, ran_out: bool) -> bool {
        let running = &self.running;
        if !ran_out {
            running.deadlines_in_a_row.store(0, Ordering::Relaxed);
            return false;
        }
        let in_a_row = running.deadlines_in_a_row.fetch_add(1, Ordering::Relaxed) + 1;
        let recycle =
            running.recycle_after_deadlines > 0 && in_a_row == running.recycle_after_deadlines;
        if recycle {
            tracing::warn!(
                plugin = self.plugin,
                in_a_row,
                "calls keep running out their deadline; recycling the plugin"
            );
            running.recycle.notify_one();
        }
        recycle
    }

    fn ended_error(&self, ended: Option<Ended>) -> UseError {
        let plugin = self.plugin.clone();
        match ended {
            Some(Ended::Crashed(status, stderr_tail)) => UseError::Crashed {
                plugin,
                status,
                stderr_tail,
            },
            Some(Ended::Hung(reason)) => UseError::Hung { plugin, reason },
            Some(Ended::Stopped) | None => UseError::ShutDown { plugin },
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        *self
            .running
            .last_release
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        self.running
            .leases
            .send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Watches one running plugin until it crashes, hangs or idles out.
async fn supervise(inner: Arc<Inner>, slot: Arc<Slot>, running: Arc<Running>) {
    let plugin = slot.manifest.name.clone();
    let Some(exited) = running
        .client
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .map(PluginClient::exited)
    else {
        return;
    };
    tokio::pin!(exited);
    let mut leases = running.leases.subscribe();
    let mut health = tokio::time::interval(inner.health_interval);
    health.tick().await; // The first tick is immediate; the start just checked health.
    let idle_timeout = slot.manifest.idle_timeout;
    loop {
        let idle_deadline = {
            let in_use = *leases.borrow_and_update() > 0;
            (!in_use).then(|| {
                *running
                    .last_release
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    + idle_timeout
            })
        };
        tokio::select! {
            status = &mut exited => {
                if running.ended.borrow().is_some() {
                    return; // We ended it.
                }
                let Some(client) = running.take_client() else {
                    return; // Being ended by a shutdown.
                };
                let stderr_tail = client.final_stderr_tail(CRASH_STDERR_TIMEOUT).await;
                tracing::warn!(plugin, %status, stderr_tail, "plugin crashed");
                let mut state = slot.state.lock().await;
                state.crashes.push_back(Crash { at: Instant::now(), status, stderr_tail: stderr_tail.clone() });
                if state.running.as_ref().is_some_and(|r| Arc::ptr_eq(r, &running)) {
                    state.running = None;
                }
                drop(state);
                running.ended.send_replace(Some(Ended::Crashed(status, stderr_tail)));
                drop(client);
                return;
            }
            _ = health.tick() => {
                let Err(failure) = health::check(running.channel.clone(), inner.health_timeout).await else {
                    continue;
                };
                let exited_meanwhile = running
                    .client
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .as_ref()
                    .is_none_or(|c| c.exit_status().is_some());
                if exited_meanwhile {
                    continue; // A crash, not a hang: the exit branch reports it next.
                }
                let reason = match failure {
                    HealthFailure::Timeout => format!("no answer to a health check within {:?}", inner.health_timeout),
                    HealthFailure::Rpc(status) => format!("the health check failed: {status}"),
                    HealthFailure::NotServing(s) => format!("it reports {s}"),
                };
                kill_hung(&slot, &running, reason).await;
                return;
            }
            () = running.recycle.notified() => {
                let reason = format!(
                    "{} calls in a row ran out their deadline",
                    running.recycle_after_deadlines
                );
                kill_hung(&slot, &running, reason).await;
                return;
            }
            () = sleep_until_opt(idle_deadline) => {
                let mut state = slot.state.lock().await;
                if *leases.borrow() > 0 {
                    continue; // Acquired again meanwhile.
                }
                if state.running.as_ref().is_some_and(|r| Arc::ptr_eq(r, &running)) {
                    state.running = None;
                }
                drop(state);
                tracing::info!(plugin, ?idle_timeout, "stopping idle plugin");
                stop(&plugin, &running, Ended::Stopped).await;
                return;
            }
            Ok(()) = leases.changed() => {}
        }
    }
}

/// Whether `status` says the call ran out its deadline: `DEADLINE_EXCEEDED` (grpc-go and the
/// gRPC spec) or tonic's `CANCELLED: Timeout expired` (its server enforcing `grpc-timeout`).
fn ran_out_of_time(status: &tonic::Status) -> bool {
    match status.code() {
        tonic::Code::DeadlineExceeded => true,
        tonic::Code::Cancelled => status.message() == TONIC_TIMEOUT_MESSAGE,
        _ => false,
    }
}

/// The message of tonic's `TimeoutExpired` error, which its server and client turn into
/// `CANCELLED` when a `grpc-timeout` runs out.
const TONIC_TIMEOUT_MESSAGE: &str = "Timeout expired";

/// Ends a hung plugin: no new leases get it, calls in flight fail with [`UseError::Hung`], and
/// its process group is killed.
async fn kill_hung(slot: &Slot, running: &Arc<Running>, reason: String) {
    let plugin = &slot.manifest.name;
    tracing::warn!(plugin, reason, "plugin hung; killing it");
    {
        let mut state = slot.state.lock().await;
        if state
            .running
            .as_ref()
            .is_some_and(|r| Arc::ptr_eq(r, running))
        {
            state.running = None;
        }
    }
    running.ended.send_replace(Some(Ended::Hung(reason)));
    if let Some(client) = running.take_client()
        && let Err(e) = client.kill().await
    {
        tracing::warn!(plugin, error = %e, "killing the hung plugin failed");
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

async fn stop(plugin: &str, running: &Running, why: Ended) {
    running.ended.send_replace(Some(why));
    if let Some(client) = running.take_client()
        && let Err(e) = client.shutdown().await
    {
        tracing::warn!(plugin, error = %e, "stopping the plugin failed");
    }
}
