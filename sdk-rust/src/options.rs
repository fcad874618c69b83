//! How a plugin serves, as its author chooses: cookie, app versions, transport, runtime,
//! timeouts.

use std::time::Duration;

/// How long a graceful stop may take before the plugin exits anyway.
///
/// After `GRPCController.Shutdown`, SIGTERM, SIGINT or the host's exit, the server stops
/// accepting connections and waits for in-flight calls to finish; long-lived streams may never
/// finish on their own. With [`Plugin::run`](crate::Plugin::run), tasks still running when the
/// period ends (including blocking file IO) are abandoned and the process exits. go-plugin hosts kill a plugin 2 s after asking it to shut down, so one
/// second lets ordinary calls complete while the plugin still exits (and removes its socket) by
/// itself. Override with [`ServeOptions::shutdown_grace`].
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

pub use tether_transport::{DEFAULT_ACCEPT_ERROR_BACKOFF, DEFAULT_TLS_HANDSHAKE_TIMEOUT};

/// The app protocol version [`ServeOptions`] support unless told otherwise.
pub const DEFAULT_APP_VERSION: u32 = 1;

/// Where the plugin listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Transport {
    /// A unix domain socket (the default): in `PLUGIN_UNIX_SOCKET_DIR` when the host sets it,
    /// else in a fresh private directory under `TMPDIR`.
    #[default]
    Unix,
    /// TCP on `127.0.0.1`, on the first free port in `PLUGIN_MIN_PORT..=PLUGIN_MAX_PORT`.
    Tcp,
}

/// Which tokio runtime [`Plugin::run`](crate::Plugin::run) builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RuntimeFlavor {
    /// One thread (the default). A plugin serves one host over one connection; measured unary
    /// mTLS calls took ~79 µs here against ~166 µs on the multi-thread runtime.
    #[default]
    CurrentThread,
    /// tokio's work-stealing runtime with one worker per core, for plugins whose handlers do
    /// enough CPU work to use several cores.
    MultiThread,
}

/// How a plugin serves: what it must agree on with its host (cookie, app versions), where it
/// listens, and its runtime, timeouts and stdio.
///
/// The counterpart of go-plugin's `ServeConfig`; given to [`Plugin::new`](crate::Plugin::new).
///
/// ```
/// use std::time::Duration;
///
/// let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello")
///     .app_versions([1, 2])
///     .transport(tether_sdk::Transport::Tcp)
///     .shutdown_grace(Duration::from_millis(500));
/// assert_eq!(options.supported_app_versions(), &[1, 2]);
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct ServeOptions {
    pub(crate) cookie_key: String,
    pub(crate) cookie_value: String,
    pub(crate) app_versions: Vec<u32>,
    pub(crate) transport: Transport,
    pub(crate) runtime: RuntimeFlavor,
    pub(crate) shutdown_grace: Duration,
    pub(crate) tls_handshake_timeout: Duration,
    pub(crate) accept_error_backoff: Duration,
    pub(crate) exit_with_host: bool,
    pub(crate) ignore_sigint: bool,
    pub(crate) log_to_stderr: bool,
    pub(crate) capture_stdio: bool,
    pub(crate) stdio_drain_timeout: Duration,
    pub(crate) broker: tether_transport::GrpcBrokerConfig,
}

impl ServeOptions {
    /// Options for a plugin whose host sets the environment variable `cookie_key` to
    /// `cookie_value` (go-plugin's `MagicCookieKey`/`MagicCookieValue`), supporting app protocol
    /// version [`DEFAULT_APP_VERSION`].
    ///
    /// The cookie only tells a user who runs the plugin by hand that it is not a program of its
    /// own; it is not a security feature.
    ///
    /// ```
    /// let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello");
    /// assert_eq!(options.supported_app_versions(), &[1]);
    /// ```
    pub fn new(cookie_key: impl Into<String>, cookie_value: impl Into<String>) -> Self {
        Self {
            cookie_key: cookie_key.into(),
            cookie_value: cookie_value.into(),
            app_versions: vec![DEFAULT_APP_VERSION],
            transport: Transport::default(),
            runtime: RuntimeFlavor::default(),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            tls_handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            accept_error_backoff: DEFAULT_ACCEPT_ERROR_BACKOFF,
            exit_with_host: true,
            ignore_sigint: false,
            log_to_stderr: true,
            capture_stdio: true,
            stdio_drain_timeout: crate::stdio::DEFAULT_STDIO_DRAIN_TIMEOUT,
            broker: tether_transport::GrpcBrokerConfig::new(),
        }
    }

    /// Supports exactly one app protocol version.
    ///
    /// ```
    /// let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").app_version(3);
    /// assert_eq!(options.supported_app_versions(), &[3]);
    /// ```
    pub fn app_version(self, version: u32) -> Self {
        self.app_versions([version])
    }

    /// Supports several app protocol versions. The plugin answers the highest one the host also
    /// offers in `PLUGIN_PROTOCOL_VERSIONS`, or its lowest when there is none (the host then
    /// refuses it). Use [`Plugin::add_service_for`](crate::Plugin::add_service_for) to serve
    /// different services per version.
    ///
    /// ```
    /// let options =
    ///     tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").app_versions([2, 1, 2]);
    /// assert_eq!(options.supported_app_versions(), &[1, 2]);
    /// ```
    pub fn app_versions(mut self, versions: impl IntoIterator<Item = u32>) -> Self {
        let mut versions: Vec<u32> = versions.into_iter().collect();
        versions.sort_unstable();
        versions.dedup();
        self.app_versions = versions;
        self
    }

