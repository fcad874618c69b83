//! Why a plugin did not start: [`StartError`] (plugin, [`Phase`], [`PluginOutput`],
//! [`StartErrorKind`]) and the facts it refers to.
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use tether_proto::handshake::HandshakeError;
use tether_proto::text::escape;

use super::refusal::{AddressProblem, Incompatibility};
use tether_transport::BoxError;

/// The phase of start-up in which a [`StartError`] happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Phase {
    /// Making the private directory and the TLS identity, before anything runs.
    Prepare,
    /// Starting the plugin's process.
    Spawn,
    /// Reading the handshake line from the plugin's stdout and checking it.
    Handshake,
    /// Connecting to the announced address (TLS included).
    Connect,
    /// The gRPC health check.
    HealthCheck,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Prepare => "prepare",
            Self::Spawn => "spawn",
            Self::Handshake => "handshake",
            Self::Connect => "connect",
            Self::HealthCheck => "health check",
        })
    }
}

/// What a plugin had printed when its start failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginOutput {
    /// Its stdout before the failure (stray lines and the handshake line), truncated to
    /// [`MAX_QUOTED_STDOUT`](crate::launch::MAX_QUOTED_STDOUT) bytes.
    pub stdout: String,
    /// The last bytes of its stderr (see
    /// [`DEFAULT_STDERR_TAIL_LEN`](crate::launch::DEFAULT_STDERR_TAIL_LEN)).
    pub stderr_tail: String,
}

impl fmt::Display for PluginOutput {
    /// Writes ` stdout: "…"; stderr (tail): "…"` with both quoted on one line and
    /// [escaped](tether_proto::text), or a note that the plugin printed nothing; meant to end
    /// an error message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (stdout, stderr) = (escape(&self.stdout), escape(&self.stderr_tail));
        match (self.stdout.is_empty(), self.stderr_tail.is_empty()) {
            (true, true) => f.write_str(" It printed nothing on stdout or stderr."),
            (false, true) => write!(f, " stdout: \"{stdout}\"; stderr: empty."),
            (true, false) => write!(f, " stderr (tail): \"{stderr}\""),
            (false, false) => write!(f, " stdout: \"{stdout}\"; stderr (tail): \"{stderr}\""),
        }
    }
}

/// The limit on a plugin's output before its handshake that was exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutputLimit {
    /// More stray lines than this.
    Lines(usize),
    /// More stray bytes than this.
    Bytes(usize),
    /// A line longer than this (the handshake maximum).
    LineLength(usize),
}

impl fmt::Display for OutputLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Lines(n) => write!(f, "more than {n} lines"),
            Self::Bytes(n) => write!(f, "more than {n} bytes"),
            Self::LineLength(n) => write!(f, "a line longer than {n} bytes"),
        }
    }
}

/// Why [`PluginClientBuilder::start`](crate::PluginClientBuilder::start) failed: which plugin,
/// in which [`Phase`], what it had printed, and what went wrong ([`StartErrorKind`]) — each
/// fact once.
///
/// The plugin's process group has been ended and its private directory removed by the time
/// this is returned.
#[derive(Debug)]
pub struct StartError {
    plugin: String,
    phase: Phase,
    output: Option<Box<PluginOutput>>,
    kind: StartErrorKind,
}

