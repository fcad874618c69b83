//! [`Confinement`]: everything that decides what a plugin may do, as one value. A manifest asks
//! for one, the operator's grants bound one, and the builder launches with one.
//!
//! # Adding a knob
//! A new confinement setting is a field here (documented with its default, set in
//! [`Default`], with a `#[must_use]` setter). Then, only as far as it applies: a manifest and
//! grants key in `crate::catalog::confinement` (the keys both files share), a
//! [`Request`](crate::catalog::Request) and its comparison in `crate::catalog::request` when
//! it loosens the default (so the operator must grant it), and its use in the stage that
//! applies it (`launch::plan` for paths and environment, `confine::sandbox` between fork and
//! exec, the gVisor bundle for that runner).

use std::ffi::OsString;
use std::path::PathBuf;

use crate::confine::network::NetworkMode;
use crate::confine::sandbox::{Limits, SandboxMode};
use crate::confine::seccomp::SeccompMode;
use crate::confine::world::NamespacesMode;
use crate::confine::world::ids::{DEFAULT_PLUGIN_IDS, PluginIds};

/// What a plugin may do: its file-system sandbox, system-call filter, network, user,
/// environment and resource limits.
///
/// The default is the strict one every plugin gets unless it asks for more and is granted it:
/// [`SandboxMode::Enforce`], [`SeccompMode::Default`], [`NetworkMode::None`] (through a network
/// namespace where the host can make one), the host's own user, no directories beyond the
/// system paths, only [`DEFAULT_ENV_ALLOWLIST`](crate::launch::DEFAULT_ENV_ALLOWLIST) from the
/// host's environment and [`Limits::default`] (no rlimits; processes capped at
/// [`DEFAULT_MAX_PROCESSES`](crate::confine::DEFAULT_MAX_PROCESSES)).
///
/// ```
/// use tether_broker::confine::{Confinement, NetworkMode};
/// use tether_broker::{Limits, PluginClient};
/// let confinement = Confinement::default()
///     .network(NetworkMode::Host)
///     .sandbox_allow_read("/srv/kv-data")
///     .env_allow("HOME")
///     .limits(Limits::default().memory_mib(512));
/// let b = PluginClient::builder("/usr/libexec/kv-plugin").confinement(confinement);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Confinement {
    /// How strictly the file system is confined (manifest key `sandbox`; default
    /// [`SandboxMode::Enforce`]).
    pub sandbox: SandboxMode,
    /// The system-call filter (`seccomp`; default [`SeccompMode::Default`]).
    pub seccomp: SeccompMode,
    /// The network (`network`; default [`NetworkMode::None`]).
    pub network: NetworkMode,
    /// Whether [`NetworkMode::None`] may be enforced with a network namespace of the plugin's
    /// own where the host can make one (default `true`); `false` always uses the seccomp
    /// filter on socket families (see [`NetworkMechanism`](crate::confine::NetworkMechanism)).
    /// The host's choice: not a manifest key.
    pub network_namespace: bool,
    /// Whether the plugin runs in a world of its own: user, mount, pid, IPC, UTS, cgroup and
    /// network namespaces around a root that holds only its plan's paths (default
    /// [`NamespacesMode::Preferred`]: where the host can make one; not with
    /// [`SandboxMode::Off`], which turns the file-system confinement off, world included,
    /// unless [`NamespacesMode::Required`]). Manifest key `namespaces`: `"off"` needs the
    /// operator's grant.
    pub namespaces: NamespacesMode,
    /// The ids a root host's plugins run as when no [`run_as`](Self::run_as) is set (default
    /// [`DEFAULT_PLUGIN_IDS`]): never the host's uid 0. The host's choice: not a manifest key.
    pub plugin_ids: PluginIds,
    /// The uid and gid the plugin runs as instead of the host's (root hosts only; default
    /// `None`). The host's choice: not a manifest key.
    pub run_as: Option<(u32, u32)>,
    /// Whether [`run_as`](Self::run_as) may be uid or gid 0 (default `false`: refused in
    /// [`Phase::Prepare`](crate::error::Phase::Prepare)), or a root host's plugin may run as
    /// the host's uid 0 without a world. An explicit loosening for the operator's policy: the
    /// plugin would hold the host's root over every file it reaches. Not a manifest key.
    pub allow_root: bool,
    /// Directories the plugin may also read and execute below (`sandbox_allow_exec`).
    pub sandbox_allow_exec: Vec<PathBuf>,
    /// Directories the plugin may also read below (`sandbox_allow_read`).
    pub sandbox_allow_read: Vec<PathBuf>,
    /// Names of host environment variables passed to the plugin besides the defaults
    /// (`env_allow`).
    pub env_allow: Vec<String>,
    /// Fixed environment values the plugin gets, in order, after the allowed host variables
    /// (which they override) and before the protocol's (which always win: the cookie,
    /// `PLUGIN_*`, `TETHER_*` and `TMPDIR` are ignored here with a warning). Manifest key `env`
    /// (`env = { VAULT_PLUGIN_AUTOMTLS_ENABLED = "true" }`): each name and value needs the
    /// operator's grant, as written (a variable such as `LD_PRELOAD`, `NODE_OPTIONS` or
    /// `PYTHONPATH` changes what the plugin runs); set by the host's own code with
    /// [`PluginClientBuilder::env`](crate::launch::PluginClientBuilder::env).
    pub env: Vec<(OsString, OsString)>,
    /// Whether the host's values of [`DEFAULT_ENV_ALLOWLIST`](crate::launch::DEFAULT_ENV_ALLOWLIST)
    /// are passed (default `true`). Not a manifest key.
    pub env_allow_defaults: bool,
    /// Resource limits (`[limits]`; default none but the process cap).
    pub limits: Limits,
}

