//! CPU placement: which CPUs a process (all its threads) may run on, with
//! `sched_setaffinity(2)`, so that a measurement's placement is chosen rather than left to the
//! scheduler.
//!
//! On the 2-CPU VM the benchmarks run on, the raw floor's round trip is ≈ 4 µs when its two
//! processes share a CPU (two context switches) and ≈ 60 µs when they are on two CPUs (each
//! wake-up of an idle CPU costs ≈ 25 µs there); left to the scheduler, a run got either.
//! [`Placement`](crate::suite::Placement) pins both.

use std::io;

/// The CPUs this process may run on now, in increasing order.
///
/// # Errors
/// The `sched_getaffinity` error.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: a zeroed `cpu_set_t` is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `cpu_set_t` of the size passed; pid 0 is this thread.
    let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &raw mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, the set's capacity.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Restricts the thread `tid` (0: the calling thread) to `cpus`. Async-signal-safe (one system
/// call), so it may run between `fork` and `exec`.
///
/// # Errors
/// The `sched_setaffinity` error (e.g. `EINVAL` for CPUs that do not exist).
pub fn pin_thread(tid: libc::pid_t, cpus: &[usize]) -> io::Result<()> {
    // SAFETY: a zeroed `cpu_set_t` is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: `cpu` is below CPU_SETSIZE, the set's capacity.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid `cpu_set_t` of the size passed.
    let rc = unsafe { libc::sched_setaffinity(tid, size_of::<libc::cpu_set_t>(), &raw const set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Restricts every thread of process `pid` to `cpus` (its threads listed in
/// `/proc/PID/task`); threads it starts later inherit the placement of the thread that starts
/// them.
///
/// # Errors
/// Reading the task list or pinning a thread that still exists failed.
pub fn pin_process(pid: u32, cpus: &[usize]) -> io::Result<()> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))?;
    for task in tasks {
        let Some(tid) = task?
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        match pin_thread(tid, cpus) {
            // The thread ended meanwhile.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            other => other?,
        }
    }
    Ok(())
}

/// Parses a `--plugin-cpu` value: one CPU number.
///
/// # Errors
/// Not a number.
pub fn parse_cpu(text: &str) -> Result<usize, String> {
    text.parse()
        .map_err(|_| format!("{text:?} is not a CPU number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_pinned_to_one_allowed_cpu_is_allowed_only_that_one_and_can_be_restored() {
        let all = allowed_cpus().unwrap();
        assert!(!all.is_empty());
        // On a thread of its own: the test harness's other threads keep their placement.
        std::thread::spawn(move || {
            pin_thread(0, &all[..1]).unwrap();
            assert_eq!(allowed_cpus().unwrap(), all[..1]);
            pin_thread(0, &all).unwrap();
            assert_eq!(allowed_cpus().unwrap(), all);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn every_thread_of_another_process_is_moved_to_the_cpu_it_is_pinned_to() {
        let all = allowed_cpus().unwrap();
        let last = *all.last().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        pin_process(child.id(), &[last]).unwrap();
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        let cpus = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim();
        assert_eq!(cpus, last.to_string());
    }

    #[test]
    fn a_cpu_beyond_the_set_is_refused() {
        assert!(pin_thread(0, &[libc::CPU_SETSIZE as usize]).is_err());
        assert!(parse_cpu("one").is_err());
        assert_eq!(parse_cpu("1"), Ok(1));
    }
}
