//! Finding processes a test left behind, by their working directory.
//!
//! Every test launches its plugins in a fresh temporary working directory, so "no process is
//! left behind" means: no live process (zombies excluded: on these machines PID 1 may not reap
//! orphans) has that directory as its working directory. Grandchildren inherit the directory,
//! so they are found too.

use std::fs;
use std::path::{Path, PathBuf};

/// A live process found by [`in_dir`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Its pid.
    pub pid: u32,
    /// Its command line, NUL separators replaced by spaces.
    pub cmdline: String,
}

/// Live (not zombie) processes whose working directory is `dir`.
#[must_use]
pub fn in_dir(dir: &Path) -> Vec<Process> {
    let Ok(want) = dir.canonicalize() else {
        return Vec::new();
    };
    live_where(|proc_dir| fs::read_link(proc_dir.join("cwd")).ok() == Some(want.clone()))
}

/// Live (not zombie) processes whose command line contains `text` (a program started under a
/// unique path, whose working directory is gone).
#[must_use]
pub fn with_command_line(text: &str) -> Vec<Process> {
    let mut found = live_where(|_| true);
    found.retain(|p| p.cmdline.contains(text) && p.pid != std::process::id());
    found
}

/// Live (not zombie) processes whose `/proc/PID` directory `select` accepts.
fn live_where(select: impl Fn(&Path) -> bool) -> Vec<Process> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if select(&entry.path()) {
            found.extend(live(pid));
        }
    }
    found
}

/// Process `pid` if it is live (not a zombie).
#[must_use]
pub fn live(pid: u32) -> Option<Process> {
    let proc_dir = Path::new("/proc").join(pid.to_string());
    if is_zombie(&proc_dir) {
        return None;
    }
    let cmdline = fs::read(proc_dir.join("cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace('\0', " ")
                .trim()
                .to_owned()
        })
        .unwrap_or_default();
    Some(Process { pid, cmdline })
}

fn is_zombie(proc_dir: &Path) -> bool {
    // /proc/PID/stat: "pid (comm) S ..."; comm may contain spaces and parentheses, so split at
    // the last ')'.
    fs::read_to_string(proc_dir.join("stat"))
        .ok()
        .and_then(|stat| {
            let rest = &stat[stat.rfind(')')? + 1..];
            rest.split_whitespace()
                .next()
                .map(|state| state == "Z" || state == "X")
        })
        .unwrap_or(true)
}

/// A pidfd for process `pid`, to wait for its exit without polling.
///
/// # Panics
/// When the process does not exist (any more).
#[must_use]
pub fn pidfd(pid: u32) -> std::os::fd::OwnedFd {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .expect("a process id is a positive i32");
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
        .expect("the process exists when its pidfd is opened")
}

/// Returns when the process behind `pidfd` has exited (the pidfd becomes readable).
///
/// # Panics
/// When it has not exited within `deadline`.
pub async fn exited(pidfd: std::os::fd::OwnedFd, deadline: std::time::Duration) {
    let ready = tokio::task::spawn_blocking(move || {
        let mut fds = [rustix::event::PollFd::new(
            &pidfd,
            rustix::event::PollFlags::IN,
        )];
        let timeout =
            rustix::event::Timespec::try_from(deadline).expect("the deadline fits a timespec");
        rustix::event::poll(&mut fds, Some(&timeout)).expect("poll on a pidfd works")
    })
    .await
    .expect("the waiting task does not panic");
    assert_eq!(ready, 1, "the process did not exit within {deadline:?}");
}

/// The directory holding this test's binaries (`target/<profile>`), derived from the running
/// test executable (`target/<profile>/deps/<test>-<hash>`).
#[must_use]
pub fn target_profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// How many connected sockets the kernel lists for the unix socket `socket` of the plugin
/// `pid` (accepted connections carry the listener's path in `/proc/net/unix`; the listener
/// itself is not connected): the proof that a multiplexed plugin has exactly one connection.
///
/// Both the host's table and the plugin's are read (each socket counted once): a plugin in a
/// network namespace of its own listens there, but the kernel makes the accepted socket of a
/// connection in the connecting side's namespace, the host's. The socket is matched by its
/// file name: a plugin in a world bound it at its own path for the same file.
///
/// # Panics
/// When a table cannot be read or `socket` has no UTF-8 file name.
#[must_use]
pub fn unix_connections_to(pid: u32, socket: &Path) -> usize {
    let name = socket
        .file_name()
        .and_then(|n| n.to_str())
        .expect("socket names in tests are UTF-8");
    let mut inodes = std::collections::BTreeSet::new();
    for table in [
        "/proc/self/net/unix".to_owned(),
        format!("/proc/{pid}/net/unix"),
    ] {
        let table = fs::read_to_string(&table).expect("the unix socket tables are readable");
        for line in table.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // Num RefCount Protocol Flags Type St Inode Path; St 03 = connected.
            if fields.len() == 8
                && fields[5] == "03"
                && Path::new(fields[7]).file_name().and_then(|n| n.to_str()) == Some(name)
            {
                inodes.insert(fields[6].to_owned());
            }
        }
    }
    inodes.len()
}

/// `PF_EXITING` in a `/proc/PID/stat` flags field (`include/linux/sched.h`): set first thing
/// in `do_exit`.
const PF_EXITING: u64 = 0x4;

/// Whether the process of a `/proc/PID/stat` line is live: neither a zombie nor dead, nor
/// already exiting (an exiting process still runs for a while, with its working directory,
/// but `/proc/PID/cgroup` already lists it in the root group of every v1 hierarchy).
#[must_use]
pub fn stat_is_live(stat: &str) -> bool {
    // The command name (field 2) is in parentheses and may hold anything: fields after it.
    let Some((_, rest)) = stat.rsplit_once(") ") else {
        return false;
    };
    let fields: Vec<&str> = rest.split(' ').collect();
    let state = fields.first().copied().unwrap_or("?");
    // Field 9, flags: the 7th after the name.
    let flags = fields.get(6).and_then(|f| f.parse::<u64>().ok());
    !matches!(state, "Z" | "X" | "x") && flags.is_some_and(|f| f & PF_EXITING == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_live_child_by_its_working_directory_and_not_after_it_is_reaped() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .current_dir(dir.path())
            .spawn()
            .unwrap();
        let found = in_dir(dir.path());
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].pid, child.id());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(in_dir(dir.path()).is_empty());
    }

    #[test]
    fn a_process_is_live_until_it_starts_exiting() {
        let line = |state: &str, flags: u64| {
            format!("42 (a) b) c) {state} 1 42 42 0 -1 {flags} 0 0 0 0 0 0 0 0 20 0 1 0")
        };
        assert!(stat_is_live(&line("S", 0x0040_0000)));
        assert!(!stat_is_live(&line("R", 0x0040_0004)));
        assert!(!stat_is_live(&line("Z", 0x0040_0000)));
        assert!(!stat_is_live("garbage"));
    }
}
