//! What one launch is configured with: [`HandshakeConfig`] and the builder's settings. Plain
//! data, read by every stage; the defaults live beside the stages that use them and are filled
//! in by the builder.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use tether_proto::env::MagicCookie;

use crate::confine::confinement::Confinement;
use crate::launch::delivery::Delivery;
use crate::launch::interpreted::runtime::Runtime;
use crate::launch::output::limits::OutputLimits;
use crate::launch::runner::options::Runner;
use crate::launch::telemetry::Telemetry;
use crate::launch::timeouts::Timeouts;

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
    pub(crate) plaintext: bool,
    pub(crate) multiplex: bool,
    pub(crate) output_sink: Option<crate::launch::output::sink::OutputSink>,
    pub(crate) private_dir_base: Option<PathBuf>,
    pub(crate) port_range: (u16, u16),
    /// What the plugin may do.
    pub(crate) confinement: Confinement,
    /// How long each stage may take.
    pub(crate) timeouts: Timeouts,
    /// How much of its output is read and kept.
    pub(crate) output_limits: OutputLimits,
    /// What leaves the host with the plugin's calls, and who is told about them.
    pub(crate) telemetry: Telemetry,
    /// Whether the working directory was made by the host for this plugin (a supervisor's
    /// state directory): then it is given to the confinement's `run_as` user.
    pub(crate) working_dir_is_hosts: bool,
    /// Where the confinement's `run_as` was decided (`FILE:LINE` of a grants file), for the
    /// error of a host that cannot switch users.
    pub(crate) run_as_set_at: Option<String>,
    pub(crate) runtime: Runtime,
    pub(crate) sha256: Option<String>,
    pub(crate) delivery: Option<Arc<Delivery>>,
    pub(crate) delivery_dir: Option<PathBuf>,
    pub(crate) broker: tether_transport::GrpcBrokerConfig,
    pub(crate) host_services: Option<tonic::service::Routes>,
    pub(crate) runner: Runner,
}

impl Settings {
    /// The working directory, when the host made it for this plugin (a supervisor's state
    /// directory).
    pub(crate) fn hosts_working_dir(&self) -> Option<&std::path::Path> {
        self.current_dir
            .as_deref()
            .filter(|_| self.working_dir_is_hosts)
    }

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
