//! A plugin's world (issue 22): what a real plugin sees from inside its namespaces — its own
//! processes and the world's keeper as pid 1, nothing of the host's — that its orphans are
//! reaped, the ids it runs as, and the fallback without namespaces. (A TCP plugin on the
//! loopback of its own world: `interop_python.rs`.)
//!
//! Each test runs for a root and a non-root host (`host_user::root_and_unprivileged`).

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;

use tether_broker::confine::{NamespacesMode, WorldMechanism};
use tether_broker::{HandshakeConfig, PluginClient, PluginClientBuilder};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};
use tether_tests::host_user::root_and_unprivileged;

const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");

fn probe(dir: &Path) -> PluginClientBuilder<HandshakeConfig> {
    PluginClient::builder(PROBE)
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .current_dir(dir)
}

async fn get(plugin: &PluginClient, key: &str) -> String {
    let value = KvClient::new(plugin.channel())
        .get(GetRequest { key: key.into() })
        .await
        .unwrap_or_else(|status| panic!("{key}: {status:?}"))
        .into_inner()
        .value;
    String::from_utf8(value).unwrap()
}

async fn put(plugin: &PluginClient, key: &str) {
    KvClient::new(plugin.channel())
        .put(PutRequest {
            key: key.into(),
            value: Vec::new(),
        })
        .await
        .unwrap_or_else(|status| panic!("{key}: {status:?}"));
}

/// The process ids listed in the plugin's `/proc`, with each one's state letter.
async fn processes(plugin: &PluginClient) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for name in get(plugin, "list:/proc").await.lines() {
        let Ok(pid) = name.parse::<u32>() else {
            continue;
        };
        // A process that ended between the two calls is gone: skip it.
        let Ok(stat) = KvClient::new(plugin.channel())
            .get(GetRequest {
                key: format!("read:/proc/{pid}/stat"),
            })
            .await
        else {
            continue;
        };
        let stat = String::from_utf8(stat.into_inner().value).unwrap();
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split(' ').next())
            .unwrap_or("?")
            .to_owned();
        out.push((pid, state));
    }
    out
}

#[tokio::test]
async fn a_plugin_sees_only_its_own_processes_and_its_worlds_keeper_as_pid_1() {
    let _run = root_and_unprivileged(
        "a_plugin_sees_only_its_own_processes_and_its_worlds_keeper_as_pid_1",
    );
    let dir = tempfile::tempdir().unwrap();
    let plugin = probe(dir.path()).start().await.unwrap();
    assert_eq!(plugin.world_mechanism(), WorldMechanism::Namespaces);
    let own: u32 = get(&plugin, "pid").await.parse().unwrap();
    assert_ne!(own, 1, "the plugin is not its pid namespace's init");
    assert_ne!(own, plugin.pid(), "its pid is its world's, not the host's");
    let seen: Vec<u32> = processes(&plugin)
        .await
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert!(seen.contains(&1) && seen.contains(&own), "{seen:?}");
    assert_eq!(seen.len(), 2, "only the keeper and the plugin: {seen:?}");
    // The host, its other processes and their command lines are not there.
    let host = std::process::id();
    assert!(!seen.contains(&host) || host == own, "{seen:?}");
    // Pid 1 is the keeper, not one of the host's programs.
    let keeper = get(&plugin, "read:/proc/1/cmdline").await;
    assert!(keeper.starts_with("tether-keeper"), "{keeper:?}");
    plugin.shutdown().await.unwrap();
}

#[tokio::test]
async fn orphans_of_a_plugin_are_reaped_by_its_worlds_keeper() {
    let _run = root_and_unprivileged("orphans_of_a_plugin_are_reaped_by_its_worlds_keeper");
    let dir = tempfile::tempdir().unwrap();
    let plugin = probe(dir.path()).start().await.unwrap();
    put(&plugin, "orphans").await;
    // The shell exited after starting its children: whatever of them is left belongs to the
    // keeper now, which ignores SIGCHLD, so the kernel reaps each at its exit. A zombie would
    // stay listed with state Z.
    let zombies: Vec<(u32, String)> = processes(&plugin)
        .await
        .into_iter()
        .filter(|(_, state)| state == "Z")
        .collect();
    assert!(zombies.is_empty(), "unreaped: {zombies:?}");
    plugin.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_root_hosts_plugin_runs_as_an_unprivileged_id_and_another_host_s_as_itself() {
    let _run = root_and_unprivileged(
        "a_root_hosts_plugin_runs_as_an_unprivileged_id_and_another_host_s_as_itself",
    );
    let dir = tempfile::tempdir().unwrap();
    let plugin = probe(dir.path()).start().await.unwrap();
    let host = rustix::process::geteuid().as_raw();
    let ids = get(&plugin, "ids").await;
    let uid: u32 = ids.split(' ').next().unwrap().parse().unwrap();
    if host == 0 {
        assert_ne!(uid, 0, "{ids}");
        assert_eq!(plugin.plugin_ids().map(|(u, _)| u), Some(uid));
    } else {
        assert_eq!(uid, host, "{ids}");
    }
    plugin.shutdown().await.unwrap();
}

#[tokio::test]
async fn without_namespaces_a_plugin_runs_with_the_other_layers_and_says_so() {
    let _run =
        root_and_unprivileged("without_namespaces_a_plugin_runs_with_the_other_layers_and_says_so");
    let dir = tempfile::tempdir().unwrap();
    let plugin = probe(dir.path())
        .namespaces(NamespacesMode::Off)
        .start()
        .await
        .unwrap();
    assert_eq!(plugin.world_mechanism(), WorldMechanism::Layers);
    // It shares the host's pid namespace (the fallback's per-pid filters apply).
    let own: u32 = get(&plugin, "pid").await.parse().unwrap();
    assert_eq!(own, plugin.pid());
    plugin.shutdown().await.unwrap();
}

/// A short-lived host (`tether list`) exits while its reserve may still be making the next
/// world: the maker must not outlive it waiting for the host, holding the host's stdout (a
/// caller reading that output to its end, as `Command::output` does, would wait forever).
#[test]
fn a_host_that_exits_while_a_world_is_made_leaves_no_process_holding_its_output() {
    let _run = root_and_unprivileged(
        "a_host_that_exits_while_a_world_is_made_leaves_no_process_holding_its_output",
    );
    let catalog = tether_tests::peers::repo_root().join("examples/agent/catalog");
    let deadline = std::time::Duration::from_secs(20);
    for round in 0..LIST_ROUNDS {
        let (done, finished) = std::sync::mpsc::channel();
        let catalog = catalog.clone();
        std::thread::spawn(move || {
            let out = std::process::Command::new(tether_tests::bins::TETHER.path())
                .args(["list", "--catalog"])
                .arg(&catalog)
                .output();
            let _ = done.send(out);
        });
        let out = finished
            .recv_timeout(deadline)
            .unwrap_or_else(|_| panic!("round {round}: tether list's output did not end"));
        let out = out.unwrap();
        assert!(out.status.success(), "{out:?}");
    }
}

/// How many times [`a_host_that_exits_while_a_world_is_made_leaves_no_process_holding_its_output`]
/// runs `tether list` (the window it checks is a few milliseconds of each run).
const LIST_ROUNDS: usize = 40;