/// What went wrong in a [`StartError`].
#[derive(Debug)]
#[non_exhaustive]
pub enum StartErrorKind {
    /// The private directory, the delivered files, the TLS identity or the host services could
    /// not be made.
    Prepare {
        /// What was being made.
        what: &'static str,
        /// Why it failed.
        source: BoxError,
    },
    /// [`run_as`](crate::PluginClientBuilder::run_as) on a host that is not root: only root
    /// can start a process as another user.
    RunAsNeedsRoot {
        /// The uid asked for.
        uid: u32,
        /// The gid asked for.
        gid: u32,
        /// The host's effective uid.
        host_uid: u32,
        /// Where `run_as` was set when a catalog's grants file set it (`FILE:LINE`).
        set_at: Option<String>,
    },
    /// The plugin cannot get a world of its own (namespaces) and the operator requires one, or
    /// its user cannot be mapped into one.
    World(crate::confine::world::WorldError),
    /// The plugin binary failed its integrity check (`sha256`).
    Integrity(Box<crate::confine::integrity::IntegrityError>),
    /// The plugin's confinement cannot be prepared.
    Sandbox {
        /// The sandbox mode asked for.
        mode: crate::confine::sandbox::SandboxMode,
        /// Why.
        source: Box<crate::confine::sandbox::SandboxError>,
    },
    /// The interpreter of an interpreted plugin could not be resolved (see
    /// [`PluginClientBuilder::runtime`](crate::PluginClientBuilder::runtime)).
    Runtime(Box<crate::launch::interpreted::runtime::RuntimeError>),
    /// The plugin's runner is not installed (e.g. gVisor's `runsc` for
    /// [`Runner::Gvisor`](crate::launch::Runner::Gvisor)).
    RunnerMissing {
        /// The runner (`gvisor`).
        runner: &'static str,
        /// The program that was looked for.
        program: PathBuf,
        /// How to install it.
        hint: &'static str,
    },
    /// The runner itself failed to prepare or start the plugin (e.g. `runsc failed: …`),
    /// rather than the plugin.
    Runner {
        /// The runner (`gvisor`).
        runner: &'static str,
        /// The runner's own account of the failure.
        problem: String,
    },
    /// The process could not be started.
    Spawn {
        /// The program that was to be run.
        program: PathBuf,
        /// The error from the operating system.
        source: io::Error,
    },
    /// No handshake line within the start timeout.
    Timeout {
        /// The start timeout.
        timeout: Duration,
    },
    /// The plugin exited during start-up (in the error's [phase](StartError::phase)).
    Exited {
        /// Its exit status.
        status: ExitStatus,
    },
    /// The plugin exited before its handshake saying it was not launched by its host (go-plugin's
    /// and every tether SDK's message for a missing or wrong magic cookie): the cookie the host
    /// set is not the one the plugin expects. Only the cookie's key is kept: the cookie is not
    /// a secret (it only tells a plugin that a host started it), but its value stays where it
    /// was set (a manifest, a command line) and is never repeated in errors or logs.
    CookieRefused {
        /// Its exit status.
        status: ExitStatus,
        /// The name of the cookie variable the host set.
        cookie_key: String,
    },
    /// The confined plugin exited before its handshake with signs that the sandbox refused it
    /// something (exit status 126/127, or a permission or import error on its stderr).
    SandboxDenied {
        /// Its exit status.
        status: ExitStatus,
        /// The sandbox mode it ran under.
        mode: crate::confine::sandbox::SandboxMode,
        /// What shows the denial and what to allow.
        denial: crate::launch::interpreted::denial::Denial,
    },
    /// The confined plugin exited before its handshake because a network call (a socket,
    /// `bind` or `connect`) was refused under `network = "none"`: its network setting, not a
    /// file the sandbox refused, is the cause.
    NetworkDenied {
        /// Its exit status.
        status: ExitStatus,
        /// What shows it, and how `none` was enforced.
        refusal: Box<crate::launch::interpreted::network::NetworkRefusal>,
    },
    /// The confined plugin exited before its handshake unable to import a module that its
    /// interpreter cannot import outside the sandbox either: the module is not installed, and
    /// the sandbox is not the cause.
    NotInstalled {
        /// Its exit status.
        status: ExitStatus,
        /// The module, the interpreter and what shows it.
        missing: Box<crate::launch::interpreted::module::MissingModule>,
    },
    /// stdout ended (or could not be read) without a handshake while the plugin kept running.
    StdoutClosed,
    /// The plugin printed too much before its handshake.
    TooMuchOutput {
        /// The limit exceeded.
        limit: OutputLimit,
    },
    /// The plugin printed stdout lines that are not a handshake and then nothing within the
    /// after-stray timeout ([`Timeouts::after_stray`](crate::launch::Timeouts::after_stray)):
    /// most often a debug print or a banner on stdout, where the handshake must be the first
    /// line (go-plugin hosts fail at once on it).
    SilentAfterStray {
        /// The first stray line, truncated to
        /// [`MAX_QUOTED_STRAY_LINE`](crate::launch::MAX_QUOTED_STRAY_LINE) bytes; escaped when
        /// shown.
        first_line: String,
        /// How many stray lines it printed.
        lines: usize,
        /// The after-stray timeout it was given.
        waited: Duration,
    },
    /// A line that looks like a handshake but is not a valid one.
    Malformed {
        /// The line, truncated.
        line: String,
        /// What is wrong with it.
        error: HandshakeError,
    },
    /// A valid handshake this host cannot accept.
    Incompatible {
        /// What does not match.
        reason: Incompatibility,
        /// The app protocol versions the host offered.
        offered: Vec<u32>,
    },
    /// AutoMTLS is on but the handshake carries no certificate.
    NoAutoMtls,
    /// The announced address is not one the host connects to.
    Address {
        /// The announced address.
        address: String,
        /// What is wrong with it.
        problem: AddressProblem,
    },
    /// Connecting to the plugin failed before TLS.
    Connect {
        /// The announced address.
        address: String,
        /// Why it failed.
        source: BoxError,
    },
    /// The TLS handshake with the plugin failed.
    Tls {
        /// The announced address.
        address: String,
        /// The TLS error.
        source: io::Error,
    },
    /// Connecting (TLS included) took longer than the connect timeout.
    ConnectTimeout {
        /// The announced address.
        address: String,
        /// The connect timeout.
        timeout: Duration,
    },
    /// The health check RPC failed.
    HealthCheck(Box<tonic::Status>),
    /// The plugin answered the health check with a status other than `SERVING`.
    Unhealthy {
        /// The reported status name (e.g. `NOT_SERVING`).
        status: String,
    },
    /// The health check took longer than the health timeout.
    HealthTimeout {
        /// The health timeout.
        timeout: Duration,
    },
}

