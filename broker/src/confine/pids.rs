//! A pids cgroup of its own for every plugin launch, so that a fork bomb is stopped at
//! `pids.max` — for root too, which `RLIMIT_NPROC` does not bind.
//!
//! The group is created below the host's own group of the hierarchy carrying the `pids`
//! controller (cgroup v2 when the controller is usable there, else a v1 `pids` hierarchy),
//! found through `/proc/self/mountinfo` and `/proc/self/cgroup`. The plugin enters it between
//! fork and exec (it writes `0` to the group's `cgroup.procs`, opened by the parent), so it
//! cannot fork before it is counted. When the plugin has exited, whatever is left in the group
//! is killed and the group removed.
//!
//! Best effort: without a writable pids controller (a non-root host without delegation) the
//! plugin gets `RLIMIT_NPROC` as before, which binds non-root users only.
//!
//! A host killed with `SIGKILL` has its janitor kill every process in its plugins' groups and
//! remove them ([`janitor`](crate::confine::janitor)); should the janitor have died too, the
//! next launch of any tether host in the same pid namespace kills whatever is left in the
//! groups of hosts that no longer exist and removes them.

use std::fs;
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::confine::cgroup_text::{self, GroupName, Version};

/// Default `pids.max` of a plugin's cgroup: the tasks (processes *and* threads) the plugin
/// and everything it starts may have at once. Override with
/// [`Limits::processes`](crate::Limits::processes) (given to
/// [`PluginClientBuilder::limits`](crate::PluginClientBuilder::limits)) or a manifest's
/// `limits.processes`.
pub const DEFAULT_MAX_PROCESSES: u64 = 1024;

/// How many rounds of "list the group's processes, `SIGKILL` each" are tried when a plugin's
/// group is removed, before giving up and leaving the group behind (with a warning).
pub const MAX_KILL_ROUNDS: u32 = 1000;

/// Pause between two kill rounds, letting the killed processes exit.
const KILL_ROUND_PAUSE: Duration = Duration::from_millis(1);

/// What limits the number of a plugin's processes; see
/// [`PluginClient::process_limit`](crate::PluginClient::process_limit).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProcessLimit {
    /// A pids cgroup of the plugin's own: at most `max` tasks (processes and threads) of the
    /// plugin and its descendants at once, whatever their user (root included). Forks past it
    /// fail with `EAGAIN`.
    Cgroup {
        /// The group's `pids.max`.
        max: u64,
        /// The group's directory (removed when the plugin has exited).
        dir: PathBuf,
    },
    /// No writable pids controller: `RLIMIT_NPROC`, which counts every process of the
    /// plugin's *user* and which the kernel does not apply to root.
    Rlimit {
        /// The limit set (`None`: none, the host's own applies).
        max: Option<u64>,
    },
}

/// The hierarchy and directory plugin groups are created in.
#[derive(Debug)]
struct Base {
    version: Version,
    dir: PathBuf,
    /// This process's pid namespace (part of every group name; it never changes).
    pid_namespace: u64,
}

/// A plugin's pids cgroup. Dropping it kills whatever is left in it and removes it.
#[derive(Debug)]
pub(crate) struct PidsGroup {
    dir: PathBuf,
    version: Version,
    max: u64,
    /// The group's `cgroup.procs`, open for the child to enter until it has been spawned.
    procs: Option<OwnedFd>,
}

impl PidsGroup {
    /// Creates the group of one launch with `pids.max = max`; `None` (logged once) when this
    /// host has no writable pids controller.
    pub(crate) fn create(max: u64, plugin: &str) -> Option<Self> {
        static LOGGED: AtomicBool = AtomicBool::new(false);
        let Some(base) = base() else {
            if !LOGGED.swap(true, Ordering::Relaxed) {
                tracing::info!(
                    plugin,
                    "no pids cgroup controller found: plugins' processes are limited by RLIMIT_NPROC only (not applied to root)"
                );
            }
            return None;
        };
        match Self::create_in(base, max) {
            Ok(group) => Some(group),
            Err(e) => {
                if !LOGGED.swap(true, Ordering::Relaxed) {
                    tracing::info!(plugin, dir = %base.dir.display(), error = %e, "cannot create a pids cgroup: plugins' processes are limited by RLIMIT_NPROC only (not applied to root)");
                }
                None
            }
        }
    }

    fn create_in(base: &Base, max: u64) -> io::Result<Self> {
        static LAUNCHES: AtomicU64 = AtomicU64::new(0);
        let pid_namespace = base.pid_namespace;
        remove_stale(&base.dir, pid_namespace, base.version);
        let name = GroupName {
            pid_namespace,
            host: std::process::id(),
            launch: LAUNCHES.fetch_add(1, Ordering::Relaxed),
        };
        let dir = base.dir.join(name.to_string());
        fs::create_dir(&dir)?;
        let mut group = Self {
            dir,
            version: base.version,
            max,
            procs: None,
        };
        // From here on, dropping `group` removes the directory again.
        fs::write(group.dir.join("pids.max"), max.to_string())?;
        let procs = fs::OpenOptions::new()
            .write(true)
            .open(group.dir.join("cgroup.procs"))?;
        group.procs = Some(procs.into());
        Ok(group)
    }

