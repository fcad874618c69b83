//! Interop with plugins written with the TypeScript SDK (`sdk-typescript/`, Node + grpc-js):
//!
//! - tether's `kv-host` and `counter-host` drive the TypeScript KV and counter plugins with
//!   AutoMTLS, in plaintext, with go-plugin's multiplexed broker (`--multiplex`) and through a
//!   host service (`--host-service`);
//! - go-plugin's own hosts drive them: v1.8 (AutoMTLS with its P-521 certificates, plaintext,
//!   and the multiplexed broker) and Debian's 1.0.1 (AutoMTLS and plaintext; the plugin dials
//!   1.0.1's callbacks with its own TLS, so they work under AutoMTLS too);
//! - the library host sees the plugin's own certificate and the negotiated broker mode, and
//!   `Shutdown` ends it with status 0; a plugin exits by itself when its host dies.
//!
//! The plugins run confined (tether's default sandbox) with no hand-written allowances: the
//! example hosts resolve the `node` runtime by themselves (`Runtime::Auto`, the program is
//! `node`), the library tests say `Runtime::Node` — what a catalog's `runtime = "node"` does.
//! Without Node or the SDK's dependencies the tests print why and pass as skipped, unless
//! `TETHER_REQUIRE_PEERS=1` (CI sets it): then they fail.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::process::{Command, Stdio};
use std::time::Instant;

use tether_broker::HandshakeConfig;
use tether_examples::kv::GetRequest;
use tether_examples::kv::kv_client::KvClient;
use tether_tests::example_host::{Contract, ExampleHost};
use tether_tests::peers::{self, GoPlugin};
use tether_tests::typescript;
use tether_tests::{bins, sdk_plugin};
use tether_transport::BrokerMode;

/// The TypeScript example that speaks `contract`.
fn example(contract: Contract) -> &'static str {
    match contract {
        Contract::Kv => "kv",
        Contract::Counter => "counter",
    }
}

/// tether's example hosts drive the TypeScript plugins, with `options` before the subcommand
/// (no sandbox allowances: the host resolves the `node` runtime).
macro_rules! tether_broker_tests {
    ($($name:ident: $contract:expr, $options:expr;)*) => {$(
        #[test]
        fn $name() {
            let Some(ts) = typescript::node_or_skip(stringify!($name)) else {
                return;
            };
            let host = match $contract {
                Contract::Kv => bins::KV_HOST.path(),
                Contract::Counter => bins::COUNTER_HOST.path(),
            };
            let options: &[&str] = $options;
            ExampleHost::new($contract, host, ts.command(example($contract)))
                .options(options.iter().copied())
                .round_trip();
        }
    )*};
}

tether_broker_tests! {
    kv_host_runs_the_typescript_kv_plugin_with_automtls: Contract::Kv, &[];
    kv_host_runs_the_typescript_kv_plugin_in_plaintext: Contract::Kv, &["--plaintext"];
    kv_host_runs_the_typescript_kv_plugin_multiplexed: Contract::Kv, &["--multiplex"];
    counter_host_and_the_typescript_counter_plugin_add_through_a_callback_with_automtls: Contract::Counter, &[];
    counter_host_and_the_typescript_counter_plugin_add_through_a_callback_in_plaintext: Contract::Counter, &["--plaintext"];
    counter_host_and_the_typescript_counter_plugin_add_through_a_multiplexed_callback: Contract::Counter, &["--multiplex"];
    the_typescript_counter_plugin_reaches_a_tether_broker_service_without_an_id: Contract::Counter, &["--host-service"];
    the_typescript_counter_plugin_reaches_a_host_service_over_the_multiplexed_connection: Contract::Counter, &["--host-service", "--multiplex"];
}

/// go-plugin's own hosts drive the TypeScript plugins, each with its `TMPDIR` in a fresh
/// directory, which must be empty afterwards: the plugin removed everything it made there (its
/// socket directory, the relay sockets of multiplexed dials).
macro_rules! go_host_tests {
    ($($name:ident: $variant:expr, $contract:expr, $options:expr;)*) => {$(
        #[test]
        fn $name() {
            let Some(ts) = typescript::node_or_skip(stringify!($name)) else {
                return;
            };
            let Some(go) = peers::go_or_skip($variant, stringify!($name)) else {
                return;
            };
            let host = match $contract {
                Contract::Kv => &go.host,
                Contract::Counter => &go.counter_host,
            };
            let tmp = tempfile::tempdir().unwrap();
            let command = ts.command_with_tmpdir(example($contract), tmp.path());
            let options: &[&str] = $options;
            ExampleHost::new($contract, host, command)
                .options(options.iter().copied())
                .round_trip();
            let left: Vec<_> = std::fs::read_dir(tmp.path())
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            assert!(left.is_empty(), "the plugin left files behind: {left:?}");
        }
    )*};
}

