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

/// How many connected sockets the kernel lists for the unix socket `socket` (accepted
/// connections carry the listener's path in `/proc/net/unix`; the listener itself is not
/// connected): the proof that a multiplexed plugin has exactly one connection.
///
/// # Panics
/// When `/proc/net/unix` cannot be read or `socket` is not UTF-8.
#[must_use]
pub fn unix_connections_to(socket: &Path) -> usize {
    let table = fs::read_to_string("/proc/net/unix").expect("/proc/net/unix is readable");
    let path = socket.to_str().expect("socket paths in tests are UTF-8");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // Num RefCount Protocol Flags Type St Inode Path; St 03 = connected.
            fields.len() == 8 && fields[5] == "03" && fields[7] == path
        })
        .count()
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
}
