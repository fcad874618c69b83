//! Why a catalog plugin could not be used: [`UseError`] (plugin, [`UseErrorKind`]); why it
//! could not be upgraded: [`UpgradeError`] (plugin, [`UpgradePhase`], [`UpgradeErrorKind`]).

use std::fmt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use tether_proto::ValueKind;

use crate::catalog::request::NotGranted;
use crate::launch::error::{Phase, StartError};

/// Why a plugin could not be used: which plugin, and what went wrong ([`UseErrorKind`]) —
/// each fact once.
#[derive(Debug)]
pub struct UseError {
    plugin: String,
    /// Boxed: a `Result<_, UseError>` stays small on the happy path.
    kind: Box<UseErrorKind>,
}

/// What went wrong in a [`UseError`].
#[derive(Debug)]
#[non_exhaustive]
pub enum UseErrorKind {
    /// No plugin of that name loaded from the catalog.
    UnknownPlugin,
    /// The manifest asks for something that is not granted.
    NotGranted(NotGranted),
    /// A granted value is not in its source.
    MissingValue {
        /// `secret` or `config`.
        kind: ValueKind,
        /// The name.
        name: String,
        /// The source's description.
        source_name: String,
    },
    /// A value source could not be read.
    Source {
        /// `secret` or `config`.
        kind: ValueKind,
        /// The name.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// The plugin's state (working) directory cannot be made.
    StateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Starting the plugin failed.
    Start(Box<StartError>),
    /// The plugin exited while in use.
    Crashed {
        /// Its exit status (code or signal).
        status: ExitStatus,
        /// The end of what it wrote to stderr.
        stderr_tail: String,
    },
    /// The plugin stopped answering health checks and was killed.
    Hung {
        /// What the health check saw.
        reason: String,
    },
    /// The call got no answer within the host-side call timeout ([`DEFAULT_CALL_TIMEOUT`](crate::supervisor::DEFAULT_CALL_TIMEOUT)).
    DeadlineExceeded {
        /// The call timeout that ran out.
        timeout: Duration,
        /// Whether this call completed the run of deadlines after which the plugin is recycled
        /// ([`DEFAULT_RECYCLE_AFTER_DEADLINES`](crate::supervisor::DEFAULT_RECYCLE_AFTER_DEADLINES)).
        recycled: bool,
    },
    /// The plugin crashed too often: it is not restarted.
    KeepsCrashing {
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
    Call {
        /// The gRPC status.
        status: Box<tonic::Status>,
    },
    /// The supervisor was shut down.
    ShutDown,
    /// The plugin was upgraded ([`Supervisor::upgrade`](crate::Supervisor::upgrade)) and the
    /// instance this lease held was stopped when the grace ran out, the lease still held.
    Replaced {
        /// The grace the old instance was given ([`DEFAULT_UPGRADE_GRACE`](crate::supervisor::DEFAULT_UPGRADE_GRACE)).
        grace: Duration,
    },
}

impl UseError {
    pub(crate) fn new(plugin: impl Into<String>, kind: UseErrorKind) -> Self {
        Self {
            plugin: plugin.into(),
            kind: Box::new(kind),
        }
    }

    /// The plugin that could not be used.
    #[must_use]
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// What went wrong.
    #[must_use]
    pub fn kind(&self) -> &UseErrorKind {
        &self.kind
    }
}

impl From<NotGranted> for UseError {
    fn from(refused: NotGranted) -> Self {
        Self::new(refused.plugin.clone(), UseErrorKind::NotGranted(refused))
    }
}

impl From<StartError> for UseError {
    fn from(failed: StartError) -> Self {
        Self::new(
            failed.plugin().to_owned(),
            UseErrorKind::Start(Box::new(failed)),
        )
    }
}

impl fmt::Display for UseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use UseErrorKind as K;
        let plugin = &self.plugin;
        match &*self.kind {
            K::UnknownPlugin => write!(
                f,
                "no plugin named `{plugin}` in the catalog; check its manifest (bad manifests are listed by `Catalog::errors`)"
            ),
            K::NotGranted(refused) => fmt::Display::fmt(refused, f),
            K::MissingValue {
                kind,
                name,
                source_name,
            } => write!(
                f,
                "plugin `{plugin}` needs {kind} `{name}`, but the {kind} source ({source_name}) has no value of that name; add it there"
            ),
            K::Source { kind, name, source } => {
                write!(
                    f,
                    "cannot read {kind} `{name}` for plugin `{plugin}`: {source}"
                )
            }
            K::StateDir { path, source } => write!(
                f,
                "cannot create the state directory {} of plugin `{plugin}`: {source}",
                path.display()
            ),
            K::Start(failed) => fmt::Display::fmt(failed, f),
            K::Crashed {
                status,
                stderr_tail,
            } => write!(
                f,
                "plugin `{plugin}` crashed ({status}); calls in flight failed. stderr (tail): {stderr_tail:?}. It is restarted on the next use"
            ),
            K::Hung { reason } => write!(
                f,
                "plugin `{plugin}` hung ({reason}) and was killed; calls in flight failed. It is restarted on the next use"
            ),
            K::DeadlineExceeded { timeout, recycled } => write!(
                f,
                "plugin `{plugin}` did not answer within {timeout:?}{}",
                if *recycled {
                    "; its calls keep running out their deadline, so it was killed and is restarted on the next use"
                } else {
                    "; the call was abandoned (raise `call_timeout` if the call is legitimately slow)"
                }
            ),
            K::KeepsCrashing {
                crashes,
                window,
                max_restarts,
                last_status,
                stderr_tail,
            } => write!(
                f,
                "plugin `{plugin}` keeps crashing: {crashes} crashes within {window:?} (the manifest allows {max_restarts} restarts); last exit {last_status}, stderr (tail): {stderr_tail:?}. Fix the plugin; it is restarted once its crashes are older than {window:?}"
            ),
            K::Call { status } => write!(f, "plugin `{plugin}` answered with an error: {status}"),
            K::ShutDown => write!(
                f,
                "the supervisor is shut down; plugin `{plugin}` cannot be used"
            ),
            K::Replaced { grace } => write!(
                f,
                "plugin `{plugin}` was upgraded and this lease's old instance stopped after the {grace:?} grace; acquire the plugin again for its new version (or raise `upgrade_grace`)"
            ),
        }
    }
}

