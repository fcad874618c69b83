//! The running plugin ([`PluginClient`]) and the start-up sequence that makes one:
//! prepare → spawn → handshake → connect → health check.

use std::future::Future;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tether_proto::handshake::{Address, Handshake, HandshakeError, MAX_LINE_LEN};
use tether_proto::tls::{self, Identity};
use tokio::process::ChildStdout;
use tonic::transport::Channel;

use crate::catalog::delivery::DeliveredDir;
use crate::confine::integrity::VerifiedBinary;
use crate::confine::janitor::Janitor;
use crate::confine::pids::{self, ProcessLimit};
use crate::confine::process::{ExitHook, ProcessGroup};
use crate::confine::sandbox;
use crate::launch::address;
use crate::launch::builder::{HandshakeConfig, PluginClientBuilder, Settings};
use crate::launch::error::{
    Incompatibility, OutputLimit, Phase, PluginOutput, ShutdownError, ShutdownOutcome, StartError,
};
use crate::launch::handshake::{self, LineReader, ReadFailure, StrayLimit, StrayOutput};
use crate::launch::health::{self, HealthFailure};
use crate::launch::output::stdio;
use crate::launch::output::{self, SharedTail, StderrTail};
use crate::launch::shutdown::{Graceful, Launched};
use crate::launch::spawn::{self, PrivateDir};
use tether_transport::{
    BrokerMode, BrokerSetup, BrokerTls, ConnectError, GrpcBroker, ListenOn, Mux, Target,
};

/// After a failed start, how long to wait for the rest of the plugin's stderr (its group has
/// been ended, so the pipe closes almost at once).
const STDERR_SETTLE_TIMEOUT: Duration = Duration::from_millis(500);

/// When stdout ends or a connection fails, how long to wait for the plugin's exit before
/// reporting the failure itself rather than the exit.
const EXIT_SETTLE_TIMEOUT: Duration = Duration::from_millis(500);

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
/// The same happens when a [`start`](PluginClientBuilder::start) future is dropped part-way.
/// Call [`shutdown`](Self::shutdown) for a graceful, complete ending.
///
/// # Exit of the plugin
/// If the plugin exits on its own, [`is_running`](Self::is_running) turns `false`,
/// [`exited`](Self::exited) completes, whatever was left of its process group is killed, and
/// calls on the channel fail (reconnecting is refused).
#[derive(Debug)]
pub struct PluginClient {
    launched: Launched,
    channel: Channel,
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
    shutdown_rpc_timeout: Duration,
    shutdown_grace: Duration,
}

impl PluginClient {
    /// Starts configuring the launch of `program`: a path, or a bare name looked up in the
    /// plugin's `PATH` (the host's, unless changed with
    /// [`env`](PluginClientBuilder::env)), as [`std::process::Command`] does.
    pub fn builder(program: impl Into<std::path::PathBuf>) -> PluginClientBuilder {
        PluginClientBuilder::new(program)
    }

