//! [`Timeouts`]: how long each stage of a plugin's life may take, as one value, with every
//! default a named constant. The stages read their timeout from the value; a new one is a
//! constant and a field here, read by its stage.

use std::time::Duration;

/// How long a plugin has from spawn to printing its handshake line.
///
/// go-plugin waits a minute. Local plugins print their handshake within tens of milliseconds
/// (key generation included), and a cold start of a large binary on a loaded machine within a
/// few seconds; 20 s leaves a wide margin for that while a hung plugin still fails a host's
/// start-up in seconds rather than a minute. Override with [`Timeouts::start`] (or the
/// builder's [`start_timeout`](crate::PluginClientBuilder::start_timeout)).
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a plugin has to print its handshake after its first stdout line that is not one (a
/// debug print, a banner).
///
/// The handshake must be a plugin's first stdout line; go-plugin fails at once on any other.
/// tether skips a few stray lines before it (within [`OutputLimits`](crate::launch::OutputLimits)),
/// but a plugin that prints one and then nothing has most often printed its log or banner on
/// stdout and will never print a handshake: it fails this long after its first stray line,
/// rather than at the start timeout, with
/// [`StartErrorKind::SilentAfterStray`](crate::error::StartErrorKind::SilentAfterStray)
/// quoting the line. A plugin that prints its banner first and its handshake within this
/// still starts. Not applied to a plugin in a Pod, whose log stream mixes stderr into stdout.
/// Override with [`Timeouts::after_stray`].
pub const DEFAULT_AFTER_STRAY_TIMEOUT: Duration = Duration::from_secs(3);

/// How long connecting to the announced address, TLS handshake included, may take.
///
/// Both ends are on this machine and the listener exists before the handshake is printed, so
/// this normally takes about a millisecond. Override with [`Timeouts::connect`].
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the start-up health check (`grpc.health.v1.Health/Check`) may take.
/// Override with [`Timeouts::health`].
pub const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the `GRPCController.Shutdown` call may take during
/// [`PluginClient::shutdown`](crate::PluginClient::shutdown). Override with
/// [`Timeouts::shutdown_rpc`].
pub const DEFAULT_SHUTDOWN_RPC_TIMEOUT: Duration = Duration::from_secs(2);

/// How long [`PluginClient::shutdown`](crate::PluginClient::shutdown) waits for the plugin to
/// exit after asking it to (go-plugin hard-codes the same 2 s) before sending `SIGTERM` to its
/// process group. Override with [`Timeouts::shutdown_grace`].
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// How long the plugin has to exit after `SIGTERM` before its process group gets `SIGKILL`.
/// Override with [`Timeouts::terminate_grace`].
pub const DEFAULT_TERMINATE_GRACE: Duration = Duration::from_secs(2);

/// How long the interpreter may take to answer where it lives (a pyenv shim runs a few shell
/// scripts first; a cold Python start with many `.pth` files takes a second). Override with
/// [`Timeouts::interpreter_query`].
pub const DEFAULT_INTERPRETER_QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a confined Python plugin's own interpreter may take to say where a module it could
/// not import would be found outside the sandbox, after the plugin exited with
/// `ModuleNotFoundError` (the answer tells "not installed" from "in a directory the sandbox
/// refused"). A Python start plus a look at `sys.path` takes a few hundred milliseconds; past
/// this, the start error gives the general advice instead. Override with
/// [`Timeouts::module_lookup`].
pub const DEFAULT_MODULE_LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// How long each stage of a launched plugin's life may take.
///
/// `Timeouts::default()` holds the `DEFAULT_*` constants of this module; set the ones to
/// change and hand the value to [`PluginClientBuilder::timeouts`](crate::PluginClientBuilder::timeouts):
///
/// ```
/// use std::time::Duration;
/// use tether_broker::launch::Timeouts;
/// let b = tether_broker::PluginClient::builder("/bin/plugin").timeouts(
///     Timeouts::default()
///         .shutdown_grace(Duration::from_millis(500))
///         .terminate_grace(Duration::from_millis(500)),
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timeouts {
    /// From spawn to the handshake line ([`DEFAULT_START_TIMEOUT`]).
    pub start: Duration,
    /// From the first stray stdout line to the handshake line, within [`start`](Self::start)
    /// ([`DEFAULT_AFTER_STRAY_TIMEOUT`]).
    pub after_stray: Duration,
    /// Connecting to the announced address, TLS included ([`DEFAULT_CONNECT_TIMEOUT`]).
    pub connect: Duration,
    /// The start-up health check ([`DEFAULT_HEALTH_TIMEOUT`]).
    pub health: Duration,
    /// The `GRPCController.Shutdown` call ([`DEFAULT_SHUTDOWN_RPC_TIMEOUT`]).
    pub shutdown_rpc: Duration,
    /// From asking the plugin to stop to `SIGTERM` ([`DEFAULT_SHUTDOWN_GRACE`]).
    pub shutdown_grace: Duration,
    /// From `SIGTERM` to `SIGKILL` ([`DEFAULT_TERMINATE_GRACE`]); also when a
    /// [`PluginClient`](crate::PluginClient) is dropped.
    pub terminate_grace: Duration,
    /// An interpreted plugin's interpreter asked where it lives
    /// ([`DEFAULT_INTERPRETER_QUERY_TIMEOUT`]).
    pub interpreter_query: Duration,
    /// After a `ModuleNotFoundError`, the interpreter asked where the module would be found
    /// outside the sandbox ([`DEFAULT_MODULE_LOOKUP_TIMEOUT`]).
    pub module_lookup: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            start: DEFAULT_START_TIMEOUT,
            after_stray: DEFAULT_AFTER_STRAY_TIMEOUT,
            connect: DEFAULT_CONNECT_TIMEOUT,
            health: DEFAULT_HEALTH_TIMEOUT,
            shutdown_rpc: DEFAULT_SHUTDOWN_RPC_TIMEOUT,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            terminate_grace: DEFAULT_TERMINATE_GRACE,
            interpreter_query: DEFAULT_INTERPRETER_QUERY_TIMEOUT,
            module_lookup: DEFAULT_MODULE_LOOKUP_TIMEOUT,
        }
    }
}

