//! What one launch is configured with: [`HandshakeConfig`] and the builder's settings. Plain
//! data, read by every stage; the defaults live beside the stages that use them and are filled
//! in by the builder.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tether_proto::env::MagicCookie;

use crate::catalog::delivery::Delivery;
use crate::confine::network::NetworkMode;
use crate::confine::sandbox::{Limits, SandboxMode};
use crate::confine::seccomp::SeccompMode;
use crate::launch::interpreted::runtime::Runtime;
use crate::launch::runner::options::Runner;

/// The launch half of the handshake: the magic cookie and the app protocol versions the host
/// speaks.
///
/// ```
/// let hs = tether_broker::HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1, 2]);
/// assert_eq!(hs.offered_versions(), &[1, 2]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeConfig {
    pub(crate) cookie: MagicCookie,
    pub(crate) app_versions: Vec<u32>,
}

impl HandshakeConfig {
    /// A handshake with the magic cookie `key=value` offering app protocol version 1.
    ///
    /// The cookie is not a security feature: it only tells a plugin binary that it was started
    /// by a host rather than by a person.
    #[must_use]
    pub fn new(key: impl Into<String>, value: impl Into<OsString>) -> Self {
        Self {
            cookie: MagicCookie::new(key, value),
            app_versions: vec![1],
        }
    }

    /// The app protocol versions the host supports (replacing the default `[1]`); the plugin
    /// picks the highest one it also supports.
    #[must_use]
    pub fn app_versions(mut self, versions: impl IntoIterator<Item = u32>) -> Self {
        self.app_versions = versions.into_iter().collect();
        self
    }

    /// The app protocol versions offered to the plugin.
    #[must_use]
    pub fn offered_versions(&self) -> &[u32] {
        &self.app_versions
    }
}

/// Everything a builder holds except the handshake.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<OsString>,
    pub(crate) name: Option<String>,
    pub(crate) current_dir: Option<PathBuf>,
    pub(crate) env_allow_defaults: bool,
    pub(crate) env_allow: Vec<OsString>,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) plaintext: bool,
    pub(crate) multiplex: bool,
    pub(crate) output_sink: Option<crate::launch::output::sink::OutputSink>,
    pub(crate) runtime_dir: Option<PathBuf>,
    pub(crate) port_range: (u16, u16),
    pub(crate) start_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) health_timeout: Duration,
    pub(crate) shutdown_rpc_timeout: Duration,
    pub(crate) shutdown_grace: Duration,
    pub(crate) terminate_grace: Duration,
    pub(crate) max_stray_lines: usize,
    pub(crate) max_stray_bytes: usize,
    pub(crate) stderr_tail_len: usize,
    pub(crate) sandbox: SandboxMode,
    pub(crate) seccomp: SeccompMode,
    pub(crate) network: NetworkMode,
    /// Whether `NetworkMode::None` may use a network namespace (else the seccomp fallback).
    pub(crate) network_namespace: bool,
    /// The uid and gid the plugin runs as (root hosts only).
    pub(crate) run_as: Option<(u32, u32)>,
    /// Whether the working directory was made by the host for this plugin (a supervisor's
    /// state directory): then it is given to [`Self::run_as`]'s user.
    pub(crate) working_dir_is_hosts: bool,
    pub(crate) sandbox_exec: Vec<PathBuf>,
    pub(crate) sandbox_read: Vec<PathBuf>,
    pub(crate) runtime: Runtime,
    pub(crate) runtime_query_timeout: Duration,
    pub(crate) limits: Limits,
    pub(crate) sha256: Option<String>,
    pub(crate) delivery: Option<Arc<Delivery>>,
    pub(crate) delivery_dir: Option<PathBuf>,
    pub(crate) broker: tether_transport::GrpcBrokerConfig,
    pub(crate) host_services: Option<tonic::service::Routes>,
    pub(crate) runner: Runner,
}

impl Settings {
    /// The name used in logs and errors: the configured one or the program's file name.
    pub(crate) fn display_name(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        self.program
            .file_name()
            .unwrap_or(self.program.as_os_str())
            .to_string_lossy()
            .into_owned()
    }
}