    /// The descriptor the child writes `0` to (between fork and exec) to enter the group.
    pub(crate) fn procs_fd(&self) -> Option<RawFd> {
        self.procs.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// The plugin has been spawned (in the group): the descriptor is no longer needed.
    pub(crate) fn spawned(&mut self) {
        self.procs = None;
    }

    /// The group's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// What it means for the plugin.
    pub(crate) fn limit(&self) -> ProcessLimit {
        ProcessLimit::Cgroup {
            max: self.max,
            dir: self.dir.clone(),
        }
    }
}

impl Drop for PidsGroup {
    fn drop(&mut self) {
        self.procs = None;
        if let Err(e) = end_group(&self.dir, self.version) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot remove a plugin's pids cgroup");
        }
    }
}

/// Kills every process in the group at `dir` and removes it, in at most [`MAX_KILL_ROUNDS`].
fn end_group(dir: &Path, version: Version) -> io::Result<()> {
    let kill_file = dir.join("cgroup.kill");
    if version == Version::V2 && kill_file.exists() {
        // Kills every process of the group at once, without a race against forks.
        let _ = fs::OpenOptions::new()
            .write(true)
            .open(&kill_file)
            .and_then(|mut f| f.write_all(b"1"));
    }
    for _ in 0..MAX_KILL_ROUNDS {
        let pids = match fs::read_to_string(dir.join("cgroup.procs")) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut empty = true;
        for pid in pids
            .lines()
            .filter_map(|l| l.trim().parse::<libc::pid_t>().ok())
        {
            empty = false;
            // SAFETY: kill has no memory preconditions. The pid was listed in the plugin's
            // group a moment ago (a process that has exited and been reaped since is the
            // remaining, tiny window for pid reuse; v2's cgroup.kill has none).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        if empty {
            match fs::remove_dir(dir) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                // Busy: processes still exiting.
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => return Err(e),
            }
        }
        std::thread::sleep(KILL_ROUND_PAUSE);
    }
    Err(io::Error::other(format!(
        "processes were still left in it after {MAX_KILL_ROUNDS} rounds of SIGKILL"
    )))
}

/// Ends the groups that hosts of this pid namespace which no longer run left below `base`
/// (killed with `SIGKILL` while their janitor could not clean up either): every process still
/// in such a group is killed — it can only be a plugin of that host, or something a plugin
/// started, such as a grandchild that left its process group with `setsid` — and the group is
/// removed. A group whose host's pid is alive again (reused) is left alone.
fn remove_stale(base: &Path, pid_namespace: u64, version: Version) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().and_then(GroupName::parse) else {
            continue;
        };
        if name.pid_namespace != pid_namespace || is_alive(name.host) {
            continue;
        }
        let dir = entry.path();
        let live = fs::read_to_string(dir.join("cgroup.procs"))
            .map(|p| p.lines().filter(|l| !l.trim().is_empty()).count())
            .unwrap_or(0);
        match end_group(&dir, version) {
            Ok(()) if live > 0 => tracing::warn!(
                dir = %dir.display(),
                killed = live,
                "killed the processes left in the pids cgroup of a host that is gone, and removed it"
            ),
            Ok(()) => {
                tracing::debug!(dir = %dir.display(), "removed the pids cgroup of a host that is gone");
            }
            Err(e) => tracing::warn!(
                dir = %dir.display(),
                error = %e,
                "cannot end the pids cgroup of a host that is gone"
            ),
        }
    }
}

/// Whether a process `pid` exists (in this pid namespace).
fn is_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    let ret = unsafe { libc::kill(pid, 0) };
    ret == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The inode of the host's pid namespace.
fn pid_namespace() -> io::Result<u64> {
    let link = fs::read_link("/proc/self/ns/pid")?;
    cgroup_text::namespace_inode(&link.to_string_lossy())
        .ok_or_else(|| io::Error::other("unexpected /proc/self/ns/pid link"))
}

/// Where plugin groups go on this host, found once.
fn base() -> Option<&'static Base> {
    static BASE: OnceLock<Option<Base>> = OnceLock::new();
    BASE.get_or_init(find_base).as_ref()
}

fn find_base() -> Option<Base> {
    let pid_namespace = pid_namespace().ok()?;
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let cgroup = fs::read_to_string("/proc/self/cgroup").ok()?;
    let mounts = cgroup_text::pids_mounts(&mountinfo);
    let dir_of = |version| {
        let group = cgroup_text::own_group(&cgroup, version)?;
        mounts
            .iter()
            .filter(|m| m.version == version)
            .find_map(|m| cgroup_text::group_dir(m, group).filter(|d| d.is_dir()))
    };
    if let Some(dir) = dir_of(Version::V2).filter(|d| v2_pids_delegated(d)) {
        return Some(Base {
            version: Version::V2,
            dir,
            pid_namespace,
        });
    }
    dir_of(Version::V1).map(|dir| Base {
        version: Version::V1,
        dir,
        pid_namespace,
    })
}

/// Whether children of the v2 group at `dir` get the pids controller (enabling it when the
/// group has it but does not pass it on yet, if allowed).
fn v2_pids_delegated(dir: &Path) -> bool {
    let has = |file: &str| {
        fs::read_to_string(dir.join(file))
            .is_ok_and(|text| text.split_whitespace().any(|c| c == "pids"))
    };
    if !has("cgroup.controllers") {
        return false;
    }
    has("cgroup.subtree_control") || fs::write(dir.join("cgroup.subtree_control"), "+pids").is_ok()
}
