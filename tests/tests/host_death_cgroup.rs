//! Host death and the plugin's cgroup: a grandchild that left the plugin's session and process
//! group still ends with the plugin's cgroup, and a dead host's stale group holding a live
//! process is killed at the next launch (issue 11 hole 4).
//!
//! In a test binary of their own, one at a time: any launch cleans up the stale groups of dead
//! hosts, so a launch of a concurrent test would end the grandchild these tests watch.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::io::{BufRead as _, BufReader};
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tether_broker::Grants;
use tether_tests::world::{PluginSpec, World};

const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");
const SUPERVISOR_HOST: &str = env!("CARGO_BIN_EXE_supervisor-host");

/// Generous bound for waits that end on an event.
const DEADLINE: Duration = Duration::from_secs(10);

/// How soon after the host's death its plugins' processes must be gone.
const PROCESSES_GONE_AFTER_HOST_DEATH: Duration = Duration::from_secs(1);

/// Held by each test: no launch of another test here cleans up this test's stale group.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn pidfd(pid: u32) -> OwnedFd {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).unwrap()
}

/// Issue 11, hole 4: `supervisor-host --put setsid:` starts plugin `a` (its manifest with
/// `extra`), whose grandchild calls `setsid()` (a session and process group of its own, out of
/// reach of any group kill). Returns the world, the host, the plugin's cgroup and the
/// grandchild's pid.
fn host_with_a_setsid_grandchild(
    extra: &str,
) -> (World, std::process::Child, std::path::PathBuf, u32) {
    let world = World::new();
    world.add_plugin(&PluginSpec::new("a", PROBE).extra(extra));
    let dirs = [
        world.catalog(),
        world.state(),
        world.secrets(),
        world.delivery(),
        world.run(),
    ];
    let mut host = Command::new(SUPERVISOR_HOST)
        .args(["--put", "setsid:"])
        .args(dirs.iter().map(|d| d.as_os_str()))
        .arg("a")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut plugin, mut cgroup) = (None, None);
    for line in BufReader::new(host.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if line == "ready" {
            break;
        }
        if let Some(rest) = line.strip_prefix("cgroup a ") {
            cgroup = Some(std::path::PathBuf::from(rest));
        } else if let Some(rest) = line.strip_prefix("pid a ") {
            plugin = Some(rest.parse::<u32>().unwrap());
        }
    }
    let (plugin, cgroup) = (
        plugin.unwrap(),
        cgroup.expect("the plugin has a pids cgroup"),
    );
    let others: Vec<u32> = tether_tests::cgroups::procs(&cgroup)
        .into_iter()
        .filter(|&p| p != plugin)
        .collect();
    assert_eq!(
        others.len(),
        1,
        "one grandchild besides the plugin: {others:?}"
    );
    let grandchild = others[0];
    // It really left the plugin's session and process group.
    let stat = std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    assert_eq!(fields[3], grandchild.to_string(), "its own session: {stat}");
    assert_ne!(
        fields[2],
        plugin.to_string(),
        "not in the plugin's group: {stat}"
    );
    (world, host, cgroup, grandchild)
}

/// Waits (poll on its pidfd, no sleeping) until the process behind `fd` exits.
fn exits_within(fd: &OwnedFd, limit: Duration) -> bool {
    let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
    let timeout = rustix::event::Timespec::try_from(limit).unwrap();
    rustix::event::poll(&mut fds, Some(&timeout)).unwrap() == 1
}

#[test]
fn after_the_host_is_killed_a_grandchild_that_called_setsid_ends_with_the_plugins_cgroup() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !tether_tests::cgroups::pids_controller_expected() {
        eprintln!("skipped: no writable pids controller here, so no plugin cgroup to kill");
        return;
    }
    let (_world, mut host, cgroup, grandchild) = host_with_a_setsid_grandchild("");
    let fd = pidfd(grandchild);
    host.kill().unwrap(); // SIGKILL
    host.wait().unwrap();
    let killed = Instant::now();
    let gone = exits_within(&fd, PROCESSES_GONE_AFTER_HOST_DEATH);
    if !gone {
        // Do not leave it running on the shared machine.
        let _ = rustix::process::pidfd_send_signal(&fd, rustix::process::Signal::KILL);
    }
    assert!(
        gone,
        "the setsid grandchild outlived its killed host by more than {PROCESSES_GONE_AFTER_HOST_DEATH:?}"
    );
    eprintln!(
        "setsid grandchild gone {:?} after the host's SIGKILL",
        killed.elapsed()
    );
    // The janitor removes the emptied group too (it may take a moment after the kill).
    let start = Instant::now();
    while cgroup.exists() {
        assert!(
            start.elapsed() < DEADLINE,
            "{} left behind",
            cgroup.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

// The lock only keeps the other test of this file out; this runtime runs nothing else.
#[allow(clippy::await_holding_lock)]
#[tokio::test]
async fn a_stale_cgroup_of_a_dead_host_with_a_live_process_is_killed_at_the_next_launch() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !tether_tests::cgroups::pids_controller_expected() {
        eprintln!("skipped: no writable pids controller here");
        return;
    }
    // Without a world: in one, the keeper ends every process of it when the host dies, so no
    // stale group keeps a live process (the test above).
    let (world, mut host, cgroup, grandchild) =
        host_with_a_setsid_grandchild("namespaces = \"off\"");
    let fd = pidfd(grandchild);
    // The janitor dies with its host (both SIGKILLed): nothing cleans up but the next launch.
    let janitors: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let ppid = stat
                .rfind(')')
                .and_then(|at| stat[at + 2..].split(' ').nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            ppid == Some(host.id()) && String::from_utf8_lossy(&cmdline).contains("tether-janitor")
        })
        .collect();
    assert_eq!(janitors.len(), 1, "the host's janitor: {janitors:?}");
    let janitor = pidfd(janitors[0]);
    rustix::process::pidfd_send_signal(&janitor, rustix::process::Signal::KILL).unwrap();
    assert!(exits_within(&janitor, DEADLINE));
    host.kill().unwrap();
    host.wait().unwrap();
    assert!(
        !exits_within(&fd, Duration::from_millis(200)),
        "without a janitor, nothing should have ended the grandchild yet"
    );
    assert!(cgroup.exists());

    let grants = Grants::new().confinement(
        "a",
        tether_broker::Confinement::default()
            .namespaces(tether_broker::confine::NamespacesMode::Off),
    );
    let supervisor = world.supervisor(grants).build();
    drop(supervisor.acquire("a").await.unwrap());
    supervisor.shutdown().await;
    let gone = exits_within(&fd, PROCESSES_GONE_AFTER_HOST_DEATH);
    if !gone {
        let _ = rustix::process::pidfd_send_signal(&fd, rustix::process::Signal::KILL);
    }
    assert!(
        gone,
        "the next launch left the stale group's live process running"
    );
    assert!(!cgroup.exists(), "{} left behind", cgroup.display());
}
