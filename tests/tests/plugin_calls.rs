//! Plugin-to-plugin calls through the host, granted (docs/PROTOCOL.md §10.3): plugin `a` asks
//! its `Supervisor` host for a connection to catalog plugin `b`; the host starts `b` lazily and
//! relays `a`'s calls to it only when the grants file says `calls = ["b"]` under
//! `[plugins.a]`, and refuses otherwise with the grants file's line and what to add. `b` is the
//! probe plugin holding a secret granted to it alone: `a` reaches `b`'s service, never its
//! secret files. Callers are real plugins in each language, confined as every catalog plugin:
//! the Rust SDK's (`caller-plugin`), the Python SDK's (`sdk-python/examples/caller_plugin.py`),
//! the TypeScript SDK's (`sdk-typescript/examples/caller.ts`) and unmodified go-plugin v1.8 and
//! Debian's 1.0.1 (`tests/go/callerplugin`; in plaintext, see [`Caller`]), in go-plugin's
//! default broker mode and, for those that offer it, its multiplexed one.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use tether_broker::callbacks::BrokerMode;
use tether_broker::{Grants, Lease, Supervisor, Timeouts};
use tether_examples::kv::GetRequest;
use tether_examples::kv::kv_client::KvClient;
use tether_tests::peers::{self, GoPlugin};
use tether_tests::python::python_or_skip;
use tether_tests::typescript::node_or_skip;
use tether_tests::world::{PluginSpec, TEST_GRACE, World};

const CALLER: &str = env!("CARGO_BIN_EXE_caller-plugin");
const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");

/// Plugin `a`: its program, the manifest lines it needs (an interpreter's `runtime`), and
/// whether its host must run its plugins in plaintext (go-plugin ≤ 1.4.3 plugins dial their
/// host's broker with TLS server name "unused", which fails AutoMTLS's certificate check:
/// `tests/interop_counter.rs` pins that down).
struct Caller {
    program: PathBuf,
    manifest: &'static str,
    plaintext: bool,
}

impl Caller {
    fn native(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            manifest: "",
            plaintext: false,
        }
    }
}

/// The Rust SDK's caller.
fn rust_caller() -> Caller {
    Caller::native(CALLER)
}

/// The Python SDK's caller (`broker.open_plugin`), or `None` (skipped) without Python.
fn python_caller(test: &str) -> Option<Caller> {
    let python = python_or_skip(test)?;
    Some(Caller {
        program: python.sdk.join("examples/caller_plugin.py"),
        manifest: "runtime = \"python\"",
        plaintext: false,
    })
}

/// The TypeScript SDK's caller (`broker.openPlugin`), compiled by the peer's `npm run build`,
/// or `None` (skipped) without Node.
fn typescript_caller(test: &str) -> Option<Caller> {
    let node = node_or_skip(test)?;
    let program = node.example("caller");
    // tsc keeps the `#!/usr/bin/env node` line but not an executable mode.
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    Some(Caller {
        program,
        manifest: "runtime = \"node\"",
        plaintext: false,
    })
}

/// `tests/go/callerplugin` built with go-plugin `variant`: an unmodified go-plugin plugin that
/// asks the host's `tether.plugins.v1.Plugins/Open` over the host services and `broker.Dial`s
/// the id it returns; go-plugin 1.0.1's in plaintext (see [`Caller`]).
fn go_caller(variant: GoPlugin, test: &str) -> Option<Caller> {
    let go = peers::go_or_skip(variant, test)?;
    let program = go
        .plugin
        .with_file_name(format!("callerplugin-{}", variant.suffix()));
    Some(Caller {
        plaintext: variant == GoPlugin::V101,
        ..Caller::native(program)
    })
}

/// `b`'s secret, granted to `b` only.
const TOKEN: &str = "b's own token";

/// A world with caller `a` (running `caller`) and probe `b` (holding the secret `token`), and a
/// grants file with `a_grants` as `[plugins.a]`'s body.
fn world(caller: &Caller, a_grants: &str) -> (World, Grants) {
    let world = World::new();
    world.add_plugin(&PluginSpec::new("a", &caller.program).extra(caller.manifest));
    world.add_plugin(&PluginSpec::new("b", PROBE).secrets(&["token"]));
    world.add_secret("token", TOKEN);
    let file = world.catalog().join("../grants.toml");
    let text = format!("[plugins.a]\n{a_grants}\n[plugins.b]\nsecrets = [\"token\"]\n");
    std::fs::write(&file, &text).unwrap();
    let grants = Grants::load(&file).unwrap();
    (world, grants)
}

