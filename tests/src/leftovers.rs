//! What a launch leaves behind when its host or its plugin is killed (issue 22, item 7), and
//! the events the leftover tests kill at: a [`Workspace`] gives a host (`secret-host`) its
//! delivery directory and its private directories' base and lists what is
//! [`left`](Workspace::left) of its launches — files and directories, processes, unix
//! sockets, pids cgroups; [`kill_host`] kills a host with nothing of it half done and returns
//! its janitors to wait for ([`exited`]); [`wait_for_secret`] returns once a delivered secret
//! file is written (inotify).

use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use rustix::fs::inotify;

use crate::procs;

/// A temporary directory holding a host's delivery directory (`delivery/`) and the base of
/// its plugins' private directories (`run/`), readable by every user (the unprivileged run of a test uses it too).
#[derive(Debug)]
pub struct Workspace {
    dir: tempfile::TempDir,
    /// Where the host delivers secrets.
    pub delivery: PathBuf,
    /// Where the host makes its plugins' private directories.
    pub private_dir_base: PathBuf,
}

impl Workspace {
    /// A new workspace.
    ///
    /// # Panics
    /// When the directories cannot be made.
    #[must_use]
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("tether-leftovers-")
            .tempdir()
            .expect("a temporary directory");
        let (delivery, private_dir_base) = (dir.path().join("delivery"), dir.path().join("run"));
        fs::create_dir(&delivery).expect("the delivery directory");
        fs::create_dir(&private_dir_base).expect("the private directories' base");
        Self {
            dir,
            delivery,
            private_dir_base,
        }
    }

    /// The workspace's directory (a host's working directory).
    #[must_use]
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// What is left of the launches of the host `host` (its pid): everything in the delivery
    /// directory and the private directories' base, live processes working in the workspace
    /// (a plugin works in its private directory), unix sockets bound in it and pids cgroups
    /// named after `host`. Empty when nothing is left.
    #[must_use]
    pub fn left(&self, host: u32) -> Vec<String> {
        let mut left: Vec<String> = [&self.delivery, &self.private_dir_base]
            .iter()
            .flat_map(|dir| entries(dir))
            .map(|p| format!("file {}", p.display()))
            .collect();
        left.extend(
            processes_under(self.path())
                .into_iter()
                .map(|(pid, cmdline)| format!("process {pid} ({cmdline})")),
        );
        left.extend(
            sockets_under(self.path())
                .into_iter()
                .map(|s| format!("socket {s}")),
        );
        left.extend(
            cgroups_of(host)
                .into_iter()
                .map(|d| format!("cgroup {}", d.display())),
        );
        left
    }
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}

/// Every path below `dir`.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for entry in fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(path.clone());
            }
            found.push(path);
        }
    }
    found
}

/// Live (not zombie) processes whose working directory is `dir` or below it (also once it
/// was removed: the kernel then shows it with ` (deleted)`), with their command lines.
fn processes_under(dir: &Path) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(cwd) = fs::read_link(entry.path().join("cwd")) else {
            continue;
        };
        if !cwd.starts_with(dir) && !cwd.to_string_lossy().starts_with(&*dir.to_string_lossy()) {
            continue;
        }
        if let Some(process) = procs::live(pid) {
            found.push((pid, process.cmdline));
        }
    }
    found
}

/// Unix sockets of this network namespace bound below `dir`.
fn sockets_under(dir: &Path) -> Vec<String> {
    let prefix = dir.to_string_lossy();
    fs::read_to_string("/proc/net/unix")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().nth(7))
        .filter(|path| path.starts_with(&*prefix))
        .map(str::to_owned)
        .collect()
}

/// Pids cgroups that tether named after the host process `host` (`tether-NS-HOST-N`), in any
/// hierarchy.
#[must_use]
pub fn cgroups_of(host: u32) -> Vec<PathBuf> {
    let infix = format!("-{host}-");
    let mut found = Vec::new();
    let mut todo = vec![(PathBuf::from("/sys/fs/cgroup"), 0)];
    while let Some((dir, depth)) = todo.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let ours = name
                .strip_prefix("tether-")
                .is_some_and(|rest| rest.matches('-').count() == 2 && name.contains(&infix));
            if ours {
                found.push(entry.path());
            } else if depth < 8 {
                todo.push((entry.path(), depth + 1));
            }
        }
    }
    found
}

/// The child processes of `pid` with their command lines.
#[must_use]
pub fn children(pid: u32) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(child) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let status = fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let parent = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|p| p.trim().parse::<u32>().ok());
        if parent == Some(pid)
            && let Some(process) = procs::live(child)
        {
            found.push((child, process.cmdline));
        }
    }
    found
}

/// Whether a command line is a tether janitor's (`sh -c SCRIPT tether-janitor …`).
#[must_use]
pub fn is_janitor(cmdline: &str) -> bool {
    cmdline.contains("tether-janitor")
}

