//! What a running plugin uses — memory, CPU time, processes — read when a metrics reader
//! collects (a Prometheus scrape, an OTLP export), never on a call's path.
//!
//! From the plugin's cgroup when it has one (every process it started is in it, wherever it
//! moved in the process tree): `cgroup.procs`, and on cgroup v2 `memory.current` and
//! `cpu.stat`. Otherwise from `/proc`: the plugin's process and its descendants (followed
//! through `/proc/PID/task/TID/children`), their resident memory (`VmRSS`) and CPU time
//! (`utime`/`stime` and their waited-for children's `cutime`/`cstime`).
//!
//! The parsers are pure and unit-tested; the reads fail soft (`None`): a plugin that exits
//! while it is read is simply not reported.

use std::fs;
use std::path::{Path, PathBuf};

/// The most processes of one plugin followed through `/proc` when it has no cgroup: a bound on
/// the work one collection does for a plugin that forks without end (its pids limit stops it
/// long before on a host with cgroups).
pub const MAX_OBSERVED_PROCESSES: usize = 4096;

/// The kernel's clock ticks per second in `/proc/PID/stat` (`USER_HZ`): 100 on every
/// architecture Linux runs tether on; read once from `sysconf(_SC_CLK_TCK)`.
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        // SAFETY: sysconf only reads a configuration value; it touches no memory of ours.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if ticks > 0 { ticks as f64 } else { 100.0 }
    })
}

/// The process a plugin runs as, and its cgroup if it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObservedProcess {
    pub(crate) pid: u32,
    pub(crate) cgroup: Option<PathBuf>,
}

/// CPU time used, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct CpuTime {
    pub(crate) user: f64,
    pub(crate) system: f64,
}

impl ObservedProcess {
    /// The plugin's processes: its cgroup's members, else its process tree in `/proc`.
    pub(crate) fn pids(&self) -> Option<Vec<u32>> {
        if let Some(group) = &self.cgroup {
            return fs::read_to_string(group.join("cgroup.procs"))
                .ok()
                .map(|text| parse_pids(&text));
        }
        let mut tree = vec![self.pid];
        // The root must exist for the tree to mean anything.
        fs::metadata(format!("/proc/{}", self.pid)).ok()?;
        let mut next = 0;
        while next < tree.len() && tree.len() < MAX_OBSERVED_PROCESSES {
            let pid = tree[next];
            next += 1;
            let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for task in tasks.flatten() {
                if let Ok(text) = fs::read_to_string(task.path().join("children")) {
                    tree.extend(parse_pids(&text));
                }
            }
        }
        tree.truncate(MAX_OBSERVED_PROCESSES);
        Some(tree)
    }

    /// Resident memory in bytes: the cgroup's `memory.current` (cgroup v2 with the memory
    /// controller), else the processes' `VmRSS` summed (shared pages count once per process).
    pub(crate) fn memory(&self) -> Option<u64> {
        if let Some(current) = self
            .cgroup
            .as_deref()
            .and_then(|g| read_trimmed(&g.join("memory.current")))
            .and_then(|t| t.parse().ok())
        {
            return Some(current);
        }
        let pids = self.pids()?;
        let total = pids
            .iter()
            .filter_map(|pid| fs::read_to_string(format!("/proc/{pid}/status")).ok())
            .filter_map(|status| parse_vm_rss(&status))
            .sum();
        Some(total)
    }

