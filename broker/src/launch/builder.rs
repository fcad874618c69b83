//! What to launch and how: [`HandshakeConfig`], the [`PluginClientBuilder`] and every default
//! timeout and limit as a named constant.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::sync::Arc;

use crate::confine::confinement::Confinement;
use crate::confine::network::NetworkMode;
use crate::confine::sandbox::{Limits, SandboxMode};
use crate::confine::seccomp::SeccompMode;
use crate::confine::world::NamespacesMode;
use crate::launch::client::PluginClient;
use crate::launch::delivery::Delivery;
use crate::launch::interpreted::runtime::Runtime;
use crate::launch::output::limits::OutputLimits;
use crate::launch::runner::options::Runner;
use crate::launch::settings::{HandshakeConfig, Settings};
use crate::launch::telemetry::Telemetry;
use crate::launch::timeouts::Timeouts;

/// Type state of a [`PluginClientBuilder`] that has no [`HandshakeConfig`] yet; call
/// [`PluginClientBuilder::handshake`] before [`PluginClientBuilder::start`].
#[derive(Debug, Clone, Copy)]
pub struct NoHandshake;

/// Configures and starts a plugin; made by [`PluginClient::builder`].
///
/// Every setter consumes and returns the builder. `start` exists only once a
/// [`HandshakeConfig`] is set, so forgetting it does not compile:
///
/// ```compile_fail
/// # async fn f() {
/// let plugin = tether_broker::PluginClient::builder("/bin/plugin").start().await;
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct PluginClientBuilder<H = NoHandshake> {
    pub(crate) settings: Settings,
    pub(crate) handshake: H,
}

impl PluginClientBuilder<NoHandshake> {
    pub(crate) fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            settings: Settings {
                program: program.into(),
                args: Vec::new(),
                name: None,
                current_dir: None,
                plaintext: false,
                multiplex: false,
                output_sink: None,
                private_dir_base: None,
                port_range: (
                    tether_proto::env::DEFAULT_MIN_PORT,
                    tether_proto::env::DEFAULT_MAX_PORT,
                ),
                confinement: Confinement::default(),
                timeouts: Timeouts::default(),
                output_limits: OutputLimits::default(),
                telemetry: Telemetry::default(),
                working_dir_is_hosts: false,
                run_as_set_at: None,
                runtime: Runtime::Auto,
                sha256: None,
                delivery: None,
                delivery_dir: None,
                broker: tether_transport::GrpcBrokerConfig::new(),
                host_services: None,
                runner: Runner::Process,
            },
            handshake: NoHandshake,
        }
    }
}

impl<H> PluginClientBuilder<H> {
    /// Sets the magic cookie and app protocol versions (required before `start`).
    ///
    /// ```
    /// use tether_broker::{HandshakeConfig, PluginClient};
    /// let builder = PluginClient::builder("/usr/libexec/kv-plugin")
    ///     .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]));
    /// ```
    pub fn handshake(self, handshake: HandshakeConfig) -> PluginClientBuilder<HandshakeConfig> {
        PluginClientBuilder {
            settings: self.settings,
            handshake,
        }
    }