impl StartErrorKind {
    /// The phase this failure belongs to; `Exited` happens in any phase after the spawn, so its
    /// phase is `during` (where the plugin was when it exited).
    pub(crate) fn phase(&self, during: Phase) -> Phase {
        match self {
            Self::Prepare { .. }
            | Self::RunAsNeedsRoot { .. }
            | Self::World(_)
            | Self::Integrity(_)
            | Self::Sandbox { .. }
            | Self::Runtime(_)
            | Self::RunnerMissing { .. } => Phase::Prepare,
            Self::Spawn { .. } | Self::Runner { .. } => Phase::Spawn,
            Self::Exited { .. }
            | Self::SandboxDenied { .. }
            | Self::NetworkDenied { .. }
            | Self::NotInstalled { .. } => during,
            Self::Timeout { .. }
            | Self::CookieRefused { .. }
            | Self::StdoutClosed
            | Self::TooMuchOutput { .. }
            | Self::SilentAfterStray { .. }
            | Self::Malformed { .. }
            | Self::Incompatible { .. }
            | Self::NoAutoMtls => Phase::Handshake,
            Self::Address { .. }
            | Self::Connect { .. }
            | Self::Tls { .. }
            | Self::ConnectTimeout { .. } => Phase::Connect,
            Self::HealthCheck(_) | Self::Unhealthy { .. } | Self::HealthTimeout { .. } => {
                Phase::HealthCheck
            }
        }
    }
}

/// A start-up stage's failure, before the plugin's name and output are attached.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) phase: Phase,
    pub(crate) kind: StartErrorKind,
}

impl Failure {
    /// A failure whose phase follows from its kind (`Exited` needs [`Failure::exited`]).
    pub(crate) fn new(kind: StartErrorKind) -> Self {
        Self {
            phase: kind.phase(Phase::Prepare),
            kind,
        }
    }

    /// The plugin exited during `phase`.
    pub(crate) fn exited(phase: Phase, status: ExitStatus) -> Self {
        Self {
            phase,
            kind: StartErrorKind::Exited { status },
        }
    }
}

impl From<StartErrorKind> for Failure {
    fn from(kind: StartErrorKind) -> Self {
        Self::new(kind)
    }
}

impl StartError {
    /// `failure` of plugin `plugin`, with what it printed (`None` before it was spawned).
    pub(crate) fn new(plugin: &str, failure: Failure, output: Option<PluginOutput>) -> Self {
        Self {
            plugin: plugin.to_owned(),
            phase: failure.phase,
            output: output.map(Box::new),
            kind: failure.kind,
        }
    }

    /// The plugin's name.
    #[must_use]
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// The phase of start-up that failed.
    #[must_use]
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// What the plugin printed before the failure; `None` before it was spawned.
    #[must_use]
    pub fn output(&self) -> Option<&PluginOutput> {
        self.output.as_deref()
    }

