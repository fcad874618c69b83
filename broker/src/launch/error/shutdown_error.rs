//! How a plugin ended ([`ShutdownOutcome`]) and why ending it failed ([`ShutdownError`]).

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

/// How a plugin ended, as returned by [`PluginClient::shutdown`](crate::PluginClient::shutdown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShutdownOutcome {
    /// It exited after `GRPCController.Shutdown`, within the shutdown grace.
    Graceful(ExitStatus),
    /// It exited after `SIGTERM` to its process group.
    Terminated(ExitStatus),
    /// It had to be killed with `SIGKILL`.
    Killed(ExitStatus),
    /// It had already exited on its own before shutdown began.
    AlreadyExited(ExitStatus),
}

impl ShutdownOutcome {
    /// The plugin's exit status.
    #[must_use]
    pub fn status(&self) -> ExitStatus {
        match *self {
            Self::Graceful(s) | Self::Terminated(s) | Self::Killed(s) | Self::AlreadyExited(s) => s,
        }
    }
}

impl fmt::Display for ShutdownOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = match self {
            Self::Graceful(_) => "exited gracefully",
            Self::Terminated(_) => "terminated by SIGTERM",
            Self::Killed(_) => "killed by SIGKILL",
            Self::AlreadyExited(_) => "had already exited",
        };
        write!(f, "{how} ({})", self.status())
    }
}

/// Why [`PluginClient::shutdown`](crate::PluginClient::shutdown) could not end the plugin
/// cleanly: which plugin, its process (and group) id, and what went wrong
/// ([`ShutdownErrorKind`]) — each fact once.
#[derive(Debug)]
pub struct ShutdownError {
    plugin: String,
    pid: u32,
    kind: ShutdownErrorKind,
}

/// What went wrong in a [`ShutdownError`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ShutdownErrorKind {
    /// Signalling the process group failed.
    Signal {
        /// The signal's name.
        signal: &'static str,
        /// The error from the operating system.
        source: io::Error,
    },
    /// Checking whether the plugin has exited failed.
    Wait {
        /// The error from the operating system.
        source: io::Error,
    },
    /// The plugin did not end even after `SIGKILL`.
    StillRunning {
        /// How long the host waited after `SIGKILL`.
        waited: Duration,
    },
    /// The plugin ended but its private directory could not be removed.
    Cleanup {
        /// How the plugin ended.
        outcome: ShutdownOutcome,
        /// The directory.
        dir: PathBuf,
        /// The error from the file system.
        source: io::Error,
    },
}

impl ShutdownError {
    pub(crate) fn new(plugin: impl Into<String>, pid: u32, kind: ShutdownErrorKind) -> Self {
        Self {
            plugin: plugin.into(),
            pid,
            kind,
        }
    }

    /// The plugin that was being ended.
    #[must_use]
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// Its process (and process group) id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// What went wrong.
    #[must_use]
    pub fn kind(&self) -> &ShutdownErrorKind {
        &self.kind
    }
}

impl fmt::Display for ShutdownError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ShutdownErrorKind as K;
        let (plugin, pid) = (&self.plugin, self.pid);
        match &self.kind {
            K::Signal { signal, source } => write!(
                f,
                "cannot send {signal} to the process group of plugin `{plugin}`: {source}; end it by hand (pid {pid})"
            ),
            K::Wait { source } => write!(
                f,
                "cannot wait for plugin `{plugin}` (pid {pid}) to exit: {source}; check the process by hand"
            ),
            K::StillRunning { waited } => write!(
                f,
                "plugin `{plugin}` (pid {pid}) still runs {waited:?} after SIGKILL; it is probably stuck in the kernel (uninterruptible sleep): check the process"
            ),
            K::Cleanup {
                outcome,
                dir,
                source,
            } => write!(
                f,
                "plugin `{plugin}` ended ({outcome}) but its private directory {} could not be removed: {source}; remove it by hand",
                dir.display()
            ),
        }
    }
}

impl std::error::Error for ShutdownError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        use ShutdownErrorKind as K;
        match &self.kind {
            K::Signal { source, .. } | K::Wait { source } | K::Cleanup { source, .. } => {
                Some(source)
            }
            K::StillRunning { .. } => None,
        }
    }
}