    /// Appends one command-line argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.settings.args.push(arg.into());
        self
    }

    /// Appends command-line arguments.
    ///
    /// ```
    /// let b = tether_broker::PluginClient::builder("/bin/plugin").args(["--verbose", "-x"]);
    /// ```
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.settings.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// The name used for this plugin in logs and error messages (default: the program's file
    /// name).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.settings.name = Some(name.into());
        self
    }

    /// The plugin's working directory, **granted to it read-write** by the sandbox.
    ///
    /// Without one, the plugin starts in its private per-launch directory (its socket and
    /// `TMPDIR`, removed when it ends); the host's own working directory is never granted
    /// (unlike go-plugin, which runs plugins in it). Setting a directory is an explicit
    /// grant: pass a directory of the plugin's own (the [`Supervisor`](crate::Supervisor)
    /// gives each plugin `state/<name>`), not one that holds anything else — the host's
    /// current directory may hold secrets, manifests or the operator's files. A relative
    /// program path is resolved against the host's working directory either way.
    ///
    /// ```
    /// let b = tether_broker::PluginClient::builder("/bin/plugin").current_dir("/var/lib/kv");
    /// ```
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.settings.current_dir = Some(dir.into());
        self
    }

    /// Passes the host's value of `name`, if it has one, to the plugin.
    ///
    /// The plugin's environment starts empty; see [`DEFAULT_ENV_ALLOWLIST`](crate::launch::DEFAULT_ENV_ALLOWLIST).
    ///
    /// ```
    /// let b = tether_broker::PluginClient::builder("/bin/plugin").env_allow("HOME");
    /// ```
    pub fn env_allow(mut self, name: impl Into<String>) -> Self {
        self.settings.confinement.env_allow.push(name.into());
        self
    }

    /// Sets an environment variable for the plugin, overriding an allowed host value: adds it
    /// to [`Confinement::env`](crate::confine::Confinement::env) (a later
    /// [`confinement`](Self::confinement) replaces it, as it replaces [`env_allow`](Self::env_allow)).
    ///
    /// The protocol's variables (the cookie, `PLUGIN_*`, `TETHER_*` and `TMPDIR`) are set by
    /// the host and cannot be overridden here; such entries are ignored with a warning. A
    /// catalog plugin's manifest sets these with its `env` table, granted by the operator.
    ///
    /// ```
    /// let b = tether_broker::PluginClient::builder("/bin/vault-plugin")
    ///     .env("VAULT_PLUGIN_AUTOMTLS_ENABLED", "true");
    /// ```
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.settings
            .confinement
            .env
            .push((key.into(), value.into()));
        self
    }

    /// Turns AutoMTLS off: the plugin connection is neither encrypted nor authenticated.
    ///
    /// Only for plugins that cannot do AutoMTLS. The socket still lives in a private `0700`
    /// directory, but a TCP plugin can then be reached by any local process. A warning is
    /// logged at start.
    pub fn plaintext(mut self) -> Self {
        self.settings.plaintext = true;
        self
    }

    /// Offers go-plugin's multiplexed broker (`PLUGIN_MULTIPLEX_GRPC=true`, go-plugin ≥ 1.6):
    /// if the plugin accepts (handshake field 7 `true`), the main connection and every
    /// brokered connection in both directions are yamux streams over the one connection to
    /// the plugin's socket — no listening socket per callback. A plugin that does not accept
    /// (older go-plugin, Debian's 1.0.1, anything printing six fields or `false`) is used in
    /// the default mode; [`PluginClient::broker_mode`](crate::PluginClient::broker_mode) says
    /// which was negotiated. Off by default, as in go-plugin (`GRPCBrokerMultiplex`).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), tether_broker::StartError> {
    /// use tether_broker::{callbacks::BrokerMode, HandshakeConfig, PluginClient};
    /// let plugin = PluginClient::builder("./counter-plugin")
    ///     .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
    ///     .multiplex(true)
    ///     .start()
    ///     .await?;
    /// if plugin.broker_mode() == BrokerMode::Multiplexed {
    ///     // Callbacks share the plugin's one connection.
    /// }
    /// # Ok(()) }
    /// ```
    pub fn multiplex(mut self, on: bool) -> Self {
        self.settings.multiplex = on;
        self
    }

    /// Sends every line the plugin prints or logs (stdout and stderr pipes, `GRPCStdio`) to
    /// `sink` instead of `tracing`, parsed as described in the crate docs ("Plugin output and
    /// logs"). The sink runs on the host's draining tasks and must return quickly.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use tether_broker::{OutputLine, OutputSink, PluginClient};
    /// let (tx, rx) = mpsc::channel::<OutputLine>();
    /// let tx = std::sync::Mutex::new(tx);
    /// let builder = PluginClient::builder("./kv-plugin").output_sink(OutputSink::new(move |line| {
    ///     let _ = tx.lock().unwrap().send(line);
    /// }));
    /// # drop((builder, rx));
    /// ```
    pub fn output_sink(mut self, sink: crate::launch::output::sink::OutputSink) -> Self {
        self.settings.output_sink = Some(sink);
        self
    }

    /// Directory in which the per-launch private directory (socket, `TMPDIR`) is created,
    /// for a plugin without a world of its own (a plugin in a world has the world's `/tmp`:
    /// see [`namespaces`](Self::namespaces)).
    ///
    /// Default: the host's temporary directory (`TMPDIR`, else `/tmp`), or `/tmp` when that
    /// path is too long for unix sockets. At most [`MAX_PRIVATE_DIR_BASE_LEN`](crate::launch::MAX_PRIVATE_DIR_BASE_LEN) bytes long (after
    /// resolving symbolic links), or start fails in [`Phase::Prepare`](crate::error::Phase::Prepare).
    pub fn private_dir_base(mut self, dir: impl Into<PathBuf>) -> Self {
        self.settings.private_dir_base = Some(dir.into());
        self
    }

    /// TCP ports a plugin serving over TCP may use (`PLUGIN_MIN_PORT`/`PLUGIN_MAX_PORT`;
    /// default go-plugin's 10000–25000).
    pub fn port_range(mut self, min: u16, max: u16) -> Self {
        self.settings.port_range = (min, max);
        self
    }

    /// How long each stage may take (default [`Timeouts::default`]: start, connect, health,
    /// shutdown, interpreter query), replacing every timeout set before.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tether_broker::launch::Timeouts;
    /// let b = tether_broker::PluginClient::builder("/bin/plugin")
    ///     .timeouts(Timeouts::default().connect(Duration::from_secs(1)));
    /// ```
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.settings.timeouts = timeouts;
        self
    }

    /// How long the plugin has to print its handshake: [`Timeouts::start`], the one timeout
    /// most often changed (see [`DEFAULT_START_TIMEOUT`](crate::launch::DEFAULT_START_TIMEOUT)).
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = tether_broker::PluginClient::builder("/bin/plugin").start_timeout(Duration::from_secs(60));
    /// ```
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeouts.start = timeout;
        self
    }

    /// How much of the plugin's output is read before its handshake and kept for errors
    /// (default [`OutputLimits::default`]).
    ///
    /// ```
    /// use tether_broker::launch::OutputLimits;
    /// let b = tether_broker::PluginClient::builder("/bin/plugin")
    ///     .output_limits(OutputLimits::default().max_stray_lines(10));
    /// ```
    pub fn output_limits(mut self, limits: OutputLimits) -> Self {
        self.settings.output_limits = limits;
        self
    }

    /// Whether the plugin gets the host's trace context and who is told about its calls
    /// (default [`Telemetry::default`]: trace context sent, nothing measured).
    ///
    /// ```
    /// use tether_broker::launch::Telemetry;
    /// let b = tether_broker::PluginClient::builder("/bin/plugin")
    ///     .telemetry(Telemetry::default().trace_context(false));
    /// ```
    pub fn telemetry(mut self, telemetry: Telemetry) -> Self {
        self.settings.telemetry = telemetry;
        self
    }

    /// Everything that decides what the plugin may do, as one value (default
    /// [`Confinement::default`]: the strictest), replacing what was set before. The setters
    /// below change one part of it; a manifest's confinement arrives here whole (see
    /// [`supervisor::launch`](crate::supervisor::launch)).
    ///
    /// ```
    /// use tether_broker::confine::{Confinement, NetworkMode};
    /// let b = tether_broker::PluginClient::builder("/bin/plugin")
    ///     .confinement(Confinement::default().network(NetworkMode::Host).network_namespace(false));
    /// ```
    pub fn confinement(mut self, confinement: Confinement) -> Self {
        self.settings.confinement = confinement;
        self
    }

    /// How strictly the plugin is confined (default [`SandboxMode::Enforce`]): Landlock lets
    /// it read and execute its binary's directory and the system paths
    /// ([`SYSTEM_EXEC_PATHS`](crate::confine::SYSTEM_EXEC_PATHS),
    /// [`SYSTEM_READ_PATHS`](crate::confine::SYSTEM_READ_PATHS)), read its delivered secrets and config,
    /// and read and write its private directory and, when one is set, its
    /// [working directory](Self::current_dir) — nothing else (never the host's working
    /// directory).
    ///
    /// ```
    /// use tether_broker::{PluginClient, SandboxMode};
    /// let b = PluginClient::builder("/bin/plugin").sandbox(SandboxMode::BestEffort);
    /// ```
    pub fn sandbox(mut self, mode: SandboxMode) -> Self {
        self.settings.confinement.sandbox = mode;
        self
    }

    /// Where the plugin runs: a confined child process (the default) or a gVisor sandbox.
    /// Under gVisor the [sandbox allowances](Self::sandbox_allow_exec) become read-only bind
    /// mounts and the [working directory](Self::current_dir) the plugin's writable state
    /// directory; everything else of the host stays invisible.
    ///
    /// ```
    /// use tether_broker::PluginClient;
    /// use tether_broker::launch::{GvisorOptions, Runner};
    /// let b = PluginClient::builder("/usr/libexec/kv-plugin").runner(Runner::Gvisor(GvisorOptions::new()));
    /// ```
    pub fn runner(mut self, runner: Runner) -> Self {
        self.settings.runner = runner;
        self
    }

    /// The plugin's system-call filter (default [`SeccompMode::Default`]), independent of
    /// [`sandbox`](Self::sandbox): [`SeccompMode::Off`] loads no filter.
    ///
    /// ```
    /// use tether_broker::PluginClient;
    /// use tether_broker::confine::SeccompMode;
    /// let b = PluginClient::builder("/bin/plugin").seccomp(SeccompMode::Off);
    /// ```
    pub fn seccomp(mut self, mode: SeccompMode) -> Self {
        self.settings.confinement.seccomp = mode;
        self
    }

    /// The plugin's network (default [`NetworkMode::None`]: unix sockets only), independent
    /// of [`sandbox`](Self::sandbox). A plugin that serves over TCP, or calls services on the
    /// network, needs [`NetworkMode::Host`].
    ///
    /// ```
    /// use tether_broker::PluginClient;
    /// use tether_broker::confine::NetworkMode;
    /// let b = PluginClient::builder("/bin/plugin").network(NetworkMode::Host);
    /// ```
    pub fn network(mut self, mode: NetworkMode) -> Self {
        self.settings.confinement.network = mode;
        self
    }

    /// Whether the plugin runs in a world of its own: user, mount, pid, IPC, UTS, cgroup and
    /// network namespaces, a root holding only its plan's paths (default
    /// [`NamespacesMode::Preferred`]: where the host can make one). [`NamespacesMode::Required`]
    /// refuses to start the plugin on a host that cannot; [`NamespacesMode::Off`] runs it in
    /// the host's world with the other layers only. See [`crate::confine::world`].
    ///
    /// ```
    /// use tether_broker::PluginClient;
    /// use tether_broker::confine::NamespacesMode;
    /// let b = PluginClient::builder("/bin/plugin").namespaces(NamespacesMode::Required);
    /// ```
    pub fn namespaces(mut self, mode: NamespacesMode) -> Self {
        self.settings.confinement.namespaces = mode;
        self
    }

    /// Runs the plugin as user `uid` and group `gid` (no supplementary groups) instead of the
    /// host's user: another uid cannot signal, `prlimit`, renice, trace or read the memory of
    /// the host, whatever the other layers. Only for a host running as root (others cannot
    /// change user): elsewhere start fails in [`Phase::Prepare`](crate::error::Phase::Prepare)
    /// with [`StartErrorKind::RunAsNeedsRoot`](crate::error::StartErrorKind::RunAsNeedsRoot).
    ///
    /// What the host makes for the launch is given to that user: the private directory, the
    /// delivered secrets and config, and a [`Supervisor`](crate::Supervisor)'s state
    /// directory. What the operator points at must already be reachable by it: the binary and
    /// the directories leading to it, a [`current_dir`](Self::current_dir), a
    /// [`private_dir_base`](Self::private_dir_base) or [`delivery_dir`](Self::delivery_dir) (the
    /// defaults, `/tmp` and `/dev/shm`, are).
    ///
    /// ```
    /// use tether_broker::PluginClient;
    /// let b = PluginClient::builder("/usr/libexec/kv-plugin").run_as(65534, 65534); // nobody
    /// ```
    pub fn run_as(mut self, uid: u32, gid: u32) -> Self {
        self.settings.confinement.run_as = Some((uid, gid));
        self
    }

    /// Marks the [working directory](Self::current_dir) as made by the host for this plugin
    /// (a supervisor's state directory), so that [`run_as`](Self::run_as) gives it to the
    /// plugin's user.
    pub(crate) fn working_dir_is_hosts(mut self) -> Self {
        self.settings.working_dir_is_hosts = true;
        self
    }

    /// Names where [`run_as`](Self::run_as) was decided (a grants file's line), for the error
    /// of a host that cannot switch users.
    pub(crate) fn run_as_set_at(mut self, place: String) -> Self {
        self.settings.run_as_set_at = Some(place);
        self
    }

    /// Also lets the confined plugin read and execute below `path`: for an interpreter and its
    /// libraries outside the system paths (a pyenv or virtualenv Python, a Node.js install in
    /// the home directory). Everything else stays denied.
    ///
    /// ```
    /// use tether_broker::PluginClient;
    /// let b = PluginClient::builder("/opt/py/bin/python3")
    ///     .arg("/srv/plugins/kv_plugin.py")
    ///     .sandbox_allow_exec("/opt/py")
    ///     .sandbox_allow_read("/srv/plugins");
    /// ```
    pub fn sandbox_allow_exec(mut self, path: impl Into<PathBuf>) -> Self {
        self.settings
            .confinement
            .sandbox_allow_exec
            .push(path.into());
        self
    }

    /// Also lets the confined plugin read below `path` (a script plugin's own source
    /// directory, for example).
    pub fn sandbox_allow_read(mut self, path: impl Into<PathBuf>) -> Self {
        self.settings
            .confinement
            .sandbox_allow_read
            .push(path.into());
        self
    }

    /// Which interpreter runs the plugin (default [`Runtime::Auto`]), so that an interpreted
    /// plugin works confined without hand-found paths: before the launch, the interpreter is
    /// asked where it lives (`sys.executable`, `sys.prefix`, `sys.base_prefix`, `sys.path`;
    /// Node's `process.execPath`), with the plugin's environment and confined to reading (the
    /// query runs its start-up code but can write nowhere), within
    /// [`Timeouts::interpreter_query`]. Then the real interpreter is
    /// executed — not a pyenv shim — with the script made absolute, and the sandbox lets the
    /// plugin read and execute the interpreter's install prefixes and read its import
    /// directories and the script's project (the nearest directory with `pyproject.toml`,
    /// `setup.py`, `setup.cfg` or `package.json`, at most
    /// [`MAX_PROJECT_DEPTH`](crate::launch::MAX_PROJECT_DEPTH) levels above the script, else
    /// the script's directory). A prefix broader than two directory levels (other than
    /// `/usr`) is refused.
    ///
    /// `Auto` recognises `python`, `python3`, `python3.X`, `node` and `nodejs`, as the program
    /// or in a script's `#!` line; anything else runs natively, as does everything when the
    /// sandbox is [`Off`](SandboxMode::Off) or a [`sha256`](Self::sha256) is set.
    ///
    /// ```
    /// use tether_broker::{PluginClient, Runtime};
    /// let b = PluginClient::builder("python3")
    ///     .arg("plugins/kv_plugin.py")
    ///     .runtime(Runtime::Python);
    /// ```
    pub fn runtime(mut self, runtime: Runtime) -> Self {
        self.settings.runtime = runtime;
        self
    }

    /// Resource limits applied before exec (core dumps are always off). The processes limit
    /// ([`Limits::processes`], default [`DEFAULT_MAX_PROCESSES`](crate::confine::DEFAULT_MAX_PROCESSES))
    /// caps the plugin and everything it starts: the `pids.max` of its own pids cgroup, so a
    /// fork bomb stops there — or `RLIMIT_NPROC` on a host without a writable pids controller
    /// (see [`ProcessLimit`](crate::confine::ProcessLimit)).
    ///
    /// ```
    /// use tether_broker::{Limits, PluginClient};
    /// let b = PluginClient::builder("/bin/plugin").limits(Limits::default().memory_mib(512).processes(64));
    /// ```
    pub fn limits(mut self, limits: Limits) -> Self {
        self.settings.confinement.limits = limits;
        self
    }

    /// The binary's expected SHA-256 (hex). The binary is then opened without following a
    /// symbolic link, refused if group/world-writable or owned by another user than the host's
    /// or root, hashed through the open descriptor and that same file executed. It must be a
    /// native executable (not a `#!` script).
    pub fn sha256(mut self, hex: impl Into<String>) -> Self {
        self.settings.sha256 = Some(hex.into().to_ascii_lowercase());
        self
    }

    /// Secrets and config files to deliver (see [`Delivery`]): written per launch into a
    /// private directory, announced in `TETHER_SECRETS_DIR` / `TETHER_CONFIG_DIR`, removed
    /// when the plugin exits.
    pub fn deliver(mut self, delivery: Delivery) -> Self {
        self.settings.delivery = Some(Arc::new(delivery));
        self
    }

    /// Where delivery directories are created (default [`delivery_base`](crate::launch::delivery_base):
    /// tmpfs where available).
    pub fn delivery_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.settings.delivery_dir = Some(dir.into());
        self
    }

    /// Timeouts and limits of the plugin's [`GrpcBroker`](crate::GrpcBroker) (callbacks):
    /// [`DEFAULT_DIAL_TIMEOUT`](crate::callbacks::DEFAULT_DIAL_TIMEOUT),
    /// [`DEFAULT_UNCLAIMED_TTL`](crate::callbacks::DEFAULT_UNCLAIMED_TTL), … by default.
    ///
    /// ```
    /// use std::time::Duration;
    /// let builder = tether_broker::PluginClient::builder("/usr/libexec/counter-plugin")
    ///     .grpc_broker(tether_broker::callbacks::GrpcBrokerConfig::new().dial_timeout(Duration::from_secs(2)));
    /// # let _ = builder;
    /// ```
    pub fn grpc_broker(mut self, config: tether_transport::GrpcBrokerConfig) -> Self {
        self.settings.broker = config;
        self
    }

    /// Serves `service` to the plugin for its whole life as a *host service*: the plugin
    /// reaches it without being sent an id (`tether_sdk::GrpcBroker::host_services`), under
    /// [`HOST_SERVICES_ID`](crate::callbacks::HOST_SERVICES_ID). Call it once per service; per-call
    /// callbacks ([`PluginClient::broker`]) work next to it. go-plugin plugins ignore it.
    ///
    /// ```no_run
    /// # let logger = tonic_health::server::health_reporter().1;
    /// let builder = tether_broker::PluginClient::builder("/usr/libexec/my-plugin")
    ///     .host_service(logger); // e.g. a generated `LoggerServer::new(my_logger)`
    /// # let _ = builder;
    /// ```
    pub fn host_service<S: tether_transport::GrpcService>(mut self, service: S) -> Self {
        self.settings.host_services = Some(match self.settings.host_services.take() {
            Some(routes) => routes.add_service(service),
            None => tonic::service::Routes::new(service),
        });
        self
    }

    /// Serves `routes` to the plugin as its host services, replacing any given before (later
    /// [`host_service`](Self::host_service) calls add to them): for services known only at run
    /// time, e.g. an `axum::Router` of `route_service`s made into [`tonic::service::Routes`]
    /// (`tether call --host-proto` serves its recording stub this way).
    ///
    /// ```
    /// let (_reporter, health) = tonic_health::server::health_reporter();
    /// let builder = tether_broker::PluginClient::builder("/usr/libexec/my-plugin")
    ///     .host_routes(tonic::service::Routes::new(health));
    /// # let _ = builder;
    /// ```
    pub fn host_routes(mut self, routes: tonic::service::Routes) -> Self {
        self.settings.host_services = Some(routes);
        self
    }

    /// The program that will be launched.
    #[must_use]
    pub fn program(&self) -> &Path {
        &self.settings.program
    }

    /// The name this plugin goes by in logs and errors: the one given to
    /// [`name`](Self::name), else the program's file name. Lets a
    /// [`SupervisorBuilder::customize`](crate::SupervisorBuilder::customize) hook tell launches apart
    /// (e.g. to give each plugin its own [`host_service`](Self::host_service) instance).
    ///
    /// ```
    /// let b = tether_broker::PluginClient::builder("/usr/libexec/kv-plugin");
    /// assert_eq!(b.plugin_name(), "kv-plugin");
    /// assert_eq!(b.name("kv").plugin_name(), "kv");
    /// ```
    #[must_use]
    pub fn plugin_name(&self) -> String {
        self.settings.display_name()
    }
}

impl PluginClient {
    /// Starts configuring the launch of `program`: a path, or a bare name looked up in the
    /// plugin's `PATH` (the host's, unless changed with
    /// [`env`](PluginClientBuilder::env)), as [`std::process::Command`] does.
    pub fn builder(program: impl Into<std::path::PathBuf>) -> PluginClientBuilder {
        PluginClientBuilder::new(program)
    }
}
