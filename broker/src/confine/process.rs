//! The plugin's process group: signalling it, noticing the plugin's exit, reaping it.
//!
//! The plugin runs as the leader of its own session and process group (pgid = its pid). A group id stays
//! reserved while its leader is unreaped, so the leader is reaped only under a lock after
//! checking, and signals go to the group only under the same lock while the leader is known to
//! be unreaped: a signal can never reach an unrelated process that reused the id. When the
//! leader has exited, whatever is left of its group gets `SIGKILL` before the leader is reaped:
//! a plugin's process group lives and dies with the plugin.
//!
//! A plugin that is not a process of this host (a Pod, under the Pod runner) is a
//! [`Remote`] leader: the runner signals it its own way and reports its exit.

use std::io;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tether_transport::internal::lock;

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// How often exit is checked when no `SIGCHLD` arrives.
const EXIT_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// A spawned plugin's process group.
#[derive(Debug)]
pub(crate) struct ProcessGroup {
    /// The leader's id; `None` for a [`Remote`] plugin.
    pid: Option<Pid>,
    plugin: Arc<str>,
    child: Mutex<Leader>,
    exit: watch::Sender<Option<ExitStatus>>,
    on_exit: Mutex<Vec<ExitHook>>,
}

/// The plugin's process (the group's leader) as the host waits for it.
#[derive(Debug)]
pub(crate) enum Leader {
    /// Spawned by tokio (the gVisor runner's `runsc`).
    Tokio(tokio::process::Child),
    /// A child of this process spawned by `launch::runner::process::spawn`, reaped here (once: the group keeps
    /// the status).
    Spawned(u32),
    /// A plugin elsewhere (a Pod): ended and watched by its runner.
    #[cfg_attr(
        not(feature = "kubernetes"),
        allow(
            dead_code,
            reason = "only the Pod runner (feature `kubernetes`) makes one"
        )
    )]
    Remote(Arc<dyn Remote>),
}

/// A plugin that is not a process of this host: its runner ends it (`TERM`: gracefully, within
/// the terminate grace; `KILL`: at once) and reports its exit through the watch it hands out.
pub(crate) trait Remote: std::fmt::Debug + Send + Sync {
    /// Starts ending the plugin; `Ok(false)` when it has already ended.
    fn signal(&self, signal: Signal) -> io::Result<bool>;
    /// Becomes `Some` once the plugin has ended and everything the runner made for it is gone.
    fn exit(&self) -> watch::Receiver<Option<ExitStatus>>;
}

impl Leader {
    fn id(&self) -> Option<u32> {
        match self {
            Self::Tokio(child) => child.id(),
            Self::Spawned(pid) => Some(*pid),
            Self::Remote(_) => None,
        }
    }

    /// Reaps the leader if it has exited.
    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match self {
            Self::Tokio(child) => child.try_wait(),
            Self::Spawned(pid) => {
                let Some(pid) = i32::try_from(*pid).ok().and_then(Pid::from_raw) else {
                    return Err(io::Error::other("the plugin's process id is out of range"));
                };
                let reaped =
                    rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG)?;
                Ok(reaped.map(|(_, status)| {
                    std::os::unix::process::ExitStatusExt::from_raw(status.as_raw())
                }))
            }
            Self::Remote(remote) => Ok(*remote.exit().borrow()),
        }
    }
}

impl From<tokio::process::Child> for Leader {
    fn from(child: tokio::process::Child) -> Self {
        Self::Tokio(child)
    }
}

/// Work to do as soon as the plugin has exited (e.g. removing its delivered secrets).
pub(crate) struct ExitHook(pub(crate) Box<dyn FnOnce() + Send>);

impl std::fmt::Debug for ExitHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExitHook")
    }
}

impl ProcessGroup {
    /// Takes over a child spawned as the leader of its own process group and starts watching
    /// for its exit.
    pub(crate) fn new(child: impl Into<Leader>, plugin: Arc<str>) -> io::Result<Arc<Self>> {
        let child = child.into();
        let remote = match &child {
            Leader::Remote(remote) => Some(remote.exit()),
            _ => None,
        };
        let raw = match remote {
            Some(_) => None,
            None => Some(
                child
                    .id()
                    .and_then(|id| i32::try_from(id).ok())
                    .and_then(Pid::from_raw)
                    .ok_or_else(|| io::Error::other("the spawned plugin has no process id"))?,
            ),
        };
        let group = Arc::new(Self {
            pid: raw,
            plugin,
            child: Mutex::new(child),
            exit: watch::Sender::new(None),
            on_exit: Mutex::new(Vec::new()),
        });
        match remote {
            Some(exit) => tokio::spawn(watch_remote_exit(Arc::clone(&group), exit)),
            None => tokio::spawn(watch_exit(Arc::clone(&group))),
        };
        Ok(group)
    }