impl std::error::Error for UseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        use UseErrorKind as K;
        match &*self.kind {
            K::NotGranted(refused) => std::error::Error::source(refused),
            K::Start(failed) => std::error::Error::source(&**failed),
            K::Source { source, .. } | K::StateDir { source, .. } => Some(source),
            K::UnknownPlugin
            | K::MissingValue { .. }
            | K::Crashed { .. }
            | K::Hung { .. }
            | K::DeadlineExceeded { .. }
            | K::KeepsCrashing { .. }
            | K::Call { .. }
            | K::ShutDown
            | K::Replaced { .. } => None,
        }
    }
}

/// Why a plugin was not upgraded ([`Supervisor::upgrade`](crate::Supervisor::upgrade)): which
/// plugin, in which [`UpgradePhase`], and why ([`UpgradeErrorKind`]). The version that was
/// serving keeps serving, and nothing of the new one is left (process, sockets, directories,
/// cgroup).
#[derive(Debug)]
pub struct UpgradeError {
    plugin: String,
    /// Boxed: a `Result<_, UpgradeError>` stays small on the happy path.
    kind: Box<UpgradeErrorKind>,
}

/// What went wrong in an [`UpgradeError`].
#[derive(Debug)]
#[non_exhaustive]
pub enum UpgradeErrorKind {
    /// No plugin of that name in the supervisor: it runs the catalog it was built with, and a
    /// plugin added to the catalog needs a new supervisor.
    UnknownPlugin,
    /// The new version could not be started: its manifest is not granted, a value it asks for
    /// is missing, or its launch failed (the [`StartError`] inside names the launch's phase,
    /// the exit status and what the plugin printed).
    NotStarted(UseError),
    /// The supervisor was shut down during the upgrade; the new instance was stopped.
    ShutDown,
}

/// Where an upgrade failed ([`UpgradeError::phase`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpgradePhase {
    /// Checking the new version before anything runs: the plugin's name, the grants, the
    /// values it asks for, its state directory.
    Check,
    /// Starting the new instance, up to its health check; the launch's own [`Phase`].
    Start(Phase),
    /// Switching new calls to the new instance.
    Switch,
}

impl fmt::Display for UpgradePhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Check => f.write_str("check"),
            Self::Start(phase) => write!(f, "start ({phase})"),
            Self::Switch => f.write_str("switch"),
        }
    }
}

impl UpgradeError {
    pub(crate) fn new(plugin: impl Into<String>, kind: UpgradeErrorKind) -> Self {
        Self {
            plugin: plugin.into(),
            kind: Box::new(kind),
        }
    }

    /// The plugin that was not upgraded.
    #[must_use]
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// What went wrong.
    #[must_use]
    pub fn kind(&self) -> &UpgradeErrorKind {
        &self.kind
    }

    /// Where the upgrade failed.
    #[must_use]
    pub fn phase(&self) -> UpgradePhase {
        match &*self.kind {
            UpgradeErrorKind::UnknownPlugin => UpgradePhase::Check,
            UpgradeErrorKind::NotStarted(cause) => match cause.kind() {
                UseErrorKind::Start(failed) => UpgradePhase::Start(failed.phase()),
                _ => UpgradePhase::Check,
            },
            UpgradeErrorKind::ShutDown => UpgradePhase::Switch,
        }
    }
}

impl fmt::Display for UpgradeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (plugin, phase) = (&self.plugin, self.phase());
        write!(f, "plugin `{plugin}` was not upgraded ({phase} failed): ")?;
        match &*self.kind {
            UpgradeErrorKind::UnknownPlugin => write!(
                f,
                "the host's supervisor has no plugin of that name; a plugin added to the catalog needs a restart of the host"
            ),
            UpgradeErrorKind::NotStarted(cause) => {
                write!(f, "{cause}. The running version keeps serving")
            }
            UpgradeErrorKind::ShutDown => write!(
                f,
                "the supervisor shut down meanwhile; the new instance was stopped"
            ),
        }
    }
}

impl std::error::Error for UpgradeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &*self.kind {
            UpgradeErrorKind::NotStarted(cause) => Some(cause),
            UpgradeErrorKind::UnknownPlugin | UpgradeErrorKind::ShutDown => None,
        }
    }
}
