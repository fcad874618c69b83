//! Noticing when to stop: the host process exiting, and SIGTERM/SIGINT.

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::error::{Error, StopReason};

/// The parent process id recorded at start-up, before anything could make it change.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Parent(Option<rustix::process::Pid>);

impl Parent {
    /// Records `getppid()` now. `None` when the parent is outside our pid namespace.
    pub(crate) fn record() -> Self {
        Self(rustix::process::getppid())
    }
}

/// Resolves when the host (the recorded parent) has exited.
#[derive(Debug)]
pub(crate) enum HostWatch {
    /// A pidfd on the parent; it becomes readable when the parent exits.
    #[cfg(target_os = "linux")]
    Pidfd(tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>),
    /// The parent was already gone when the watch was set up.
    Gone,
    /// Not watching (disabled, or impossible here); never resolves.
    Unwatched,
}

impl HostWatch {
    /// Starts watching `parent`. Must run inside a tokio runtime with IO enabled.
    #[cfg(target_os = "linux")]
    pub(crate) fn new(parent: Parent) -> Result<Self, Error> {
        use rustix::process::{PidfdFlags, getppid, pidfd_open};

        let Parent(Some(pid)) = parent else {
            tracing::debug!("the parent process is outside this pid namespace; not watching it");
            return Ok(Self::Unwatched);
        };
        let fd = match pidfd_open(pid, PidfdFlags::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::SRCH) => return Ok(Self::Gone),
            Err(error) => {
                tracing::warn!(
                    %error,
                    "cannot watch the host process (pidfd_open); the plugin will not exit on its own when the host dies"
                );
                return Ok(Self::Unwatched);
            }
        };
        // The parent may have exited between `record` and `pidfd_open`, and its pid may even
        // have been reused. If it is still our parent now, the pidfd refers to it: a parent's
        // pid cannot be reused while it is our parent. If not, we were re-parented: it is gone.
        if getppid() != Some(pid) {
            return Ok(Self::Gone);
        }
        // SAFETY: `fd` is an open pidfd owned by the `AsyncFd` from now on, so it stays open
        // and `as_raw_fd` returns the same descriptor for the `AsyncFd`'s whole lifetime.
        let fd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
        }
        .map_err(|e| Error::Watch {
            what: "watching the host process",
            source: e.into_parts().1,
        })?;
        Ok(Self::Pidfd(fd))
    }

    /// Watching needs pidfds, which only Linux has.
    #[cfg(not(target_os = "linux"))]
    pub(crate) fn new(_parent: Parent) -> Result<Self, Error> {
        tracing::warn!(
            "watching the host process is only supported on Linux; the plugin will not exit on its own when the host dies"
        );
        Ok(Self::Unwatched)
    }

    /// Resolves once the host has exited; never, if not watching.
    pub(crate) async fn exited(&self) {
        match self {
            #[cfg(target_os = "linux")]
            Self::Pidfd(fd) => {
                if let Err(error) = fd.readable().await {
                    tracing::warn!(%error, "watching the host process failed; no longer watching");
                    std::future::pending::<()>().await;
                }
            }
            Self::Gone => {}
            Self::Unwatched => std::future::pending().await,
        }
    }
}

/// SIGTERM and SIGINT handlers.
#[derive(Debug)]
pub(crate) struct Signals {
    term: Signal,
    int: Signal,
    ignore_sigint: bool,
}

impl Signals {
    /// Installs the handlers (from then on these signals no longer kill the process). Must run
    /// inside a tokio runtime.
    pub(crate) fn new(ignore_sigint: bool) -> Result<Self, Error> {
        let install = |kind| {
            signal(kind).map_err(|source| Error::Watch {
                what: "signal handlers",
                source,
            })
        };
        Ok(Self {
            term: install(SignalKind::terminate())?,
            int: install(SignalKind::interrupt())?,
            ignore_sigint,
        })
    }

    /// Waits for a signal that should stop the plugin.
    pub(crate) async fn recv(&mut self) -> StopReason {
        loop {
            tokio::select! {
                _ = self.term.recv() => return StopReason::Terminated,
                _ = self.int.recv() => {
                    if !self.ignore_sigint {
                        return StopReason::Interrupted;
                    }
                    tracing::debug!("SIGINT ignored");
                }
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_parent_that_is_already_gone_is_reported_at_once() {
        // Spawn a child that exits, and "watch" it as if it were our parent: it is not our
        // parent, so the re-check of getppid() says gone.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = rustix::process::Pid::from_child(&child);
        child.wait().unwrap();
        let watch = HostWatch::new(Parent(Some(pid))).unwrap();
        assert!(matches!(watch, HostWatch::Gone));
        watch.exited().await;
    }

    #[tokio::test]
    async fn the_real_parent_is_watched_and_has_not_exited() {
        let watch = HostWatch::new(Parent::record()).unwrap();
        assert!(matches!(watch, HostWatch::Pidfd(_)));
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(20), watch.exited()).await;
        assert!(waited.is_err(), "the test runner is still alive");
    }
}
