//! What the tests expect of pids cgroups on this machine, and reading a plugin's group.

use std::fs;
use std::path::{Path, PathBuf};

/// Whether the broker must be able to give each plugin a pids cgroup here: the tests run as
/// root and a pids controller is mounted where the host can create groups — a v1 `pids`
/// hierarchy, or a cgroup2 mount that passes `pids` on to the group the tests run in (its root).
/// The broker finds the controller its own way; this independent check keeps a broker that
/// silently falls back to `RLIMIT_NPROC` from passing.
#[must_use]
pub fn pids_controller_expected() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return false;
    }
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let in_v2_root =
        fs::read_to_string("/proc/self/cgroup").is_ok_and(|c| c.lines().any(|l| l == "0::/"));
    mountinfo.lines().any(|line| {
        let Some((left, right)) = line.split_once(" - ") else {
            return false;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(mount_point), Some(fstype), Some(options)) =
            (left.get(3), left.get(4), right.first(), right.get(2))
        else {
            return false;
        };
        match *fstype {
            "cgroup" => *root == "/" && options.split(',').any(|o| o == "pids"),
            "cgroup2" => {
                in_v2_root
                    && fs::read_to_string(PathBuf::from(mount_point).join("cgroup.controllers"))
                        .is_ok_and(|c| c.split_whitespace().any(|c| c == "pids"))
            }
            _ => false,
        }
    })
}

/// The process ids in the cgroup at `dir` (empty when it does not exist).
#[must_use]
pub fn procs(dir: &Path) -> Vec<u32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// A number from a pids cgroup file: `pids.current`, or a key of `pids.events` (`max`: forks
/// refused at the limit).
#[must_use]
pub fn counter(dir: &Path, file: &str, key: Option<&str>) -> Option<u64> {
    let text = fs::read_to_string(dir.join(file)).ok()?;
    match key {
        None => text.trim().parse().ok(),
        Some(key) => text.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok()).flatten()
        }),
    }
}