go_host_tests! {
    go_host_v1_8_runs_the_typescript_kv_plugin_with_automtls: GoPlugin::V18, Contract::Kv, &[];
    go_host_v1_8_runs_the_typescript_kv_plugin_in_plaintext: GoPlugin::V18, Contract::Kv, &["--plaintext"];
    go_host_v1_8_with_multiplexing_runs_the_typescript_kv_plugin: GoPlugin::V18, Contract::Kv, &["--multiplex"];
    go_host_v1_0_1_runs_the_typescript_kv_plugin_with_automtls: GoPlugin::V101, Contract::Kv, &[];
    go_host_v1_0_1_runs_the_typescript_kv_plugin_in_plaintext: GoPlugin::V101, Contract::Kv, &["--plaintext"];
    go_host_v1_8_serves_callbacks_to_the_typescript_counter_plugin_with_automtls: GoPlugin::V18, Contract::Counter, &[];
    go_host_v1_8_serves_callbacks_to_the_typescript_counter_plugin_in_plaintext: GoPlugin::V18, Contract::Counter, &["--plaintext"];
    go_host_v1_8_serves_multiplexed_callbacks_to_the_typescript_counter_plugin: GoPlugin::V18, Contract::Counter, &["--multiplex"];
    go_host_v1_0_1_serves_callbacks_to_the_typescript_counter_plugin_with_automtls: GoPlugin::V101, Contract::Counter, &[];
    go_host_v1_0_1_serves_callbacks_to_the_typescript_counter_plugin_in_plaintext: GoPlugin::V101, Contract::Counter, &["--plaintext"];
}

/// Through the library, in both broker modes: the connection is mutual TLS with the plugin's
/// own certificate, the 7th handshake field is honoured (multiplexed only when offered), typed
/// calls and errors work, and Shutdown ends the plugin with status 0, leaving nothing behind.
#[tokio::test]
async fn tether_broker_calls_the_typescript_plugin_over_pinned_automtls_in_both_modes_and_shuts_it_down()
 {
    let test = "tether_broker_calls_the_typescript_plugin_over_pinned_automtls_in_both_modes_and_shuts_it_down";
    let Some(ts) = typescript::node_or_skip(test) else {
        return;
    };
    for multiplex in [false, true] {
        let work = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let plugin = ts
            .builder("kv")
            .current_dir(work.path())
            .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
            .multiplex(multiplex)
            .start()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let start_time = started.elapsed();
        sdk_plugin::assert_pinned_automtls(&plugin);
        let expected = if multiplex {
            BrokerMode::Multiplexed
        } else {
            BrokerMode::Default
        };
        assert_eq!(plugin.broker_mode(), expected);
        sdk_plugin::assert_kv_contract(&plugin).await;

        let mut kv = KvClient::new(plugin.channel());
        let calls = 200;
        let timed = Instant::now();
        for _ in 0..calls {
            let value = kv
                .get(GetRequest {
                    key: "answer".into(),
                })
                .await
                .unwrap()
                .into_inner()
                .value;
            assert_eq!(value, b"42");
        }
        let per_call = timed.elapsed() / calls;
        eprintln!(
            "typescript kv plugin, {expected} broker: started in {start_time:?}, sequential Get {per_call:?} per call"
        );
        sdk_plugin::assert_graceful_shutdown(plugin, work.path()).await;
    }
}

/// Started by hand (no cookie), a TypeScript plugin prints go-plugin's message for humans on
/// stderr, nothing on stdout, and exits 1.
#[test]
fn a_typescript_plugin_started_without_the_cookie_says_so_and_exits_1() {
    let Some(ts) = typescript::node_or_skip(
        "a_typescript_plugin_started_without_the_cookie_says_so_and_exits_1",
    ) else {
        return;
    };
    let out = Command::new(&ts.node)
        .arg(ts.example("kv"))
        .env_remove("BASIC_PLUGIN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        tether_proto::env::NOT_LAUNCHED_BY_HOST_MESSAGE
    );
}

/// The SDK watches its parent: when the host dies (SIGKILL, so it cannot clean up), the
/// TypeScript plugin exits by itself and removes its private socket directory.
#[tokio::test]
async fn a_typescript_plugin_exits_when_its_host_dies() {
    let Some(ts) = typescript::node_or_skip("a_typescript_plugin_exits_when_its_host_dies") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let tmpdir = work.path().as_os_str();
    let line = sdk_plugin::assert_exits_when_its_host_dies(
        ts.node.as_os_str(),
        &ts.example("kv"),
        &[("TMPDIR", tmpdir)],
        work.path(),
    )
    .await;
    assert_eq!(
        line.trim_end().split('|').count(),
        6,
        "no 7th field unless offered: {line:?}"
    );
}

/// The SDK serves gRPC server reflection: `tether inspect` lists the plugin's own service and
/// describes its methods and messages without any `.proto` file.
#[test]
fn tether_inspect_lists_and_describes_a_typescript_plugins_services_through_reflection() {
    let Some(ts) = typescript::node_or_skip(
        "tether_inspect_lists_and_describes_a_typescript_plugins_services_through_reflection",
    ) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let out = Command::new(bins::TETHER.path())
        .args(["inspect", "--cmd", &ts.command("counter")])
        .args(["--cookie", "BASIC_PLUGIN=hello"])
        .current_dir(work.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let services = stdout
        .lines()
        .find(|l| l.starts_with("services: "))
        .unwrap_or_else(|| panic!("no services line:\n{stdout}"));
    assert!(services.contains("proto.Counter"), "{services}");
    assert!(
        !services.contains("proto.AddHelper"),
        "only served services are listed: {services}"
    );
    assert!(
        stdout.contains("rpc Put(proto.PutRequest) returns (proto.Empty)")
            && stdout.contains("uint32 add_server = 1;"),
        "{stdout}"
    );
}
