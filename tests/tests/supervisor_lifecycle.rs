//! The lazy lifecycle of `tether_broker::Supervisor` with real plugins: only used plugins start,
//! concurrent first uses share one process, idle plugins stop, crashes fail calls fast and
//! restart with backoff, hung plugins are killed, limits bite, and nothing is left behind —
//! also when the host is killed.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::io::{BufRead as _, BufReader};
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tether_broker::error::UseErrorKind;
use tether_broker::{Catalog, Grants};
use tether_tests::bins;
use tether_tests::lease::{eventually, get, kill_and_see_the_crash, put};
use tether_tests::procs;
use tether_tests::world::{PluginSpec, World};

const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");
const SUPERVISOR_HOST: &str = env!("CARGO_BIN_EXE_supervisor-host");

/// How long a test waits for something the supervisor does in the background.
const DEADLINE: Duration = Duration::from_secs(10);

fn pidfd(pid: u32) -> OwnedFd {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).unwrap()
}

/// Whether the process behind `fd` has exited (its pidfd is readable).
fn has_exited(fd: &OwnedFd) -> bool {
    let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
    rustix::event::poll(&mut fds, Some(&rustix::event::Timespec::default())).unwrap() == 1
}

/// Live processes working in any of the state directories.
fn plugin_processes(world: &World) -> usize {
    std::fs::read_dir(world.state())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| procs::in_dir(&e.path()).len())
        .sum()
}

#[tokio::test]
async fn a_job_calling_two_of_200_plugins_starts_exactly_two_processes() {
    let world = World::new();
    for i in 0..200 {
        world.add_plugin(&PluginSpec::new(
            &format!("plugin-{i:03}"),
            bins::KV_PLUGIN.path(),
        ));
    }
    // One broken manifest does not stop the catalog.
    std::fs::write(
        world.catalog().join("broken.toml"),
        "name = \"broken\"\ncommand = 7\n",
    )
    .unwrap();
    let catalog = Catalog::load_dir(&world.catalog()).unwrap();
    assert_eq!(catalog.len(), 200);
    assert_eq!(catalog.errors().len(), 1);
    let error = &catalog.errors()[0];
    assert!(error.file.ends_with("broken.toml"));
    assert_eq!(
        (error.line, error.key.as_deref()),
        (2, Some("command")),
        "{error}"
    );
    let supervisor = world.supervisor(Grants::new()).build();

    // The job: several concurrent uses of two plugins.
    let job = |name: &'static str, key: &'static str| {
        let supervisor = supervisor.clone();
        async move {
            let lease = supervisor.acquire(name).await.unwrap();
            put(&lease, key, b"v").await.unwrap();
            lease.pid()
        }
    };
    let pids = futures_join(vec![
        tokio::spawn(job("plugin-007", "a")),
        tokio::spawn(job("plugin-007", "b")),
        tokio::spawn(job("plugin-007", "c")),
        tokio::spawn(job("plugin-150", "a")),
        tokio::spawn(job("plugin-150", "b")),
    ])
    .await;
    assert!(pids[0] == pids[1] && pids[1] == pids[2], "{pids:?}");
    assert!(pids[3] == pids[4] && pids[0] != pids[3], "{pids:?}");
    let started: u64 = (0..200)
        .map(|i| supervisor.starts(&format!("plugin-{i:03}")))
        .sum();
    assert_eq!(started, 2);
    assert_eq!(plugin_processes(&world), 2);
    supervisor.shutdown().await;
    assert_eq!(plugin_processes(&world), 0);
}