/// A host killed by [`kill_host`].
#[derive(Debug)]
pub struct Killed {
    /// Pidfds of its janitors, which clean up after it (wait with [`exited`]).
    pub janitors: Vec<OwnedFd>,
    /// Its other children when it was killed (a plugin, an interpreter asked where it lives).
    pub children: Vec<(u32, String)>,
    /// Pidfds of those children (wait with [`exited`]: a killed process takes a moment to
    /// end).
    pub processes: Vec<(u32, OwnedFd)>,
}

/// Kills `host` (`SIGKILL`) with nothing of it half done — it is stopped first (`SIGSTOP`,
/// waited for: a fork in progress completes) and its children are listed then — and reaps it.
///
/// # Panics
/// When a signal cannot be sent or the host cannot be waited for.
#[must_use]
pub fn kill_host(host: &mut Child) -> Killed {
    let pid = rustix::process::Pid::from_raw(
        i32::try_from(host.id()).expect("a process id is a positive i32"),
    )
    .expect("a process id is a positive i32");
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).expect("SIGSTOP the host");
    // Not reaped here (`NOWAIT`): the wait below does.
    let stopped = rustix::process::waitid(
        rustix::process::WaitId::Pid(pid),
        rustix::process::WaitIdOptions::STOPPED
            | rustix::process::WaitIdOptions::EXITED
            | rustix::process::WaitIdOptions::NOWAIT,
    )
    .expect("wait for the host to stop");
    // Stopped, every process it started is listed; exited, there is nothing to list.
    let all = match stopped {
        Some(status) if status.stopped() => children(host.id()),
        _ => Vec::new(),
    };
    // Opened before the host dies: the pids are still its children's.
    let processes = all
        .iter()
        .filter(|(_, cmdline)| !is_janitor(cmdline))
        .filter_map(|&(pid, _)| Some((pid, pidfd(pid)?)))
        .collect();
    let _ = host.kill();
    host.wait().expect("reap the host");
    let (janitors, children): (Vec<_>, Vec<_>) = all
        .into_iter()
        .partition(|(_, cmdline)| is_janitor(cmdline));
    Killed {
        janitors: janitors
            .into_iter()
            .filter_map(|(pid, _)| pidfd(pid))
            .collect(),
        children,
        processes,
    }
}

/// A pidfd of process `pid`; `None` when it is gone.
#[must_use]
pub fn pidfd(pid: u32) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

/// Whether the process behind `pidfd` exited within `deadline` (its pidfd became readable).
///
/// # Panics
/// When the pidfd cannot be polled.
#[must_use]
pub fn exited(pidfd: &OwnedFd, deadline: Duration) -> bool {
    let mut fds = [rustix::event::PollFd::new(
        pidfd,
        rustix::event::PollFlags::IN,
    )];
    let timeout = rustix::event::Timespec::try_from(deadline).expect("the deadline fits");
    rustix::event::poll(&mut fds, Some(&timeout)).expect("poll a pidfd") == 1
}

/// Kills the process `pid` (`SIGKILL`); `false` when it is gone.
#[must_use]
pub fn kill(pid: u32) -> bool {
    i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .is_some_and(|pid| {
            rustix::process::kill_process(pid, rustix::process::Signal::KILL).is_ok()
        })
}

/// Returns the path of the delivered file `secrets/NAME` of the (first) launch delivering
/// into `delivery` once `len` bytes are written to it: watched with inotify, directory by
/// directory as the launch makes them.
///
/// # Panics
/// When it is not written within `deadline`.
#[must_use]
pub fn wait_for_secret(delivery: &Path, name: &str, len: u64, deadline: Duration) -> PathBuf {
    let until = Instant::now() + deadline;
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC).expect("inotify_init");
    let watch = |dir: &Path| {
        // A directory removed meanwhile (a failed launch) is simply not watched.
        let _ = inotify::add_watch(
            &fd,
            dir,
            inotify::WatchFlags::CREATE
                | inotify::WatchFlags::MODIFY
                | inotify::WatchFlags::CLOSE_WRITE,
        );
    };
    watch(delivery);
    let mut watched: Vec<PathBuf> = Vec::new();
    loop {
        // Watch what exists now, then look: a change after the look wakes the poll below.
        for launch in fs::read_dir(delivery).into_iter().flatten().flatten() {
            for dir in [launch.path(), launch.path().join("secrets")] {
                if dir.is_dir() && !watched.contains(&dir) {
                    watch(&dir);
                    watched.push(dir);
                }
            }
            let secret = launch.path().join("secrets").join(name);
            if fs::metadata(&secret).is_ok_and(|m| m.len() >= len) {
                return secret;
            }
        }
        let left = until.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "no secret `{name}` was written under {} within {deadline:?}",
            delivery.display()
        );
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        let timeout = rustix::event::Timespec::try_from(left).expect("the deadline fits");
        if rustix::event::poll(&mut fds, Some(&timeout)).expect("poll inotify") > 0 {
            let mut buf = [std::mem::MaybeUninit::uninit(); 4096];
            let mut events = inotify::Reader::new(&fd, &mut buf);
            // Drains what is queued; the loop looks again anyway.
            let _ = events.next();
        }
    }
}