impl Default for Confinement {
    fn default() -> Self {
        Self {
            sandbox: SandboxMode::Enforce,
            seccomp: SeccompMode::Default,
            network: NetworkMode::None,
            network_namespace: true,
            namespaces: NamespacesMode::default(),
            plugin_ids: DEFAULT_PLUGIN_IDS,
            run_as: None,
            allow_root: false,
            sandbox_allow_exec: Vec::new(),
            sandbox_allow_read: Vec::new(),
            env_allow: Vec::new(),
            env: Vec::new(),
            env_allow_defaults: true,
            limits: Limits::default(),
        }
    }
}

impl Confinement {
    /// Sets [`sandbox`](Self::sandbox).
    #[must_use]
    pub fn sandbox(mut self, mode: SandboxMode) -> Self {
        self.sandbox = mode;
        self
    }

    /// Sets [`seccomp`](Self::seccomp).
    #[must_use]
    pub fn seccomp(mut self, mode: SeccompMode) -> Self {
        self.seccomp = mode;
        self
    }

    /// Sets [`network`](Self::network).
    #[must_use]
    pub fn network(mut self, mode: NetworkMode) -> Self {
        self.network = mode;
        self
    }

    /// Sets [`network_namespace`](Self::network_namespace).
    #[must_use]
    pub fn network_namespace(mut self, allow: bool) -> Self {
        self.network_namespace = allow;
        self
    }

    /// Sets [`namespaces`](Self::namespaces).
    #[must_use]
    pub fn namespaces(mut self, mode: NamespacesMode) -> Self {
        self.namespaces = mode;
        self
    }

    /// Sets [`plugin_ids`](Self::plugin_ids).
    #[must_use]
    pub fn plugin_ids(mut self, ids: PluginIds) -> Self {
        self.plugin_ids = ids;
        self
    }

    /// Sets [`allow_root`](Self::allow_root).
    #[must_use]
    pub fn allow_root(mut self, allow: bool) -> Self {
        self.allow_root = allow;
        self
    }

    /// Sets [`run_as`](Self::run_as) to `uid`:`gid`.
    #[must_use]
    pub fn run_as(mut self, uid: u32, gid: u32) -> Self {
        self.run_as = Some((uid, gid));
        self
    }

    /// Adds a directory to [`sandbox_allow_exec`](Self::sandbox_allow_exec).
    #[must_use]
    pub fn sandbox_allow_exec(mut self, path: impl Into<PathBuf>) -> Self {
        self.sandbox_allow_exec.push(path.into());
        self
    }

    /// Adds a directory to [`sandbox_allow_read`](Self::sandbox_allow_read).
    #[must_use]
    pub fn sandbox_allow_read(mut self, path: impl Into<PathBuf>) -> Self {
        self.sandbox_allow_read.push(path.into());
        self
    }

    /// Adds a name to [`env_allow`](Self::env_allow).
    #[must_use]
    pub fn env_allow(mut self, name: impl Into<String>) -> Self {
        self.env_allow.push(name.into());
        self
    }

    /// Adds `name` = `value` to [`env`](Self::env).
    #[must_use]
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Sets [`env_allow_defaults`](Self::env_allow_defaults).
    #[must_use]
    pub fn env_allow_defaults(mut self, allow: bool) -> Self {
        self.env_allow_defaults = allow;
        self
    }

    /// Sets [`limits`](Self::limits).
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}