    /// Runs `hook` once the plugin has exited (at once if it already has).
    pub(crate) fn on_exit(&self, hook: ExitHook) {
        let _child = self.lock();
        if self.exit_status().is_some() {
            (hook.0)();
        } else {
            self.hooks().push(hook);
        }
    }

    fn hooks(&self) -> MutexGuard<'_, Vec<ExitHook>> {
        lock(&self.on_exit)
    }

    /// The leader's (the plugin's) process id, which is also the group id; 0 for a plugin
    /// that is not a process of this host (a Pod).
    pub(crate) fn pid(&self) -> u32 {
        self.pid
            .map_or(0, |pid| pid.as_raw_nonzero().get().unsigned_abs())
    }

    /// The plugin's exit status once it has exited and been reaped.
    pub(crate) fn exit_status(&self) -> Option<ExitStatus> {
        *self.exit.borrow()
    }

    /// Waits until the plugin has exited.
    pub(crate) async fn exited(&self) -> ExitStatus {
        let mut rx = self.exit.subscribe();
        loop {
            if let Some(status) = *rx.borrow_and_update() {
                return status;
            }
            // `self` holds the sender, so the channel cannot close while we wait.
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Waits until the plugin has exited, at most `timeout`.
    pub(crate) async fn exited_within(&self, timeout: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(timeout, self.exited()).await.ok()
    }

    /// Sends `signal` to every process of the group, unless the plugin has exited (then
    /// `Ok(false)`).
    pub(crate) fn signal(&self, signal: Signal) -> io::Result<bool> {
        let mut child = self.lock();
        if self.check_locked(&mut child)?.is_some() {
            return Ok(false);
        }
        let (Some(pid), Leader::Tokio(_) | Leader::Spawned(_)) = (self.pid, &*child) else {
            return match &*child {
                Leader::Remote(remote) => remote.signal(signal),
                _ => Ok(false),
            };
        };
        // The leader is unreaped (checked under the lock), so the group id is still ours.
        match rustix::process::kill_process_group(pid, signal) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::SRCH) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Checks whether the plugin has exited (reaping it and killing what is left of its group
    /// if so).
    pub(crate) fn check(&self) -> io::Result<Option<ExitStatus>> {
        let mut child = self.lock();
        self.check_locked(&mut child)
    }

    fn lock(&self) -> MutexGuard<'_, Leader> {
        lock(&self.child)
    }

    fn check_locked(&self, child: &mut Leader) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.exit_status() {
            return Ok(Some(status));
        }
        let Some(pid) = self.pid else {
            return self.record_exit(child.try_wait()?);
        };
        // Has the leader exited? Ask without reaping it, so the group id stays reserved.
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        match rustix::process::waitid(WaitId::Pid(pid), options) {
            Ok(None) => return Ok(None),
            Ok(Some(_)) => {
                // Leftover members of the group (the plugin's children) die with it.
                match rustix::process::kill_process_group(pid, Signal::KILL) {
                    Ok(()) => tracing::debug!(
                        plugin = &*self.plugin,
                        "plugin exited; sent SIGKILL to the rest of its process group, if any"
                    ),
                    Err(rustix::io::Errno::SRCH) => {}
                    Err(e) => tracing::warn!(
                        plugin = &*self.plugin,
                        error = %e,
                        "could not kill the rest of the plugin's process group"
                    ),
                }
            }
            // Already reaped by someone else (ECHILD): `try_wait` below reports what it knows.
            Err(_) => {}
        }
        self.record_exit(child.try_wait()?)
    }

    /// Runs the exit hooks and then publishes `exited` (if the plugin has exited): whoever
    /// waits for the exit (a shutdown) wakes when what ends with the plugin — the rest of its
    /// pids cgroup, its world, its delivered files — has ended too, not while a hook still runs
    /// on another thread. Called with the leader's lock held, as [`Self::on_exit`] is, so a hook
    /// added meanwhile is not missed.
    fn record_exit(&self, exited: Option<ExitStatus>) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = exited {
            tracing::debug!(plugin = &*self.plugin, %status, "plugin exited");
            for hook in std::mem::take(&mut *self.hooks()) {
                (hook.0)();
            }
            self.exit.send_replace(Some(status));
        }
        Ok(exited)
    }
}