    /// CPU time: the cgroup's `cpu.stat` (cgroup v2: every process that was ever in the group),
    /// else the processes' own and their waited-for children's times.
    pub(crate) fn cpu(&self) -> Option<CpuTime> {
        if let Some(time) = self
            .cgroup
            .as_deref()
            .and_then(|g| fs::read_to_string(g.join("cpu.stat")).ok())
            .and_then(|t| parse_cpu_stat(&t))
        {
            return Some(time);
        }
        let ticks = clock_ticks();
        let pids = self.pids()?;
        let mut time = CpuTime::default();
        for stat in pids
            .iter()
            .filter_map(|pid| fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        {
            if let Some((user, system)) = parse_stat_ticks(&stat) {
                time.user += user as f64 / ticks;
                time.system += system as f64 / ticks;
            }
        }
        Some(time)
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|t| t.trim().to_owned())
}

/// Whitespace-separated pids (`cgroup.procs`, `children`).
fn parse_pids(text: &str) -> Vec<u32> {
    text.split_ascii_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// `VmRSS` of a `/proc/PID/status`, in bytes (`None` for a kernel thread or a zombie).
fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

/// `user_usec` and `system_usec` of a cgroup v2 `cpu.stat`, in seconds.
fn parse_cpu_stat(text: &str) -> Option<CpuTime> {
    let field = |name: &str| {
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .find(|(key, _)| *key == name)
            .and_then(|(_, value)| value.trim().parse::<u64>().ok())
    };
    Some(CpuTime {
        user: field("user_usec")? as f64 / 1e6,
        system: field("system_usec")? as f64 / 1e6,
    })
}

/// User and system ticks of a `/proc/PID/stat` line, each with its waited-for children's
/// (`utime + cutime`, `stime + cstime`). The command name (field 2) may hold spaces and
/// parentheses, so fields are counted after its last `)`.
fn parse_stat_ticks(stat: &str) -> Option<(u64, u64)> {
    let (_, rest) = stat.rsplit_once(')')?;
    // After the name: state is field 3; utime, stime, cutime, cstime are fields 14–17.
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let number = |field: usize| -> Option<u64> {
        let value: i64 = fields.get(field - 3)?.parse().ok()?;
        u64::try_from(value).ok()
    };
    Some((number(14)? + number(16)?, number(15)? + number(17)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_ticks_are_counted_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194304 100 0 0 0 7 3 2 1 20 0 1 0 5 0 0";
        assert_eq!(parse_stat_ticks(stat), Some((7 + 2, 3 + 1)));
        assert_eq!(parse_stat_ticks("4242 (x) S 1"), None);
    }

    #[test]
    fn resident_memory_is_read_in_bytes_and_absent_for_a_kernel_thread() {
        let status = "Name:\tx\nVmPeak:\t  9000 kB\nVmRSS:\t    1536 kB\nThreads:\t1\n";
        assert_eq!(parse_vm_rss(status), Some(1536 * 1024));
        assert_eq!(parse_vm_rss("Name:\tkthreadd\nThreads:\t1\n"), None);
    }

    #[test]
    fn cgroup_cpu_time_is_read_in_seconds_and_needs_both_fields() {
        let stat = "usage_usec 3500000\nuser_usec 2500000\nsystem_usec 1000000\nnr_periods 0\n";
        assert_eq!(
            parse_cpu_stat(stat),
            Some(CpuTime {
                user: 2.5,
                system: 1.0
            })
        );
        assert_eq!(parse_cpu_stat("usage_usec 1\n"), None);
    }

    #[test]
    fn this_process_is_observed_through_proc_with_memory_and_cpu_time() {
        let me = ObservedProcess {
            pid: std::process::id(),
            cgroup: None,
        };
        assert_eq!(me.pids().unwrap()[0], std::process::id());
        assert!(me.memory().unwrap() > 0);
        let mut spin = 0u64;
        for i in 0..5_000_000u64 {
            spin = spin.wrapping_add(i * i);
        }
        assert_ne!(spin, 1);
        let cpu = me.cpu().unwrap();
        assert!(cpu.user + cpu.system > 0.0, "{cpu:?}");
    }

    #[test]
    fn a_process_that_is_gone_is_not_observed() {
        let gone = ObservedProcess {
            pid: u32::MAX - 1,
            cgroup: None,
        };
        assert_eq!(gone.pids(), None);
        assert_eq!(gone.memory(), None);
        assert_eq!(gone.cpu(), None);
    }
}
