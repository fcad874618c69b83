//! A tether host and the tether KV plugin, through the library: typed calls, errors, shutdown,
//! drop, and a plugin outliving its host.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tether_broker::{HandshakeConfig, Limits, PluginClient, PluginClientBuilder, ShutdownOutcome};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};
use tether_tests::bins;
use tether_tests::procs;

/// How long a test waits for a process to exit after it was told (or its host died).
const EXIT_DEADLINE: Duration = Duration::from_secs(5);

fn kv_plugin(work: &Path) -> PluginClientBuilder<HandshakeConfig> {
    PluginClient::builder(bins::KV_PLUGIN.path())
        .current_dir(work)
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
}

#[tokio::test]
async fn values_put_in_one_launch_are_read_in_the_next_over_automtls() {
    let work = tempfile::tempdir().unwrap();
    let plugin = kv_plugin(work.path()).start().await.unwrap();
    assert!(plugin.is_tls());
    assert_eq!(plugin.app_version(), 1);
    KvClient::new(plugin.channel())
        .put(PutRequest {
            key: "answer".into(),
            value: b"42".to_vec(),
        })
        .await
        .unwrap();
    let outcome = plugin.shutdown().await.unwrap();
    assert!(
        matches!(outcome, ShutdownOutcome::Graceful(status) if status.success()),
        "{outcome}"
    );

    let plugin = kv_plugin(work.path()).start().await.unwrap();
    let value = KvClient::new(plugin.channel())
        .get(GetRequest {
            key: "answer".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .value;
    assert_eq!(value, b"42");
    plugin.shutdown().await.unwrap();
    assert!(procs::in_dir(work.path()).is_empty());
}

#[tokio::test]
async fn a_missing_key_is_a_not_found_status() {
    let work = tempfile::tempdir().unwrap();
    let plugin = kv_plugin(work.path()).plaintext().start().await.unwrap();
    assert!(!plugin.is_tls());
    assert_eq!(plugin.peer_fingerprint(), None);
    let status = KvClient::new(plugin.channel())
        .get(GetRequest {
            key: "never-stored".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
    plugin.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_key_that_would_escape_the_working_directory_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let plugin = kv_plugin(work.path()).start().await.unwrap();
    let mut kv = KvClient::new(plugin.channel());
    for key in ["../escape", "a/b", ".."] {
        let status = kv
            .put(PutRequest {
                key: key.into(),
                value: b"x".to_vec(),
            })
            .await
            .unwrap_err();
        assert_eq!(
            status.code(),
            tonic::Code::InvalidArgument,
            "{key}: {status:?}"
        );
    }
    plugin.shutdown().await.unwrap();
    assert!(!work.path().parent().unwrap().join("kv_escape").exists());
}

#[tokio::test]
async fn dropping_a_running_plugin_client_ends_the_plugin() {
    let work = tempfile::tempdir().unwrap();
    let plugin = kv_plugin(work.path()).start().await.unwrap();
    let fd = procs::pidfd(plugin.pid());
    drop(plugin);
    procs::exited(fd, EXIT_DEADLINE).await;
    assert!(procs::in_dir(work.path()).is_empty());
}

#[tokio::test]
async fn the_host_notices_when_a_plugin_exits_on_its_own() {
    let work = tempfile::tempdir().unwrap();
    let plugin = kv_plugin(work.path()).start().await.unwrap();
    assert!(plugin.is_running());
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(i32::try_from(plugin.pid()).unwrap()).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let status = tokio::time::timeout(EXIT_DEADLINE, plugin.exited())
        .await
        .expect("the host notices the exit");
    assert!(!status.success());
    assert!(!plugin.is_running());
    let outcome = plugin.shutdown().await.unwrap();
    assert!(
        matches!(outcome, ShutdownOutcome::AlreadyExited(_)),
        "{outcome}"
    );
}

/// The SDK watches its parent: when the host dies (here by SIGKILL, so it cannot clean up), the
/// plugin exits by itself.
#[tokio::test]
async fn a_plugin_exits_when_its_host_dies() {
    let work = tempfile::tempdir().unwrap();
    // A stand-in host: a shell that starts the plugin with the protocol environment and waits.
    let mut host = Command::new("sh")
        .arg("-c")
        .arg(r#""$0" & echo $!; wait"#)
        .arg(bins::KV_PLUGIN.path())
        .env_clear()
        .env("BASIC_PLUGIN", "hello")
        .env("PLUGIN_PROTOCOL_VERSIONS", "1")
        .current_dir(work.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(host.stdout.take().unwrap());
    // The shell prints the plugin's pid and the plugin its handshake, in either order (on a
    // loaded machine the plugin can be first).
    let mut lines = [String::new(), String::new()];
    for line in &mut lines {
        std::io::BufRead::read_line(&mut stdout, line).unwrap();
    }
    let (pid_line, handshake) = if lines[0].starts_with("1|") {
        (&lines[1], &lines[0])
    } else {
        (&lines[0], &lines[1])
    };
    let plugin_pid: u32 = pid_line
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("pid line {pid_line:?}: {e}"));
    assert!(
        handshake.starts_with("1|1|unix|"),
        "handshake: {handshake:?}"
    );
    let fd = procs::pidfd(plugin_pid);

    host.kill().unwrap();
    host.wait().unwrap();
    procs::exited(fd, EXIT_DEADLINE).await;
    assert!(procs::in_dir(work.path()).is_empty());
}

#[tokio::test]
async fn the_enforced_landlock_abi_is_reported_and_off_means_none() {
    let work = tempfile::tempdir().unwrap();
    let plugin = kv_plugin(work.path()).start().await.unwrap();
    let expected = tether_broker::confine::kernel_landlock_abi()
        .min(tether_broker::confine::TARGET_LANDLOCK_ABI);
    assert!(expected >= 1, "this machine's kernel has Landlock");
    assert_eq!(plugin.landlock_abi(), Some(expected));
    plugin.shutdown().await.unwrap();

    let plugin = kv_plugin(work.path())
        .sandbox(tether_broker::SandboxMode::Off)
        .start()
        .await
        .unwrap();
    assert_eq!(plugin.landlock_abi(), None);
    plugin.shutdown().await.unwrap();
}

/// This process's children running the janitor (`sh -c … tether-janitor …`).
fn janitors() -> Vec<u32> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // The parent is the second field after the parenthesised command name.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1));
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            ppid == Some(me.as_str())
                && cmdline
                    .split(|&b| b == 0)
                    .any(|arg| arg == b"tether-janitor")
        })
        .collect()
}

#[tokio::test]
async fn plugins_started_concurrently_share_one_janitor_that_outlives_them() {
    let work = tempfile::tempdir().unwrap();
    let starts: Vec<_> = (0..4)
        .map(|_| tokio::spawn(kv_plugin(work.path()).start()))
        .collect();
    let mut plugins = Vec::new();
    for start in starts {
        plugins.push(start.await.unwrap().unwrap());
    }
    let during = janitors();
    assert_eq!(during.len(), 1, "janitors: {during:?}");
    for plugin in plugins {
        plugin.shutdown().await.unwrap();
    }
    assert_eq!(
        janitors(),
        during,
        "the same janitor stays for the host's lifetime"
    );
}

/// Issue 7, case 16: a plugin's processes are counted in a pids cgroup of its own (where the
/// host can make one), which goes when the plugin stops.
#[tokio::test]
async fn a_plugin_runs_in_a_pids_cgroup_of_its_own_that_is_removed_when_it_stops() {
    use tether_broker::{confine::DEFAULT_MAX_PROCESSES, confine::ProcessLimit};
    use tether_tests::cgroups;

    let work = tempfile::tempdir().unwrap();
    let plugin = kv_plugin(work.path()).start().await.unwrap();
    let expected = cgroups::pids_controller_expected();
    let dir = match plugin.process_limit().clone() {
        ProcessLimit::Cgroup { max, dir } => {
            assert_eq!(max, DEFAULT_MAX_PROCESSES);
            dir
        }
        ProcessLimit::Rlimit { max } => {
            assert!(
                !expected,
                "this host has a writable pids controller, yet the plugin got RLIMIT_NPROC only"
            );
            assert_eq!(max, None);
            plugin.shutdown().await.unwrap();
            return;
        }
        other => panic!("unexpected process limit {other:?}"),
    };
    assert_eq!(cgroups::procs(&dir), vec![plugin.pid()]);
    assert_eq!(
        std::fs::read_to_string(dir.join("pids.max"))
            .unwrap()
            .trim(),
        DEFAULT_MAX_PROCESSES.to_string()
    );
    plugin.shutdown().await.unwrap();
    assert!(!dir.exists(), "{} left behind", dir.display());

    // The builder's override.
    let plugin = kv_plugin(work.path())
        .limits(Limits::default().processes(32))
        .start()
        .await
        .unwrap();
    let ProcessLimit::Cgroup { max: 32, dir } = plugin.process_limit().clone() else {
        panic!("{:?}", plugin.process_limit());
    };
    assert_eq!(
        std::fs::read_to_string(dir.join("pids.max"))
            .unwrap()
            .trim(),
        "32"
    );
    plugin.shutdown().await.unwrap();
    assert!(!dir.exists(), "{} left behind", dir.display());
}