/// Publishes a remote plugin's exit as soon as its runner reports it.
async fn watch_remote_exit(
    group: Arc<ProcessGroup>,
    mut exit: watch::Receiver<Option<ExitStatus>>,
) {
    // The runner keeps the sender until the plugin has ended: an error means it ended too.
    let _ = exit.wait_for(Option::is_some).await;
    if let Err(e) = group.check() {
        tracing::warn!(plugin = &*group.plugin, error = %e, "cannot record the plugin's exit");
    }
}

/// Publishes the plugin's exit as soon as it happens: checks on every `SIGCHLD` the host
/// receives, and every [`EXIT_POLL_INTERVAL`] in case a signal was missed or cannot be
/// received.
async fn watch_exit(group: Arc<ProcessGroup>) {
    let mut sigchld = match signal(SignalKind::child()) {
        Ok(stream) => Some(stream),
        Err(e) => {
            tracing::debug!(plugin = &*group.plugin, error = %e, "no SIGCHLD stream; polling");
            None
        }
    };
    loop {
        match group.check() {
            Ok(None) => {}
            Ok(Some(_)) => return,
            Err(e) => {
                tracing::warn!(plugin = &*group.plugin, error = %e, "cannot watch the plugin's exit");
                return;
            }
        }
        match &mut sigchld {
            Some(sigchld) => {
                let _ = tokio::time::timeout(EXIT_POLL_INTERVAL, sigchld.recv()).await;
            }
            None => tokio::time::sleep(EXIT_POLL_INTERVAL).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::process::Stdio;

    use super::*;

    fn spawn(script: &str) -> Arc<ProcessGroup> {
        let child = tokio::process::Command::new("/bin/sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        ProcessGroup::new(child, "test".into()).unwrap()
    }

    #[tokio::test]
    async fn the_exit_of_a_plugin_is_noticed_and_reaped() {
        let group = spawn("exit 3");
        let status = group.exited_within(Duration::from_secs(5)).await.unwrap();
        assert_eq!(status.code(), Some(3));
        assert!(!group.signal(Signal::TERM).unwrap());
    }

    #[tokio::test]
    async fn a_signal_reaches_the_whole_group() {
        // The shell starts a grandchild and waits for it; SIGTERM to the group ends both.
        let group = spawn("sleep 30 & wait");
        assert!(
            group
                .exited_within(Duration::from_millis(100))
                .await
                .is_none()
        );
        assert!(group.signal(Signal::TERM).unwrap());
        let status = group.exited_within(Duration::from_secs(5)).await.unwrap();
        assert!(!status.success());
        assert_group_ends(group.pid()).await;
    }

    #[tokio::test]
    async fn children_left_behind_by_an_exiting_plugin_are_killed() {
        let group = spawn("sleep 30 & exit 0");
        let status = group.exited_within(Duration::from_secs(5)).await.unwrap();
        assert!(status.success());
        assert_group_ends(group.pid()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_exit_is_published_only_once_what_ends_with_the_plugin_has_ended() {
        // A slow exit hook stands for the rest of a pids cgroup being killed or a world's
        // keeper being reaped: whoever waits for the exit (a shutdown) must not wake before it
        // has finished, or it would find the plugin's processes still running.
        let group = spawn("sleep 30");
        let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let hook_ended = Arc::clone(&ended);
        group.on_exit(ExitHook(Box::new(move || {
            std::thread::sleep(Duration::from_millis(300));
            hook_ended.store(true, std::sync::atomic::Ordering::SeqCst);
        })));
        assert!(group.signal(Signal::KILL).unwrap());
        group.exited_within(Duration::from_secs(10)).await.unwrap();
        assert!(
            ended.load(std::sync::atomic::Ordering::SeqCst),
            "the exit was published while an exit hook still ran"
        );
    }

    /// Waits until no process of group `pgid` runs any more. Orphaned members may linger as
    /// zombies (PID 1 does not reap on these machines), which count as ended.
    async fn assert_group_ends(pgid: u32) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !zombies_only(pgid) {
            assert!(
                std::time::Instant::now() < deadline,
                "group {pgid} still has live members"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether every process of group `pgid` is a zombie (Linux `/proc`).
    fn zombies_only(pgid: u32) -> bool {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return false;
        };
        for entry in entries.flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // pid (comm) state ppid pgrp …
            let Some(after) = stat.rsplit_once(") ").map(|(_, rest)| rest) else {
                continue;
            };
            let fields: Vec<&str> = after.split_whitespace().collect();
            if fields.get(2) == Some(&pgid.to_string().as_str()) && fields.first() != Some(&"Z") {
                return false;
            }
        }
        true
    }
}