impl Timeouts {
    /// Sets [`start`](Self::start).
    #[must_use]
    pub fn start(mut self, timeout: Duration) -> Self {
        self.start = timeout;
        self
    }

    /// Sets [`after_stray`](Self::after_stray).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tether_broker::launch::Timeouts;
    /// // A plugin that prints a banner, then loads for a while before its handshake.
    /// let timeouts = Timeouts::default().after_stray(Duration::from_secs(30));
    /// assert_eq!(timeouts.after_stray, Duration::from_secs(30));
    /// ```
    #[must_use]
    pub fn after_stray(mut self, timeout: Duration) -> Self {
        self.after_stray = timeout;
        self
    }

    /// Sets [`connect`](Self::connect).
    #[must_use]
    pub fn connect(mut self, timeout: Duration) -> Self {
        self.connect = timeout;
        self
    }

    /// Sets [`health`](Self::health).
    #[must_use]
    pub fn health(mut self, timeout: Duration) -> Self {
        self.health = timeout;
        self
    }

    /// Sets [`shutdown_rpc`](Self::shutdown_rpc).
    #[must_use]
    pub fn shutdown_rpc(mut self, timeout: Duration) -> Self {
        self.shutdown_rpc = timeout;
        self
    }

    /// Sets [`shutdown_grace`](Self::shutdown_grace).
    #[must_use]
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Sets [`terminate_grace`](Self::terminate_grace).
    #[must_use]
    pub fn terminate_grace(mut self, grace: Duration) -> Self {
        self.terminate_grace = grace;
        self
    }

    /// Sets [`interpreter_query`](Self::interpreter_query).
    #[must_use]
    pub fn interpreter_query(mut self, timeout: Duration) -> Self {
        self.interpreter_query = timeout;
        self
    }

    /// Sets [`module_lookup`](Self::module_lookup).
    #[must_use]
    pub fn module_lookup(mut self, timeout: Duration) -> Self {
        self.module_lookup = timeout;
        self
    }
}