async fn futures_join(handles: Vec<tokio::task::JoinHandle<u32>>) -> Vec<u32> {
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

#[tokio::test]
async fn an_idle_plugin_stops_and_starts_again_on_the_next_use() {
    let world = World::new();
    world.add_secret("a", "alpha");
    world.add_plugin(
        &PluginSpec::new("a", PROBE)
            .secrets(&["a"])
            .extra("idle_timeout = \"300ms\""),
    );
    let supervisor = world.supervisor(Grants::new().secret("a", "a")).build();

    let lease = supervisor.acquire("a").await.unwrap();
    let first = lease.pid();
    assert_eq!(get(&lease, "secret:a").await.unwrap(), b"alpha");
    let exited = pidfd(first);
    drop(lease);
    eventually("the idle plugin exits", DEADLINE, || has_exited(&exited)).await;
    eventually("its secrets are removed", DEADLINE, || {
        World::leftovers(&world.delivery()).is_empty()
    })
    .await;
    assert!(World::leftovers(&world.run()).is_empty());
    assert_eq!(supervisor.pid("a").await, None);

    let lease = supervisor.acquire("a").await.unwrap();
    assert_ne!(lease.pid(), first);
    assert_eq!(get(&lease, "secret:a").await.unwrap(), b"alpha");
    assert_eq!(supervisor.starts("a"), 2);
    drop(lease);
    supervisor.shutdown().await;
    assert!(World::leftovers(&world.delivery()).is_empty());
}

#[tokio::test]
async fn a_crash_fails_the_call_with_its_status_and_stderr_then_the_plugin_restarts() {
    let world = World::new();
    world.add_secret("a", "alpha");
    world.add_plugin(
        &PluginSpec::new("a", PROBE)
            .secrets(&["a"])
            .tables("[restart]\ninitial_backoff = \"10ms\""),
    );
    let supervisor = world.supervisor(Grants::new().secret("a", "a")).build();

    let lease = supervisor.acquire("a").await.unwrap();
    let err = put(&lease, "crash:", b"").await.unwrap_err();
    let UseErrorKind::Crashed {
        status,
        stderr_tail,
    } = err.kind()
    else {
        panic!("expected Crashed, got {err}");
    };
    assert_eq!((err.plugin(), status.code()), ("a", Some(3)));
    assert!(stderr_tail.contains("crashing on purpose"), "{err}");
    drop(lease);
    eventually("the crashed plugin's secrets are removed", DEADLINE, || {
        World::leftovers(&world.delivery()).is_empty()
    })
    .await;

    // Restarted on the next use; killed from outside, the next call says so too.
    let lease = supervisor.acquire("a").await.unwrap();
    assert_eq!(get(&lease, "secret:a").await.unwrap(), b"alpha");
    assert_eq!(supervisor.starts("a"), 2);
    kill_and_see_the_crash(&lease).await;
    drop(lease);
    eventually("the killed plugin's secrets are removed", DEADLINE, || {
        World::leftovers(&world.delivery()).is_empty()
    })
    .await;
    supervisor.shutdown().await;
    assert!(World::leftovers(&world.run()).is_empty());
}

#[tokio::test]
async fn a_plugin_that_keeps_crashing_is_not_restarted_forever() {
    let world = World::new();
    world.add_plugin(
        &PluginSpec::new("a", PROBE)
            .tables("[restart]\nmax_restarts = 1\ninitial_backoff = \"10ms\"\nwindow = \"1m\""),
    );
    let supervisor = world.supervisor(Grants::new()).build();
    for _ in 0..2 {
        let lease = supervisor.acquire("a").await.unwrap();
        let err = put(&lease, "crash:", b"").await.unwrap_err();
        assert!(matches!(err.kind(), UseErrorKind::Crashed { .. }), "{err}");
    }
    let err = supervisor.acquire("a").await.unwrap_err();
    let UseErrorKind::KeepsCrashing {
        crashes,
        max_restarts,
        ..
    } = err.kind()
    else {
        panic!("expected KeepsCrashing, got {err}");
    };
    assert_eq!((*crashes, *max_restarts), (2, 1));
    assert!(err.to_string().contains("keeps crashing"), "{err}");
    assert!(err.to_string().contains("crashing on purpose"), "{err}");
    assert_eq!(supervisor.starts("a"), 2);
}

#[tokio::test]
async fn a_hung_plugin_is_detected_by_health_checks_and_killed() {
    let world = World::new();
    world.add_plugin(&PluginSpec::new("a", PROBE));
    let supervisor = world
        .supervisor(Grants::new())
        .health_interval(Duration::from_millis(200))
        .health_timeout(Duration::from_millis(300))
        .build();
    let lease = supervisor.acquire("a").await.unwrap();
    let exited = pidfd(lease.pid());
    let pid = rustix::process::Pid::from_raw(i32::try_from(lease.pid()).unwrap()).unwrap();
    // Frozen: it accepts nothing and answers nothing, but does not exit.
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).unwrap();
    let err = get(&lease, "pid:").await.unwrap_err();
    assert!(matches!(err.kind(), UseErrorKind::Hung { .. }), "{err}");
    eventually("the hung plugin is killed", DEADLINE, || {
        has_exited(&exited)
    })
    .await;
    drop(lease);
    let lease = supervisor.acquire("a").await.unwrap();
    assert!(!get(&lease, "pid:").await.unwrap().is_empty());
    drop(lease);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_memory_balloon_is_stopped_by_its_limit_and_the_host_carries_on() {
    let world = World::new();
    world.add_plugin(&PluginSpec::new("a", PROBE).tables("[limits]\nmemory_mib = 1024"));
    let supervisor = world.supervisor(Grants::new()).build();
    let lease = supervisor.acquire("a").await.unwrap();
    // A small balloon fits…
    put(&lease, "balloon:", b"16").await.unwrap();
    // …one past the limit ends the plugin (the allocation fails: Rust aborts).
    let err = put(&lease, "balloon:", b"2048").await.unwrap_err();
    let UseErrorKind::Crashed { status, .. } = err.kind() else {
        panic!("expected Crashed, got {err}");
    };
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(status),
        Some(libc::SIGABRT),
        "{err}"
    );
    drop(lease);
    // The host is unaffected and the plugin usable again.
    let lease = supervisor.acquire("a").await.unwrap();
    put(&lease, "balloon:", b"16").await.unwrap();
    drop(lease);
    supervisor.shutdown().await;
}