    /// The gRPC channel to the plugin, for generated clients: `KvClient::new(plugin.channel())`.
    ///
    /// Cheap to clone; all clones share one HTTP/2 connection.
    #[must_use]
    pub fn channel(&self) -> Channel {
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
    /// it ([`PluginClientBuilder::multiplex`]) and the plugin accepted, else
    /// [`BrokerMode::Default`].
    #[must_use]
    pub fn broker_mode(&self) -> BrokerMode {
        self.broker.mode()
    }

    /// Whether the connection is AutoMTLS (rather than [plaintext](PluginClientBuilder::plaintext)).
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
    /// [`TARGET_LANDLOCK_ABI`](crate::TARGET_LANDLOCK_ABI)); `None` when it runs without
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

    /// The last bytes the plugin wrote to stderr (see
    /// [`DEFAULT_STDERR_TAIL_LEN`](crate::DEFAULT_STDERR_TAIL_LEN)).
    #[must_use]
    pub fn stderr_tail(&self) -> String {
        output::snapshot(&self.stderr_tail)
    }

    /// Ends the plugin and cleans up after it.
    ///
    /// Calls `GRPCController.Shutdown` (at most
    /// [`DEFAULT_SHUTDOWN_RPC_TIMEOUT`](crate::DEFAULT_SHUTDOWN_RPC_TIMEOUT)), waits up to
    /// [`DEFAULT_SHUTDOWN_GRACE`](crate::DEFAULT_SHUTDOWN_GRACE) for it to exit, then sends
    /// `SIGTERM` to its whole process group, waits up to
    /// [`DEFAULT_TERMINATE_GRACE`](crate::DEFAULT_TERMINATE_GRACE), then `SIGKILL`. The plugin
    /// is reaped, the rest of its group killed and its private directory (socket, temporary
    /// files) removed.
    ///
    /// # Errors
    /// A [`ShutdownError`] if signals cannot be sent, the plugin survives `SIGKILL`, or the
    /// private directory cannot be removed.
    pub async fn shutdown(mut self) -> Result<ShutdownOutcome, ShutdownError> {
        let graceful = Graceful {
            channel: &self.channel,
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
    /// most `timeout` for the last bytes.
    pub(crate) async fn final_stderr_tail(&self, timeout: Duration) -> String {
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

/// The start-up sequence behind [`PluginClientBuilder::start`].
pub(crate) async fn start(
    settings: Settings,
    handshake: HandshakeConfig,
) -> Result<PluginClient, StartError> {
    let started = Instant::now();
    let name: Arc<str> = settings.display_name().into();
    let plugin = &*name;
    let prepare_error = |what, source| StartError::Prepare {
        plugin: plugin.to_owned(),
        what,
        source,
    };

    // Integrity first: nothing is made for a binary that will be refused.
    let verified =
        match &settings.sha256 {
            Some(expected) => Some(VerifiedBinary::open(&settings.program, expected).map_err(
                |e| StartError::Integrity {
                    plugin: plugin.to_owned(),
                    source: Box::new(e),
                },
            )?),
            None => None,
        };
    let dir = PrivateDir::create(settings.runtime_dir.as_deref())
        .map_err(|e| prepare_error("creating the private directory", e.into()))?;
    let delivered = match settings.delivery.as_deref() {
        Some(delivery) if !delivery.is_empty() => {
            let base = settings
                .delivery_dir
                .clone()
                .unwrap_or_else(crate::catalog::delivery::delivery_base);
            Some(
                DeliveredDir::create(&base, delivery)
                    .map_err(|e| prepare_error("writing the secrets and config files", e.into()))?,
            )
        }
        _ => None,
    };
    let identity = if settings.plaintext {
        tracing::warn!(
            plugin,
            "AutoMTLS is off: the connection to this plugin is neither encrypted nor authenticated"
        );
        None
    } else {
        Some(
            Identity::generate()
                .map_err(|e| prepare_error("generating the TLS identity", e.into()))?,
        )
    };
    let mut protocol = spawn::protocol_env(
        &handshake,
        identity.as_ref().map(Identity::cert_pem),
        settings.port_range,
        dir.path(),
        settings.multiplex,
    );
    if let Some(d) = &delivered {
        if let Some(p) = &d.secrets {
            protocol.push((tether_proto::env::SECRETS_DIR.into(), p.into()));
        }
        if let Some(p) = &d.config {
            protocol.push((tether_proto::env::CONFIG_DIR.into(), p.into()));
        }
    }
    let env = spawn::build_env(
        std::env::vars_os(),
        spawn::allowed_names(&settings),
        &settings.env,
        protocol,
        &handshake.cookie_key,
    );
    let mut paths = sandbox::Paths::default();
    // The binary's directory (a bare name is looked up in the plugin's PATH, as exec does).
    let program = spawn::resolve_program(
        &settings.program,
        env.vars.get(std::ffi::OsStr::new("PATH")),
    );
    if let Some(bin_dir) = program
        .canonicalize()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        paths.exec.push(bin_dir);
    }
    paths.exec.extend(settings.sandbox_exec.iter().cloned());
    paths.read.extend(settings.sandbox_read.iter().cloned());
    if let Some(d) = &delivered {
        paths.read.push(d.path().to_owned());
    }
    paths.read_write.push(dir.path().to_owned());
    // Its working directory: the configured one, else the host's (which it inherits).
    if let Some(cwd) = settings
        .current_dir
        .clone()
        .or_else(|| std::env::current_dir().ok())
    {
        paths.read_write.push(cwd);
    }
    // Processes: a pids cgroup of the plugin's own when the host can make one (then
    // RLIMIT_NPROC, per user and not applied to root, is left alone), else RLIMIT_NPROC.
    let mut limits = settings.limits;
    let mut pids_group = pids::PidsGroup::create(
        limits.processes.unwrap_or(pids::DEFAULT_MAX_PROCESSES),
        plugin,
    );
    let process_limit = match &pids_group {
        Some(group) => {
            limits.processes = None;
            group.limit()
        }
        None => ProcessLimit::Rlimit {
            max: limits.processes,
        },
    };
    let mut confinement = sandbox::Prepared::new(settings.sandbox, &limits, &paths, plugin)
        .map_err(|e| StartError::Sandbox {
            plugin: plugin.to_owned(),
            mode: settings.sandbox,
            source: Box::new(e),
        })?;
    if let Some(fd) = pids_group.as_ref().and_then(pids::PidsGroup::procs_fd) {
        confinement.enter_cgroup(fd);
    }
    for variable in &env.ignored {
        tracing::warn!(
            plugin,
            ?variable,
            "ignoring a variable that the protocol sets itself"
        );
    }

    let spawn_error = |source| StartError::Spawn {
        plugin: plugin.to_owned(),
        program: settings.program.clone(),
        source,
    };
    let exec = verified
        .as_ref()
        .map_or_else(|| settings.program.clone(), VerifiedBinary::exec_path);
    let mut child =
        spawn::spawn(&settings, &env.vars, &exec, confinement.pre_exec()).map_err(spawn_error)?;
    drop(verified);
    let pipes = child.stdout.take().zip(child.stderr.take());
    let group = ProcessGroup::new(child, Arc::clone(&name)).map_err(spawn_error)?;
    if let Some(mut pids_group) = pids_group.take() {
        // The group lives as long as the plugin: once it has exited, whatever is left in the
        // group is killed and the group removed.
        pids_group.spawned();
        group.on_exit(ExitHook(Box::new(move || drop(pids_group))));
    }
    let private_dir = dir.path().to_owned();
    let mut janitor_dirs = vec![dir.path()];
    if let Some(d) = &delivered {
        janitor_dirs.push(d.path());
    }
    let janitor = match Janitor::shared().register(group.pid(), &janitor_dirs) {
        Ok(registration) => Some(registration),
        Err(e) => {
            tracing::warn!(plugin, error = %e, "cannot register the plugin with the janitor: if the host is killed, this plugin's process group and directories stay behind");
            None
        }
    };
    if let Some(delivered) = delivered {
        // Secrets live exactly as long as the plugin.
        group.on_exit(ExitHook(Box::new(move || drop(delivered))));
    }
    let mut launched = Launched {
        group: Arc::clone(&group),
        dir: Some(dir),
        plugin: Arc::clone(&name),
        terminate_grace: settings.terminate_grace,
        janitor,
    };
    let Some((stdout, stderr)) = pipes else {
        let _ = launched.shutdown(None).await;
        return Err(spawn_error(std::io::Error::other(
            "stdout or stderr was not piped",
        )));
    };
    tracing::debug!(plugin, pid = group.pid(), "plugin spawned");

    let tail: SharedTail = Arc::new(Mutex::new(StderrTail::new(settings.stderr_tail_len)));
    let mut stderr_done = output::drain_stderr(
        stderr,
        Arc::clone(&name),
        group.pid(),
        Arc::clone(&tail),
        settings.output_sink.clone(),
    );
    let mut stray = StrayOutput::new(settings.max_stray_lines, settings.max_stray_bytes);

    let result = connect_plugin(
        &settings,
        &handshake,
        &launched,
        &private_dir,
        identity.as_ref(),
        stdout,
        &mut stray,
    )
    .await;
    match result {
        Ok(connected) => {
            tracing::info!(
                plugin,
                pid = group.pid(),
                address = %connected.address,
                app_version = connected.app_version,
                tls = connected.peer_fingerprint.is_some(),
                broker = %connected.broker.mode(),
                sandbox = %settings.sandbox,
                landlock_abi = confinement.landlock_abi,
                process_limit = ?process_limit,
                elapsed = ?started.elapsed(),
                "plugin started"
            );
            Ok(PluginClient {
                launched,
                channel: connected.channel,
                broker: connected.broker,
                mux: connected.mux,
                app_version: connected.app_version,
                address: connected.address,
                peer_fingerprint: connected.peer_fingerprint,
                stderr_tail: tail,
                stderr_done,
                landlock_abi: confinement.landlock_abi,
                process_limit,
                shutdown_rpc_timeout: settings.shutdown_rpc_timeout,
                shutdown_grace: settings.shutdown_grace,
            })
        }
        Err(mut error) => {
            tracing::debug!(plugin, phase = %error.phase(), "plugin start failed; ending it");
            if let Err(e) = launched.shutdown(None).await {
                tracing::warn!(plugin, error = %e, "cleaning up after the failed start failed");
            }
            let _ = tokio::time::timeout(STDERR_SETTLE_TIMEOUT, stderr_done.wait_for(|done| *done))
                .await;
            error.set_output(PluginOutput {
                stdout: stray.printed(),
                stderr_tail: output::snapshot(&tail),
            });
            Err(error)
        }
    }
}

/// What a successful start learned.
struct Connected {
    channel: Channel,
    broker: GrpcBroker,
    mux: Option<Mux>,
    app_version: u32,
    address: Address,
    peer_fingerprint: Option<String>,
}

/// Handshake, connect and health check. Errors carry an empty [`PluginOutput`], filled in by
/// the caller once the plugin has been ended.
async fn connect_plugin(
    settings: &Settings,
    handshake: &HandshakeConfig,
    launched: &Launched,
    private_dir: &Path,
    identity: Option<&Identity>,
    stdout: ChildStdout,
    stray: &mut StrayOutput,
) -> Result<Connected, StartError> {
    let plugin = &*launched.plugin;
    let group = &launched.group;
    let exited = |phase, status| StartError::Exited {
        plugin: plugin.to_owned(),
        phase,
        status,
        output: Box::default(),
    };

    // Handshake: the first line on stdout that looks like one, within the start timeout.
    // (+1: a `\r` before the newline.)
    let mut reader = LineReader::new(stdout, MAX_LINE_LEN + 1);
    let read = tokio::select! {
        biased;
        read = handshake::read_handshake(&mut reader, stray, plugin) => read,
        status = group.exited() => return Err(exited(Phase::Handshake, status)),
        () = tokio::time::sleep(settings.start_timeout) => {
            return Err(StartError::Timeout {
                plugin: plugin.to_owned(),
                timeout: settings.start_timeout,
                output: Box::default(),
            });
        }
    };
    let hs = match read {
        Ok(hs) => hs,
        Err(failure) => return Err(read_failure(failure, handshake, launched).await),
    };
    output::drain_stdout(
        reader,
        Arc::clone(&launched.plugin),
        group.pid(),
        settings.output_sink.clone(),
    );
    let peer_cert = check_handshake(&hs, handshake, identity.is_some(), settings.multiplex)
        .map_err(|e| match e {
            None => StartError::NoAutoMtls {
                plugin: plugin.to_owned(),
                output: Box::default(),
            },
            Some(reason) => incompatible(plugin, reason, handshake),
        })?;

    // Connect: only to our private directory or loopback, TLS pinned to the announced cert.
    let address_error = |problem| StartError::Address {
        plugin: plugin.to_owned(),
        address: format!("{}:{}", hs.address.network(), hs.address),
        problem,
        output: Box::default(),
    };
    let target = address::check_address(&hs.address, private_dir).map_err(address_error)?;
    address::check_socket_file(&target, private_dir).map_err(address_error)?;
    let address = target.to_string();
    let tls_config = match (identity, &peer_cert) {
        (Some(identity), Some(cert)) => Some(Arc::new(
            tls::client_config(identity, cert.clone().into()).map_err(|e| StartError::Tls {
                plugin: plugin.to_owned(),
                address: address.clone(),
                source: std::io::Error::other(e),
                output: Box::default(),
            })?,
        )),
        _ => None,
    };
    let running = {
        let group = Arc::clone(group);
        Arc::new(move || group.exit_status().is_none())
    };
    // Multiplexed: one connection to the plugin's socket carries yamux; the main gRPC
    // connection is a stream of it, as is every brokered one.
    let multiplexed = settings.multiplex && hs.multiplex == Some(true);
    let mut mux = None;
    let connected = if multiplexed {
        match tokio::time::timeout(
            settings.connect_timeout,
            tether_transport::connect_raw(&target),
        )
        .await
        {
            Err(_) => Err(ConnectError::Timeout(settings.connect_timeout)),
            Ok(Err(e)) => Err(ConnectError::Io(Box::new(e))),
            Ok(Ok(raw)) => {
                let session = Mux::client(raw);
                let opener = session.opener();
                mux = Some(session);
                tether_transport::connect_streams(
                    opener,
                    tls_config,
                    running,
                    settings.connect_timeout,
                )
                .await
            }
        }
    } else {
        tether_transport::connect(
            target.clone(),
            tls_config,
            running,
            settings.connect_timeout,
        )
        .await
    };
    let channel = match connected {
        Ok(channel) => channel,
        Err(e) => {
            if let Some(status) = group.exited_within(EXIT_SETTLE_TIMEOUT).await {
                return Err(exited(Phase::Connect, status));
            }
            return Err(connect_error(plugin, address, e, settings.connect_timeout));
        }
    };

    // Health check.
    if let Err(failure) = health::check(channel.clone(), settings.health_timeout).await {
        if let Some(status) = group.exited_within(EXIT_SETTLE_TIMEOUT).await {
            return Err(exited(Phase::HealthCheck, status));
        }
        return Err(health_error(plugin, failure, settings.health_timeout));
    }
    stdio::drain(
        channel.clone(),
        Arc::clone(&launched.plugin),
        launched.group.pid(),
        settings.output_sink.clone(),
    );

    // The broker: callbacks served in the private directory, dials only to what the address
    // policy accepts, with the same pinned identities.
    let broker = GrpcBroker::new(format!("plugin `{plugin}`"), settings.broker.clone());
    let broker_tls = match (identity, &peer_cert) {
        (Some(identity), Some(cert)) => Some(
            BrokerTls::new(identity, cert.clone().into()).map_err(|e| StartError::Tls {
                plugin: plugin.to_owned(),
                address: address.clone(),
                source: std::io::Error::other(e),
                output: Box::default(),
            })?,
        ),
        _ => None,
    };
    let dir = private_dir.to_owned();
    broker.connect(BrokerSetup {
        tls: broker_tls,
        listen: ListenOn::Unix(private_dir.to_owned()),
        policy: Arc::new(move |address| {
            let target = address::check_address(address, &dir).map_err(|e| e.to_string())?;
            address::check_socket_file(&target, &dir).map_err(|e| e.to_string())?;
            Ok(target)
        }),
        mux: mux.clone(),
    });
    broker.open_stream(channel.clone());
    if let Some(routes) = settings.host_services.clone() {
        broker
            .serve_host_services(routes)
            .await
            .map_err(|e| StartError::Prepare {
                plugin: plugin.to_owned(),
                what: "serving the host services",
                source: Box::new(e),
            })?;
    }

    Ok(Connected {
        channel,
        broker,
        mux,
        app_version: hs.app_version,
        address: match target {
            Target::Unix(path) => Address::Unix(path),
            Target::Tcp(addr) => Address::Tcp(addr),
        },
        peer_fingerprint: peer_cert.as_deref().map(tls::fingerprint),
    })
}

/// Checks a parsed handshake against what the host offered; returns the plugin's certificate.
/// `Err(None)`: TLS is on but the plugin sent no certificate.
///
/// Multiplexing: when offered, `true` turns it on and anything else (`false`, no field 7) keeps
/// the default mode — unlike go-plugin hosts, which refuse such plugins, tether falls back.
/// When not offered, `true` is refused: such a plugin would expect yamux on a connection that
/// does not carry it (go-plugin hosts ignore the field and then fail obscurely); `false` is
/// fine.
fn check_handshake(
    hs: &Handshake,
    handshake: &HandshakeConfig,
    tls: bool,
    offered_multiplex: bool,
) -> Result<Option<Vec<u8>>, Option<Incompatibility>> {
    if !handshake.app_versions.contains(&hs.app_version) {
        return Err(Some(Incompatibility::AppVersion {
            got: hs.app_version,
        }));
    }
    if hs.multiplex == Some(true) && !offered_multiplex {
        return Err(Some(Incompatibility::Multiplexing));
    }
    match (tls, &hs.server_cert) {
        (true, None) => Err(None),
        (false, Some(_)) => Err(Some(Incompatibility::UnrequestedTls)),
        (_, cert) => Ok(cert.clone()),
    }
}

fn incompatible(plugin: &str, reason: Incompatibility, handshake: &HandshakeConfig) -> StartError {
    StartError::Incompatible {
        plugin: plugin.to_owned(),
        reason,
        offered: handshake.app_versions.clone(),
        output: Box::default(),
    }
}

async fn read_failure(
    failure: ReadFailure,
    handshake: &HandshakeConfig,
    launched: &Launched,
) -> StartError {
    let plugin = &*launched.plugin;
    let too_much = |limit| StartError::TooMuchOutput {
        plugin: plugin.to_owned(),
        limit,
        output: Box::default(),
    };
    match failure {
        ReadFailure::Eof | ReadFailure::Io(_) => {
            if let ReadFailure::Io(e) = &failure {
                tracing::debug!(plugin, error = %e, "reading the plugin's stdout failed");
            }
            match launched.group.exited_within(EXIT_SETTLE_TIMEOUT).await {
                Some(status) => StartError::Exited {
                    plugin: plugin.to_owned(),
                    phase: Phase::Handshake,
                    status,
                    output: Box::default(),
                },
                None => StartError::StdoutClosed {
                    plugin: plugin.to_owned(),
                    output: Box::default(),
                },
            }
        }
        ReadFailure::LineTooLong => too_much(OutputLimit::LineLength(MAX_LINE_LEN)),
        ReadFailure::TooMuchStray(StrayLimit::Lines(n)) => too_much(OutputLimit::Lines(n)),
        ReadFailure::TooMuchStray(StrayLimit::Bytes(n)) => too_much(OutputLimit::Bytes(n)),
        ReadFailure::Malformed { line, error } => match error {
            HandshakeError::UnsupportedCoreVersion(got) => {
                incompatible(plugin, Incompatibility::CoreVersion { got }, handshake)
            }
            HandshakeError::UnsupportedProtocol(got) => {
                incompatible(plugin, Incompatibility::Protocol { got }, handshake)
            }
            error => StartError::Malformed {
                plugin: plugin.to_owned(),
                line,
                error,
                output: Box::default(),
            },
        },
    }
}

fn connect_error(
    plugin: &str,
    address: String,
    error: ConnectError,
    timeout: Duration,
) -> StartError {
    let plugin = plugin.to_owned();
    let output = Box::default();
    match error {
        ConnectError::Tls(source) => StartError::Tls {
            plugin,
            address,
            source,
            output,
        },
        ConnectError::Timeout(_) => StartError::ConnectTimeout {
            plugin,
            address,
            timeout,
            output,
        },
        ConnectError::Io(source) => StartError::Connect {
            plugin,
            address,
            source,
            output,
        },
        ConnectError::Exited => StartError::Connect {
            plugin,
            address,
            source: "the plugin exited".into(),
            output,
        },
        other => StartError::Connect {
            plugin,
            address,
            source: Box::new(other),
            output,
        },
    }
}

fn health_error(plugin: &str, failure: HealthFailure, timeout: Duration) -> StartError {
    let plugin = plugin.to_owned();
    let output = Box::default();
    match failure {
        HealthFailure::Rpc(status) => StartError::HealthCheck {
            plugin,
            source: Box::new(status),
            output,
        },
        HealthFailure::NotServing(status) => StartError::Unhealthy {
            plugin,
            status,
            output,
        },
        HealthFailure::Timeout => StartError::HealthTimeout {
            plugin,
            timeout,
            output,
        },
    }
}

#[cfg(test)]
mod tests {
    use tether_proto::handshake::Protocol;

    use super::*;

    fn handshake(app_version: u32, cert: Option<Vec<u8>>, multiplex: Option<bool>) -> Handshake {
        Handshake {
            core_version: 1,
            app_version,
            address: Address::Unix("/tmp/x/plugin".into()),
            protocol: Protocol::Grpc,
            server_cert: cert,
            multiplex,
        }
    }

    #[test]
    fn a_version_the_host_did_not_offer_is_incompatible() {
        let config = HandshakeConfig::new("K", "V").app_versions([1, 2]);
        assert_eq!(
            check_handshake(&handshake(3, Some(vec![1]), None), &config, true, false),
            Err(Some(Incompatibility::AppVersion { got: 3 }))
        );
        assert!(check_handshake(&handshake(2, Some(vec![1]), None), &config, true, false).is_ok());
    }

    #[test]
    fn multiplexing_accepted_when_offered_is_fine_in_every_answer() {
        let config = HandshakeConfig::new("K", "V");
        for answer in [Some(true), Some(false), None] {
            assert_eq!(
                check_handshake(&handshake(1, None, answer), &config, false, true),
                Ok(None),
                "{answer:?}"
            );
        }
    }

    #[test]
    fn multiplexing_turned_on_without_an_offer_is_refused_and_turned_off_is_fine() {
        let config = HandshakeConfig::new("K", "V");
        assert_eq!(
            check_handshake(&handshake(1, None, Some(true)), &config, false, false),
            Err(Some(Incompatibility::Multiplexing))
        );
        assert_eq!(
            check_handshake(&handshake(1, None, Some(false)), &config, false, false),
            Ok(None)
        );
    }

    #[test]
    fn a_missing_certificate_with_tls_on_means_no_automtls() {
        let config = HandshakeConfig::new("K", "V");
        assert_eq!(
            check_handshake(&handshake(1, None, None), &config, true, false),
            Err(None)
        );
        assert_eq!(
            check_handshake(&handshake(1, Some(vec![7]), None), &config, false, false),
            Err(Some(Incompatibility::UnrequestedTls))
        );
        assert_eq!(
            check_handshake(&handshake(1, Some(vec![7]), None), &config, true, false),
            Ok(Some(vec![7]))
        );
    }
}
