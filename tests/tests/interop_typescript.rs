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
//! The round trips and the library's KV checks are the same for every SDK: `sdk_plugin`.
//!
//! The plugins run confined (tether's default sandbox) with no hand-written allowances: the
//! example hosts resolve the `node` runtime by themselves (`Runtime::Auto`, the program is
//! `node`), the library tests say `Runtime::Node` — what a catalog's `runtime = "node"` does.
//! Without Node or the SDK's dependencies the tests print why and pass as skipped, unless
//! `TETHER_REQUIRE_PEERS=1` (CI sets it): then they fail.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::process::{Command, Stdio};

use tether_tests::example_host::Contract;
use tether_tests::peers::GoPlugin;
use tether_tests::sdk_interop_tests;
use tether_tests::sdk_plugin::{self, Host};
use tether_tests::{bins, typescript};

// tether's example hosts drive the TypeScript plugins (no sandbox allowances: the host resolves
// the `node` runtime).
sdk_interop_tests! { typescript::node_or_skip;
    kv_host_runs_the_typescript_kv_plugin_with_automtls: Host::Tether, Contract::Kv, true;
    kv_host_runs_the_typescript_kv_plugin_in_plaintext: Host::Tether, Contract::Kv, false;
    kv_host_runs_the_typescript_kv_plugin_multiplexed: Host::Tether, Contract::Kv, true, &["--multiplex"];
    counter_host_and_the_typescript_counter_plugin_add_through_a_callback_with_automtls: Host::Tether, Contract::Counter, true;
    counter_host_and_the_typescript_counter_plugin_add_through_a_callback_in_plaintext: Host::Tether, Contract::Counter, false;
    counter_host_and_the_typescript_counter_plugin_add_through_a_multiplexed_callback: Host::Tether, Contract::Counter, true, &["--multiplex"];
    the_typescript_counter_plugin_reaches_a_tether_broker_service_without_an_id: Host::Tether, Contract::Counter, true, &["--host-service"];
    the_typescript_counter_plugin_reaches_a_host_service_over_the_multiplexed_connection: Host::Tether, Contract::Counter, true, &["--host-service", "--multiplex"];
}

// go-plugin's own hosts drive the TypeScript plugins, each with its `TMPDIR` in a fresh
// directory, which must be empty afterwards (the relay sockets of multiplexed dials included).
sdk_interop_tests! { typescript::node_or_skip;
    go_host_v1_8_runs_the_typescript_kv_plugin_with_automtls: Host::Go(GoPlugin::V18), Contract::Kv, true;
    go_host_v1_8_runs_the_typescript_kv_plugin_in_plaintext: Host::Go(GoPlugin::V18), Contract::Kv, false;
    go_host_v1_8_with_multiplexing_runs_the_typescript_kv_plugin: Host::Go(GoPlugin::V18), Contract::Kv, true, &["--multiplex"];
    go_host_v1_0_1_runs_the_typescript_kv_plugin_with_automtls: Host::Go(GoPlugin::V101), Contract::Kv, true;
    go_host_v1_0_1_runs_the_typescript_kv_plugin_in_plaintext: Host::Go(GoPlugin::V101), Contract::Kv, false;
    go_host_v1_8_serves_callbacks_to_the_typescript_counter_plugin_with_automtls: Host::Go(GoPlugin::V18), Contract::Counter, true;
    go_host_v1_8_serves_callbacks_to_the_typescript_counter_plugin_in_plaintext: Host::Go(GoPlugin::V18), Contract::Counter, false;
    go_host_v1_8_serves_multiplexed_callbacks_to_the_typescript_counter_plugin: Host::Go(GoPlugin::V18), Contract::Counter, true, &["--multiplex"];
    go_host_v1_0_1_serves_callbacks_to_the_typescript_counter_plugin_with_automtls: Host::Go(GoPlugin::V101), Contract::Counter, true;
    go_host_v1_0_1_serves_callbacks_to_the_typescript_counter_plugin_in_plaintext: Host::Go(GoPlugin::V101), Contract::Counter, false;
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
    sdk_plugin::assert_kv_plugin_in_both_modes("typescript", || ts.builder("kv")).await;
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
