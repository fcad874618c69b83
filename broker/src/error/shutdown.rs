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
/// cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShutdownError {
    /// Signalling the process group failed.
    #[error(
        "cannot send {signal} to the process group of plugin `{plugin}`: {source}; end it by hand (pid {pid})"
    )]
    Signal {
        /// The plugin's name.
        plugin: String,
        /// Its process (and group) id.
        pid: u32,
        /// The signal's name.
        signal: &'static str,
        /// The error from the operating system.
        #[source]
        source: io::Error,
    },
    /// Checking whether the plugin has exited failed.
    #[error(
        "cannot wait for plugin `{plugin}` (pid {pid}) to exit: {source}; check the process by hand"
    )]
    Wait {
        /// The plugin's name.
        plugin: String,
        /// Its process id.
        pid: u32,
        /// The error from the operating system.
        #[source]
        source: io::Error,
    },
    /// The plugin did not end even after `SIGKILL`.
    #[error(
        "plugin `{plugin}` (pid {pid}) still runs {waited:?} after SIGKILL; it is probably stuck in the kernel (uninterruptible sleep): check the process"
    )]
    StillRunning {
        /// The plugin's name.
        plugin: String,
        /// Its process id.
        pid: u32,
        /// How long the host waited after `SIGKILL`.
        waited: Duration,
    },
    /// The plugin ended but its private directory could not be removed.
    #[error(
        "plugin `{plugin}` ended ({outcome}) but its private directory {} could not be removed: {source}; remove it by hand",
        dir.display()
    )]
    Cleanup {
        /// The plugin's name.
        plugin: String,
        /// How the plugin ended.
        outcome: ShutdownOutcome,
        /// The directory.
        dir: PathBuf,
        /// The error from the file system.
        #[source]
        source: io::Error,
    },
}
