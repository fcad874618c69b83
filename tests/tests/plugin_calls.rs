//! Plugin-to-plugin calls through the host, granted (docs/PROTOCOL.md §10.3): plugin `a` asks
//! its `Supervisor` host for a connection to catalog plugin `b`; the host starts `b` lazily and
//! relays `a`'s calls to it only when the grants file says `calls = ["b"]` under
//! `[plugins.a]`, and refuses otherwise with the grants file's line and what to add. `b` is the
//! probe plugin holding a secret granted to it alone: `a` reaches `b`'s service, never its
//! secret files. Callers are real plugins in each language.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;

use tether_broker::{Grants, Lease, Supervisor};
use tether_examples::kv::GetRequest;
use tether_examples::kv::kv_client::KvClient;
use tether_tests::peers::{self, GoPlugin};
use tether_tests::world::{PluginSpec, World};

const CALLER: &str = env!("CARGO_BIN_EXE_caller-plugin");
const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");

/// `b`'s secret, granted to `b` only.
const TOKEN: &str = "b's own token";

/// A world with caller `a` (running `caller`) and probe `b` (holding the secret `token`), and a
/// grants file with `a_grants` as `[plugins.a]`'s body.
fn world(caller: &Path, a_grants: &str) -> (World, Grants) {
    let world = World::new();
    world.add_plugin(&PluginSpec::new("a", caller));
    world.add_plugin(&PluginSpec::new("b", PROBE).secrets(&["token"]));
    world.add_secret("token", TOKEN);
    let file = world.catalog().join("../grants.toml");
    let text = format!("[plugins.a]\n{a_grants}\n[plugins.b]\nsecrets = [\"token\"]\n");
    std::fs::write(&file, &text).unwrap();
    let grants = Grants::load(&file).unwrap();
    (world, grants)
}

/// `a`'s answer to `Get key` (`PLUGIN:KEY` asks `PLUGIN`'s `Get KEY` through the host).
async fn ask(a: &Lease, key: &str) -> Result<String, tonic::Status> {
    let key = key.to_owned();
    let response = KvClient::new(a.channel())
        .get(GetRequest { key })
        .await?
        .into_inner();
    Ok(String::from_utf8(response.value).unwrap())
}

async fn granted_call_reaches_b(supervisor: &Supervisor) {
    let a = supervisor.acquire("a").await.unwrap();
    assert_eq!(supervisor.pid("b").await, None, "b starts only when called");
    assert_eq!(ask(&a, "b:secret:token").await.unwrap(), TOKEN);
    let b_pid = supervisor
        .pid("b")
        .await
        .expect("b was started for the call");
    // b reports its pid as it sees it: inside its world's pid namespace, the innermost of the
    // host's process's NSpid entries.
    assert_eq!(ask(&a, "b:pid:").await.unwrap(), innermost_pid(b_pid));
    // A second connection reuses the running b.
    assert_eq!(supervisor.starts("b"), 1);
}

async fn ungranted_call_is_refused_with_the_grants_line(supervisor: &Supervisor, file: &Path) {
    let a = supervisor.acquire("a").await.unwrap();
    let refused = ask(&a, "b:pid:").await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    let expected = format!(
        "plugin `a` may not call plugin `b`: not granted; add `calls = [\"b\"]` under `[plugins.a]` at {}:1",
        file.display()
    );
    assert_eq!(refused.message(), expected);
    assert_eq!(supervisor.starts("b"), 0, "a refused call starts nothing");
}

async fn a_calls_b(caller: &Path) {
    let (world, grants) = world(caller, "calls = [\"b\"]");
    let supervisor = world.supervisor(grants).build();
    granted_call_reaches_b(&supervisor).await;
    supervisor.shutdown().await;
}

async fn a_is_refused(caller: &Path) {
    let (world, grants) = world(caller, "");
    let file = grants.file().unwrap().to_owned();
    let supervisor = world.supervisor(grants).build();
    ungranted_call_is_refused_with_the_grants_line(&supervisor, &file).await;
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_rust_plugin_calls_another_catalog_plugin_through_the_host_when_granted() {
    a_calls_b(Path::new(CALLER)).await;
}

#[tokio::test]
async fn a_rust_plugin_is_refused_another_catalog_plugin_with_the_grants_line_to_add() {
    a_is_refused(Path::new(CALLER)).await;
}

/// `tests/go/callerplugin`: an unmodified go-plugin v1.8 plugin that asks the host's
/// `tether.plugins.v1.Plugins/Open` over the host services and `broker.Dial`s the id it returns.
fn go_caller(test: &str) -> Option<std::path::PathBuf> {
    let go = peers::go_or_skip(GoPlugin::V18, test)?;
    Some(go.plugin.with_file_name("callerplugin-v18"))
}

#[tokio::test]
async fn a_go_plugin_v1_8_calls_another_catalog_plugin_through_the_host_when_granted() {
    if let Some(caller) =
        go_caller("a_go_plugin_v1_8_calls_another_catalog_plugin_through_the_host_when_granted")
    {
        a_calls_b(&caller).await;
    }
}

#[tokio::test]
async fn a_go_plugin_v1_8_is_refused_another_catalog_plugin_with_the_grants_line_to_add() {
    if let Some(caller) =
        go_caller("a_go_plugin_v1_8_is_refused_another_catalog_plugin_with_the_grants_line_to_add")
    {
        a_is_refused(&caller).await;
    }
}

/// Process `pid`'s id in its innermost pid namespace (the last field of `NSpid` in its status).
fn innermost_pid(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("NSpid:"))
        .and_then(|ids| ids.split_whitespace().last())
        .unwrap()
        .to_owned()
}