/// Starts plugins `a` and `b` running `binary` in a `supervisor-host` process, kills the host
/// with SIGKILL, and checks that plugins, grandchildren, sockets and secrets all go.
fn host_sigkill_leaves_nothing(binary: &std::path::Path, processes_per_plugin: usize) {
    let world = World::new();
    world.add_secret("a", "alpha");
    world.add_secret("b", "bravo");
    world.add_plugin(&PluginSpec::new("a", binary).secrets(&["a"]));
    world.add_plugin(&PluginSpec::new("b", binary).secrets(&["b"]));
    let dirs = [
        world.catalog(),
        world.state(),
        world.secrets(),
        world.delivery(),
        world.run(),
    ];
    let mut host = Command::new(SUPERVISOR_HOST)
        .args(dirs.iter().map(|d| d.as_os_str()))
        .args(["a", "b"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut pids, mut cgroups) = (Vec::new(), Vec::new());
    for line in BufReader::new(host.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if line == "ready" {
            break;
        }
        if let Some(dir) = line.strip_prefix("cgroup ") {
            cgroups.push(std::path::PathBuf::from(dir.split_once(' ').unwrap().1));
            continue;
        }
        pids.push(line.rsplit(' ').next().unwrap().parse::<u32>().unwrap());
    }
    assert_eq!(pids.len(), 2);
    let expected_cgroups = if tether_tests::cgroups::pids_controller_expected() {
        2
    } else {
        0
    };
    assert_eq!(cgroups.len(), expected_cgroups, "{cgroups:?}");
    // The delivered secrets are on the host only without worlds; in a world they are in its
    // own tmpfs, which no host path reaches and which ends with it.
    let delivered_on_the_host = if tether_broker::confine::worlds_available().is_ok() {
        0
    } else {
        2
    };
    assert_eq!(
        World::leftovers(&world.delivery()).len(),
        delivered_on_the_host
    );
    assert_eq!(plugin_processes(&world), 2 * processes_per_plugin);
    let fds: Vec<OwnedFd> = pids.iter().map(|&p| pidfd(p)).collect();

    host.kill().unwrap(); // SIGKILL
    host.wait().unwrap();

    let start = Instant::now();
    let mut processes_gone = None;
    loop {
        let no_process = fds.iter().all(has_exited) && plugin_processes(&world) == 0;
        if no_process && processes_gone.is_none() {
            processes_gone = Some(start.elapsed());
        }
        if no_process
            && World::leftovers(&world.delivery()).is_empty()
            && World::leftovers(&world.run()).is_empty()
        {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "left behind: processes {}, delivery {:?}, run {:?}",
            plugin_processes(&world),
            World::leftovers(&world.delivery()),
            World::leftovers(&world.run())
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Issue 7, case 11: plugins and grandchildren end within a second of the host's death
    // (the parent-death signal and the janitor's group kill), files may take a little longer.
    let processes_gone = processes_gone.unwrap();
    assert!(
        processes_gone <= PROCESSES_GONE_AFTER_HOST_DEATH,
        "plugin processes outlived their killed host by {processes_gone:?}"
    );

    // Its plugins' pids cgroups: the killed host could not remove them, but they are empty
    // now, and the next launch on this machine removes the groups of hosts that are gone.
    if !cgroups.is_empty() {
        tokio::runtime::Runtime::new().unwrap().block_on(async {
            let supervisor = world.supervisor(Grants::new().secret("a", "a")).build();
            drop(supervisor.acquire("a").await.unwrap());
            supervisor.shutdown().await;
        });
        for dir in &cgroups {
            assert!(!dir.exists(), "{} left behind", dir.display());
        }
    }
}

/// How soon after the host's SIGKILL its plugins (and their grandchildren) must be gone.
const PROCESSES_GONE_AFTER_HOST_DEATH: Duration = Duration::from_secs(1);

#[test]
fn after_the_host_is_killed_no_rust_plugin_grandchild_socket_or_secret_remains() {
    // Each Rust probe plugin starts a grandchild.
    host_sigkill_leaves_nothing(std::path::Path::new(PROBE), 2);
}

#[test]
fn after_the_host_is_killed_no_go_plugin_socket_or_secret_remains() {
    // Go plugins do not watch their host: only the parent-death signal and the janitor end them.
    let test = "after_the_host_is_killed_no_go_plugin_socket_or_secret_remains";
    if let Some(go) = tether_tests::peers::go_or_skip(tether_tests::peers::GoPlugin::V18, test) {
        host_sigkill_leaves_nothing(&go.probe, 1);
    }
}