/// A supervisor over `world`'s catalog with `grants`, its plugins' brokers multiplexed when
/// `multiplex`, in plaintext when `caller` needs it.
fn supervisor(world: &World, grants: Grants, caller: &Caller, multiplex: bool) -> Supervisor {
    let (delivery, run) = (world.delivery(), world.run());
    let plaintext = caller.plaintext;
    world
        .supervisor(grants)
        .customize(move |b| {
            let b = b
                .delivery_dir(&delivery)
                .private_dir_base(&run)
                .timeouts(
                    Timeouts::default()
                        .shutdown_grace(TEST_GRACE)
                        .terminate_grace(TEST_GRACE),
                )
                .multiplex(multiplex);
            if plaintext { b.plaintext() } else { b }
        })
        .build()
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

async fn granted_call_reaches_b(supervisor: &Supervisor, multiplex: bool) {
    let a = supervisor.acquire("a").await.unwrap();
    let mode = if multiplex {
        BrokerMode::Multiplexed
    } else {
        BrokerMode::Default
    };
    assert_eq!(a.broker().mode(), mode);
    assert_eq!(supervisor.pid("b").await, None, "b starts only when called");
    assert_eq!(ask(&a, "b:secret:token").await.unwrap(), TOKEN);
    let b_pid = supervisor
        .pid("b")
        .await
        .expect("b was started for the call");
    // b reports its pid as it sees it: inside its world's pid namespace, the innermost of the
    // host's process's NSpid entries.
    assert_eq!(ask(&a, "b:pid:").await.unwrap(), innermost_pid(b_pid));
    // A second connection reuses the running b; b's own errors reach the caller as they are.
    let missing = ask(&a, "b:env:TETHER_NO_SUCH_VARIABLE").await.unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound, "{missing:?}");
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

async fn a_calls_b(caller: &Caller, multiplex: bool) {
    let (world, grants) = world(caller, "calls = [\"b\"]");
    let supervisor = supervisor(&world, grants, caller, multiplex);
    granted_call_reaches_b(&supervisor, multiplex).await;
    supervisor.shutdown().await;
}

async fn a_is_refused(caller: &Caller) {
    let (world, grants) = world(caller, "");
    let file = grants.file().unwrap().to_owned();
    let supervisor = supervisor(&world, grants, caller, false);
    ungranted_call_is_refused_with_the_grants_line(&supervisor, &file).await;
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_rust_plugin_calls_another_catalog_plugin_through_the_host_when_granted() {
    a_calls_b(&rust_caller(), false).await;
}

#[tokio::test]
async fn a_multiplexed_rust_plugin_calls_another_catalog_plugin_through_the_host_when_granted() {
    a_calls_b(&rust_caller(), true).await;
}

#[tokio::test]
async fn a_rust_plugin_is_refused_another_catalog_plugin_with_the_grants_line_to_add() {
    a_is_refused(&rust_caller()).await;
}

#[tokio::test]
async fn a_python_plugin_calls_another_catalog_plugin_through_the_host_when_granted() {
    let test = "a_python_plugin_calls_another_catalog_plugin_through_the_host_when_granted";
    if let Some(caller) = python_caller(test) {
        a_calls_b(&caller, false).await;
    }
}

#[tokio::test]
async fn a_multiplexed_python_plugin_calls_another_catalog_plugin_through_the_host_when_granted() {
    let test =
        "a_multiplexed_python_plugin_calls_another_catalog_plugin_through_the_host_when_granted";
    if let Some(caller) = python_caller(test) {
        a_calls_b(&caller, true).await;
    }
}

#[tokio::test]
async fn a_python_plugin_is_refused_another_catalog_plugin_with_the_grants_line_to_add() {
    let test = "a_python_plugin_is_refused_another_catalog_plugin_with_the_grants_line_to_add";
    if let Some(caller) = python_caller(test) {
        a_is_refused(&caller).await;
    }
}

#[tokio::test]
async fn a_typescript_plugin_calls_another_catalog_plugin_through_the_host_when_granted() {
    let test = "a_typescript_plugin_calls_another_catalog_plugin_through_the_host_when_granted";
    if let Some(caller) = typescript_caller(test) {
        a_calls_b(&caller, false).await;
    }
}

#[tokio::test]
async fn a_multiplexed_typescript_plugin_calls_another_catalog_plugin_through_the_host_when_granted()
 {
    let test = "a_multiplexed_typescript_plugin_calls_another_catalog_plugin_through_the_host_when_granted";
    if let Some(caller) = typescript_caller(test) {
        a_calls_b(&caller, true).await;
    }
}

#[tokio::test]
async fn a_typescript_plugin_is_refused_another_catalog_plugin_with_the_grants_line_to_add() {
    let test = "a_typescript_plugin_is_refused_another_catalog_plugin_with_the_grants_line_to_add";
    if let Some(caller) = typescript_caller(test) {
        a_is_refused(&caller).await;
    }
}

#[tokio::test]
async fn a_go_plugin_v1_8_calls_another_catalog_plugin_through_the_host_when_granted() {
    let test = "a_go_plugin_v1_8_calls_another_catalog_plugin_through_the_host_when_granted";
    if let Some(caller) = go_caller(GoPlugin::V18, test) {
        a_calls_b(&caller, false).await;
    }
}

#[tokio::test]
async fn a_go_plugin_v1_8_is_refused_another_catalog_plugin_with_the_grants_line_to_add() {
    let test = "a_go_plugin_v1_8_is_refused_another_catalog_plugin_with_the_grants_line_to_add";
    if let Some(caller) = go_caller(GoPlugin::V18, test) {
        a_is_refused(&caller).await;
    }
}

/// go-plugin 1.0.1 has no multiplexed broker; its `Dial` waits for an announced id as 1.8's
/// default mode does. In plaintext: see [`Caller`].
#[tokio::test]
async fn a_go_plugin_1_0_1_in_plaintext_calls_another_catalog_plugin_through_the_host_when_granted()
{
    let test =
        "a_go_plugin_1_0_1_in_plaintext_calls_another_catalog_plugin_through_the_host_when_granted";
    if let Some(caller) = go_caller(GoPlugin::V101, test) {
        a_calls_b(&caller, false).await;
    }
}

#[tokio::test]
async fn a_go_plugin_1_0_1_in_plaintext_is_refused_another_catalog_plugin_with_the_grants_line_to_add()
 {
    let test = "a_go_plugin_1_0_1_in_plaintext_is_refused_another_catalog_plugin_with_the_grants_line_to_add";
    if let Some(caller) = go_caller(GoPlugin::V101, test) {
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