    /// Where to listen; [`Transport::Unix`] by default.
    ///
    /// ```
    /// let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello")
    ///     .transport(tether_sdk::Transport::Tcp);
    /// # let _ = options;
    /// ```
    pub fn transport(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }

    /// Which runtime [`Plugin::run`](crate::Plugin::run) and
    /// [`Plugin::try_run`](crate::Plugin::try_run) build; [`RuntimeFlavor::CurrentThread`] by
    /// default. [`Plugin::run_async`](crate::Plugin::run_async) uses the caller's runtime.
    ///
    /// ```
    /// let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello")
    ///     .runtime(tether_sdk::RuntimeFlavor::MultiThread);
    /// # let _ = options;
    /// ```
    pub fn runtime(mut self, flavor: RuntimeFlavor) -> Self {
        self.runtime = flavor;
        self
    }

    /// How long a graceful stop may take; [`DEFAULT_SHUTDOWN_GRACE`] by default.
    ///
    /// ```
    /// let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello")
    ///     .shutdown_grace(std::time::Duration::from_millis(200));
    /// # let _ = options;
    /// ```
    pub fn shutdown_grace(mut self, grace: std::time::Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// How long one TLS handshake may take; [`DEFAULT_TLS_HANDSHAKE_TIMEOUT`] by default.
    ///
    /// ```
    /// let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello")
    ///     .tls_handshake_timeout(std::time::Duration::from_secs(2));
    /// # let _ = options;
    /// ```
    pub fn tls_handshake_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.tls_handshake_timeout = timeout;
        self
    }

    /// The pause after a failed `accept`; [`DEFAULT_ACCEPT_ERROR_BACKOFF`] by default.
    ///
    /// ```
    /// let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello")
    ///     .accept_error_backoff(std::time::Duration::from_millis(10));
    /// # let _ = options;
    /// ```
    pub fn accept_error_backoff(mut self, backoff: std::time::Duration) -> Self {
        self.accept_error_backoff = backoff;
        self
    }

    /// Whether to stop when the process that launched the plugin exits (default `true`).
    ///
    /// Turn it off only for a plugin that is meant to outlive its parent, e.g. one started by
    /// a wrapper script that exits at once.
    ///
    /// ```
    /// let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").exit_with_host(false);
    /// # let _ = options;
    /// ```
    pub fn exit_with_host(mut self, enabled: bool) -> Self {
        self.exit_with_host = enabled;
        self
    }

    /// Whether to ignore SIGINT (default `false`: SIGINT stops the plugin gracefully, like
    /// SIGTERM).
    ///
    /// go-plugin's plugins ignore SIGINT: when a user presses Ctrl-C in a terminal, the whole
    /// foreground process group gets it, and a Go host wants its plugins alive while it shuts
    /// down in order (it then calls `GRPCController.Shutdown`). Set this to `true` to behave
    /// the same under hosts that do not put plugins in their own process group.
    ///
    /// ```
    /// let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").ignore_sigint(true);
    /// # let _ = options;
    /// ```
    pub fn ignore_sigint(mut self, ignore: bool) -> Self {
        self.ignore_sigint = ignore;
        self
    }

    /// Whether to install a `tracing` subscriber that writes to stderr (default `true`).
    ///
    /// The subscriber is installed only if no global subscriber is set yet, so one installed
    /// by the author wins. It writes one line per event, prefixed with the level in brackets
    /// (`[INFO] …`), which go-plugin hosts map to their own log levels. Its filter comes from
    /// `RUST_LOG` when set, else `info`. Nothing is ever written to stdout, which belongs to
    /// the handshake.
    ///
    /// ```
    /// let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").log_to_stderr(false);
    /// # let _ = options;
    /// ```
    pub fn log_to_stderr(mut self, enabled: bool) -> Self {
        self.log_to_stderr = enabled;
        self
    }

    /// Whether to capture fd 1 (stdout) after the handshake and serve them to the host through
    /// `plugin.GRPCStdio` (on by default): output of `print!`, C libraries and child processes
    /// then reaches go-plugin ≥ 1.1 and tether hosts as the plugin's stdio, while log lines keep
    /// going to the original stderr. Turn it off for a plugin that manages its fds itself.
    ///
    /// ```
    /// let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").capture_stdio(false);
    /// # let _ = options;
    /// ```
    pub fn capture_stdio(mut self, enabled: bool) -> Self {
        self.capture_stdio = enabled;
        self
    }

    /// At shutdown, how long to wait for captured stdout still in flight to reach the host;
    /// [`DEFAULT_STDIO_DRAIN_TIMEOUT`](crate::DEFAULT_STDIO_DRAIN_TIMEOUT) by default.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello")
    ///     .stdio_drain_timeout(Duration::from_millis(200));
    /// # let _ = options;
    /// ```
    pub fn stdio_drain_timeout(mut self, timeout: Duration) -> Self {
        self.stdio_drain_timeout = timeout;
        self
    }

    /// Timeouts and limits of the plugin's [`GrpcBroker`](crate::GrpcBroker) (callbacks):
    /// how long a dial waits for the host's connection info, how long unclaimed connection
    /// info is kept, …; [`GrpcBrokerConfig::new`](tether_transport::GrpcBrokerConfig::new) by default.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello")
    ///     .grpc_broker(tether_sdk::GrpcBrokerConfig::new().dial_timeout(Duration::from_secs(2)));
    /// # let _ = options;
    /// ```
    pub fn grpc_broker(mut self, broker: tether_transport::GrpcBrokerConfig) -> Self {
        self.broker = broker;
        self
    }

    /// The app protocol versions this plugin supports, ascending.
    #[must_use]
    pub fn supported_app_versions(&self) -> &[u32] {
        &self.app_versions
    }
}