    /// What went wrong.
    #[must_use]
    pub fn kind(&self) -> &StartErrorKind {
        &self.kind
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        use StartErrorKind as K;
        match &self.kind {
            K::Prepare { source, .. } | K::Connect { source, .. } => Some(&**source),
            K::Integrity(source) => Some(&**source),
            K::World(source) => Some(source),
            K::Sandbox { source, .. } => Some(&**source),
            K::Runtime(source) => Some(&**source),
            K::Spawn { source, .. } | K::Tls { source, .. } => Some(source),
            K::Malformed { error, .. } => Some(error),
            K::Address { problem, .. } => Some(problem),
            K::HealthCheck(source) => Some(&**source),
            K::Timeout { .. }
            | K::RunnerMissing { .. }
            | K::Runner { .. }
            | K::Exited { .. }
            | K::CookieRefused { .. }
            | K::SandboxDenied { .. }
            | K::NetworkDenied { .. }
            | K::NotInstalled { .. }
            | K::StdoutClosed
            | K::TooMuchOutput { .. }
            | K::SilentAfterStray { .. }
            | K::Incompatible { .. }
            | K::NoAutoMtls
            | K::RunAsNeedsRoot { .. }
            | K::ConnectTimeout { .. }
            | K::Unhealthy { .. }
            | K::HealthTimeout { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_quoted_on_one_line() {
        let out = PluginOutput {
            stdout: "banner".into(),
            stderr_tail: "line 1\nline \"2\"".into(),
        };
        let text = out.to_string();
        assert!(!text.contains('\n'));
        assert_eq!(
            text,
            r#" stdout: "banner"; stderr (tail): "line 1\nline "2"""#
        );
        assert_eq!(
            PluginOutput::default().to_string(),
            " It printed nothing on stdout or stderr."
        );
    }

    #[test]
    fn start_errors_name_plugin_phase_and_remedy() {
        let err = StartError::new(
            "kv",
            Failure::new(StartErrorKind::NoAutoMtls),
            Some(PluginOutput::default()),
        );
        assert_eq!(err.phase(), Phase::Handshake);
        assert_eq!(err.plugin(), "kv");
        let text = err.to_string();
        assert!(text.starts_with("plugin `kv` does not support AutoMTLS"));
        assert!(text.contains(".plaintext()"));
    }

    #[test]
    fn an_app_version_mismatch_names_the_versions_and_where_to_offer_one_without_the_certificate() {
        let cert = "MII".to_owned() + &"A".repeat(800);
        let kind = StartErrorKind::Incompatible {
            reason: Incompatibility::AppVersion { got: 5 },
            offered: vec![1, 2],
        };
        let output = PluginOutput {
            stdout: format!("1|5|unix|/tmp/x/plugin.sock|grpc|{cert}"),
            stderr_tail: String::new(),
        };
        let text = StartError::new("vault", Failure::new(kind), Some(output)).to_string();
        assert!(
            text.starts_with("plugin `vault` speaks app protocol version 5, but the host offered only app protocol versions 1 and 2"),
            "{text}"
        );
        for hint in [
            "`app_versions = [5]`",
            "`--app-version 5`",
            "HandshakeConfig::app_versions",
        ] {
            assert!(text.contains(hint), "{hint}: {text}");
        }
        assert!(!text.contains(&cert[..40]), "{text}");
        assert!(text.len() < 500, "{} bytes: {text}", text.len());
    }

    #[test]
    fn run_as_on_a_host_that_is_not_root_fails_before_anything_is_made_and_says_what_to_do() {
        let kind = StartErrorKind::RunAsNeedsRoot {
            uid: 65534,
            gid: 65534,
            host_uid: 1000,
            set_at: Some("/etc/tether/grants.toml:4".into()),
        };
        let err = StartError::new("kv", Failure::new(kind), None);
        assert_eq!(err.phase(), Phase::Prepare);
        let text = err.to_string();
        assert!(
            text.starts_with(
                "plugin `kv` is to run as uid 65534, gid 65534 (`run_as` at /etc/tether/grants.toml:4)"
            ),
            "{text}"
        );
        assert!(text.contains("host runs as uid 1000") && text.contains("drop `run_as`"));
        assert!(text.contains("phase: prepare"), "{text}");
    }

    #[test]
    fn silence_after_a_stray_line_quotes_it_escaped_and_says_to_log_to_stderr() {
        let kind = StartErrorKind::SilentAfterStray {
            first_line: "debug: \u{1b}[2Jready?".into(),
            lines: 1,
            waited: Duration::from_secs(3),
        };
        let output = PluginOutput {
            stdout: "debug: \u{1b}[2Jready?".into(),
            stderr_tail: String::new(),
        };
        let err = StartError::new("kv", Failure::new(kind), Some(output));
        assert_eq!(err.phase(), Phase::Handshake);
        let text = err.to_string();
        assert!(
            text.starts_with("plugin `kv` printed 1 line on stdout that is not a handshake (the first: \"debug: \\x1b[2Jready?\") and then no handshake within 3s;"),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'), "{text}");
        assert!(
            text.contains("the first line a plugin prints on stdout must be its handshake: write logs, debug output and banners to stderr"),
            "{text}"
        );
        assert!(text.contains("Timeouts::after_stray"), "{text}");
    }

    #[test]
    fn start_errors_stay_small() {
        assert!(std::mem::size_of::<StartError>() <= 128);
    }
}
