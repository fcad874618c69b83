//! The running plugin: [`PluginClient`].

use std::future::Future;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use tether_proto::handshake::Address;
use tether_transport::telemetry::{ServedCalls, TracedChannel};
use tether_transport::{BrokerMode, GrpcBroker, Mux};

use crate::confine::network::{NetworkMechanism, NetworkMode};
use crate::confine::pids::ProcessLimit;
use crate::confine::seccomp::SeccompMode;
use crate::confine::world::WorldMechanism;
use crate::launch::connect::Connected;
use crate::launch::error::{ShutdownError, ShutdownOutcome};
use crate::launch::launched::{InForce, Launched};
use crate::launch::output::{self, SharedTail};
use crate::launch::settings::Settings;
use crate::launch::shutdown::Graceful;

/// A running plugin, connected and healthy.
///
/// Make one with [`PluginClient::builder`]; talk to it through [`channel`](Self::channel);
/// end it with [`shutdown`](Self::shutdown) (or by dropping it, see below).
///
/// # Dropping
/// Dropping a running client sends `SIGTERM` to the plugin's process group and removes its
/// private directory at once (a few file-system calls), and leaves the rest — the terminate
/// grace, `SIGKILL` and reaping — to a small detached thread, so it never waits for the plugin
/// and never blocks the async runtime. Caveat: if the host process exits right after the drop,
/// that thread dies with it; the plugin got `SIGTERM`, but one that ignores it keeps running.
/// The same happens when a [`start`](crate::PluginClientBuilder::start) future is dropped part-way.
/// Call [`shutdown`](Self::shutdown) for a graceful, complete ending.
///
/// # Exit of the plugin
/// If the plugin exits on its own, [`is_running`](Self::is_running) turns `false`,
/// [`exited`](Self::exited) completes, whatever was left of its process group is killed, and
/// calls on the channel fail (reconnecting is refused).
#[derive(Debug)]
pub struct PluginClient {
    launched: Launched,
    /// The plugin's channel, traced; the untraced one underneath serves health and shutdown.
    channel: TracedChannel,
    broker: GrpcBroker,
    /// The multiplexed connection, when the broker mode is multiplexed.
    mux: Option<Mux>,
    app_version: u32,
    address: Address,
    peer_fingerprint: Option<String>,
    stderr_tail: SharedTail,
    stderr_done: tokio::sync::watch::Receiver<bool>,
    landlock_abi: Option<u32>,
    process_limit: ProcessLimit,
    network_mechanism: Option<NetworkMechanism>,
    world: WorldMechanism,
    ids: Option<(u32, u32)>,
    seccomp: SeccompMode,
    network: NetworkMode,
    run_as: Option<(u32, u32)>,
    shutdown_rpc_timeout: Duration,
    shutdown_grace: Duration,
}

impl PluginClient {
    /// The client of a plugin that `launched` and `connected` describe.
    pub(crate) fn new(
        launched: Launched,
        connected: Connected,
        stderr_tail: SharedTail,
        stderr_done: tokio::sync::watch::Receiver<bool>,
        in_force: InForce,
        settings: &Settings,
    ) -> Self {
        Self {
            channel: TracedChannel::for_calls(
                connected.channel,
                &ServedCalls {
                    plugin: Some(Arc::clone(&launched.plugin)),
                    metrics: settings.telemetry.call_metrics.clone(),
                    trace_context: settings.telemetry.trace_context,
                },
            ),
            launched,
            broker: connected.broker,
            mux: connected.mux,
            app_version: connected.app_version,
            address: connected.address,
            peer_fingerprint: connected.peer_fingerprint,
            stderr_tail,
            stderr_done,
            landlock_abi: in_force.landlock_abi,
            process_limit: in_force.process_limit,
            network_mechanism: in_force.network_mechanism,
            world: in_force.world,
            ids: in_force.ids,
            seccomp: settings.confinement.seccomp,
            network: settings.confinement.network,
            run_as: settings.confinement.run_as,
            shutdown_rpc_timeout: settings.timeouts.shutdown_rpc,
            shutdown_grace: settings.timeouts.shutdown_grace,
        }
    }

    /// The gRPC channel to the plugin, for generated clients: `KvClient::new(plugin.channel())`.
    ///
    /// Cheap to clone; all clones share one HTTP/2 connection. Each call on it is a client
    /// span (a child of the caller's current span) whose trace context goes to the plugin in
    /// the call's metadata ([`tether_transport::telemetry`]).
    #[must_use]
    pub fn channel(&self) -> TracedChannel {
        self.channel.clone()
    }

    /// The [`GrpcBroker`] for callbacks: serve a service to the plugin under a fresh id
    /// (`accept_and_serve(next_id(), service)`) and send the id in a call, or dial a service
    /// the plugin serves under an id it sent. Cheap to clone; closed when the plugin ends.
    #[must_use]
    pub fn broker(&self) -> GrpcBroker {
        self.broker.clone()
    }

    /// The plugin's name in logs and errors.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.launched.plugin
    }

    /// The app protocol version the plugin chose (one the host offered).
    #[must_use]
    pub fn app_version(&self) -> u32 {
        self.app_version
    }

    /// The plugin's process id (also its process group id).
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.launched.group.pid()
    }

    /// Where the plugin listens: a unix socket in its private directory or a loopback TCP
    /// address.
    #[must_use]
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// SHA-256 fingerprint of the plugin's TLS certificate (`aa:bb:…`); `None` for plaintext.
    #[must_use]
    pub fn peer_fingerprint(&self) -> Option<&str> {
        self.peer_fingerprint.as_deref()
    }

    /// The broker mode negotiated at start: [`BrokerMode::Multiplexed`] when the host offered
    /// it ([`PluginClientBuilder::multiplex`](crate::PluginClientBuilder::multiplex)) and the plugin accepted, else
    /// [`BrokerMode::Default`].
    #[must_use]
    pub fn broker_mode(&self) -> BrokerMode {
        self.broker.mode()
    }

    /// Whether the connection is AutoMTLS (rather than [plaintext](crate::PluginClientBuilder::plaintext)).
    #[must_use]
    pub fn is_tls(&self) -> bool {
        self.peer_fingerprint.is_some()
    }

    /// Whether the plugin process is still running.
    #[must_use]
    pub fn is_running(&self) -> bool {
        self.launched.group.exit_status().is_none()
    }

    /// The plugin's exit status, once it has exited.
    #[must_use]
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.launched.group.exit_status()
    }

    /// Completes when the plugin process exits, with its status. Does not borrow the client, so
    /// it can be awaited in a task or `select!` next to calls.
    pub fn exited(&self) -> impl Future<Output = ExitStatus> + Send + 'static {
        let group = Arc::clone(&self.launched.group);
        async move { group.exited().await }
    }

    /// The Landlock ABI version enforced on the plugin (the kernel's, capped at
    /// [`TARGET_LANDLOCK_ABI`](crate::confine::TARGET_LANDLOCK_ABI)); `None` when it runs without
    /// Landlock (sandbox `off`, or `best-effort` on a kernel without it).
    #[must_use]
    pub fn landlock_abi(&self) -> Option<u32> {
        self.landlock_abi
    }

    /// What limits the number of the plugin's processes: its own pids cgroup (a fork bomb
    /// stops at `pids.max`, root or not), or — on a host without a writable pids controller —
    /// `RLIMIT_NPROC`, which the kernel does not apply to root.
    #[must_use]
    pub fn process_limit(&self) -> &ProcessLimit {
        &self.process_limit
    }

    /// The system-call filter in force for the plugin.
    #[must_use]
    pub fn seccomp(&self) -> SeccompMode {
        self.seccomp
    }

    /// The uid and gid the plugin runs as, when not the host's
    /// ([`run_as`](crate::PluginClientBuilder::run_as)).
    #[must_use]
    pub fn run_as(&self) -> Option<(u32, u32)> {
        self.run_as
    }

    /// The network policy in force for the plugin.
    #[must_use]
    pub fn network(&self) -> NetworkMode {
        self.network
    }

    /// How [`NetworkMode::None`] is enforced for this plugin: a network namespace of its own,
    /// or the seccomp filter on socket families; `None` with [`NetworkMode::Host`].
    #[must_use]
    pub fn network_mechanism(&self) -> Option<NetworkMechanism> {
        self.network_mechanism
    }

    /// Whether this plugin runs in a world of its own ([`WorldMechanism::Namespaces`]), with
    /// the other layers only (see [`crate::confine::world`]), or in a Pod of its own
    /// ([`WorldMechanism::Pod`], the Pod runner).
    #[must_use]
    pub fn world_mechanism(&self) -> WorldMechanism {
        self.world
    }

    /// The uid and gid this plugin runs as, when they are not the host's (a root host's
    /// plugins never run as uid 0 unless allowed).
    #[must_use]
    pub fn plugin_ids(&self) -> Option<(u32, u32)> {
        self.ids
    }

    /// The last bytes the plugin wrote to stderr (see
    /// [`DEFAULT_STDERR_TAIL_LEN`](crate::launch::DEFAULT_STDERR_TAIL_LEN)).
    #[must_use]
    pub fn stderr_tail(&self) -> String {
        output::snapshot(&self.stderr_tail)
    }

    /// Ends the plugin and cleans up after it.
    ///
    /// Calls `GRPCController.Shutdown` (at most
    /// [`DEFAULT_SHUTDOWN_RPC_TIMEOUT`](crate::launch::DEFAULT_SHUTDOWN_RPC_TIMEOUT)), waits up to
    /// [`DEFAULT_SHUTDOWN_GRACE`](crate::launch::DEFAULT_SHUTDOWN_GRACE) for it to exit, then sends
    /// `SIGTERM` to its whole process group, waits up to
    /// [`DEFAULT_TERMINATE_GRACE`](crate::launch::DEFAULT_TERMINATE_GRACE), then `SIGKILL`. The plugin
    /// is reaped, the rest of its group killed and its private directory (socket, temporary
    /// files) removed.
    ///
    /// # Errors
    /// A [`ShutdownError`] if signals cannot be sent, the plugin survives `SIGKILL`, or the
    /// private directory cannot be removed.
    pub async fn shutdown(mut self) -> Result<ShutdownOutcome, ShutdownError> {
        let graceful = Graceful {
            channel: self.channel.inner(),
            rpc_timeout: self.shutdown_rpc_timeout,
            grace: self.shutdown_grace,
        };
        let outcome = self.launched.shutdown(Some(graceful)).await;
        self.close_connections();
        outcome
    }

    fn close_connections(&self) {
        self.broker.close();
        if let Some(mux) = &self.mux {
            mux.close();
        }
    }
}

impl Drop for PluginClient {
    fn drop(&mut self) {
        self.close_connections();
    }
}

impl PluginClient {
    /// The tail of its stderr once the plugin's stderr has closed (after an exit), waiting at
    /// most `timeout` for the last bytes; what [`stderr_tail`](Self::stderr_tail) holds by
    /// then otherwise. Use it to report why a plugin that has exited ended.
    pub async fn final_stderr_tail(&self, timeout: Duration) -> String {
        let mut done = self.stderr_done.clone();
        let _ = tokio::time::timeout(timeout, done.wait_for(|done| *done)).await;
        self.stderr_tail()
    }

    /// Kills the plugin's process group at once with `SIGKILL` (no graceful request), e.g.
    /// when it hangs, and cleans up after it.
    ///
    /// # Errors
    /// As [`shutdown`](Self::shutdown).
    pub async fn kill(mut self) -> Result<ShutdownOutcome, ShutdownError> {
        let outcome = self.launched.kill().await;
        self.close_connections();
        outcome
    }
}
