//! Callbacks through go-plugin's GRPCBroker, with go-plugin's `examples/bidirectional` counter:
//! `put c 5`, `put c 7` (each in its own launch; the plugin dials the host's `AddHelper` on the
//! broker id it was given) then `get c` prints `12`.
//!
//! - tether ↔ tether with AutoMTLS (and in plaintext), in both broker modes (`--multiplex`);
//! - tether host ↔ newest go-plugin plugin and newest go-plugin host ↔ tether plugin with the
//!   multiplexed broker (`tests/multiplex.rs` proves the single connection);
//! - tether host ↔ newest go-plugin counter plugin, and newest go-plugin host ↔ tether plugin,
//!   with AutoMTLS;
//! - the same with Debian's go-plugin 1.0.1 in plaintext: go-plugin ≤ 1.4.3 plugins dial back
//!   to their host with TLS server name "unused", which fails certificate verification under
//!   AutoMTLS — a test pins down that the tether host then reports a clear error. A 1.0.1 *host*
//!   with a tether plugin works under AutoMTLS (tether plugins dial correctly).

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use tether_tests::bins;
use tether_tests::example_host::{Contract, ExampleHost, GoSide, describe};
use tether_tests::go_interop_tests;
use tether_tests::peers::{self, GoPlugin};
use tether_tests::procs;

#[test]
fn tether_broker_and_tether_plugin_add_through_a_callback_with_automtls() {
    ExampleHost::counter(bins::COUNTER_HOST.path(), bins::COUNTER_PLUGIN.path())
        .counter_round_trip();
}

#[test]
fn tether_broker_and_tether_plugin_add_through_a_callback_in_plaintext() {
    ExampleHost::counter(bins::COUNTER_HOST.path(), bins::COUNTER_PLUGIN.path())
        .tls(false)
        .counter_round_trip();
}

#[test]
fn tether_broker_and_tether_plugin_add_through_a_multiplexed_callback() {
    ExampleHost::counter(bins::COUNTER_HOST.path(), bins::COUNTER_PLUGIN.path())
        .options(["--multiplex"])
        .counter_round_trip();
}

go_interop_tests! { Contract::Counter;
    tether_broker_multiplexes_callbacks_to_a_go_plugin_v1_8: GoPlugin::V18, GoSide::Plugin, true, &["--multiplex"];
    go_host_v1_8_multiplexes_callbacks_to_a_tether_plugin: GoPlugin::V18, GoSide::Host, true, &["--multiplex"];
    tether_broker_serves_callbacks_to_a_go_plugin_v1_8_with_automtls: GoPlugin::V18, GoSide::Plugin, true;
    go_host_v1_8_serves_callbacks_to_a_tether_plugin_with_automtls: GoPlugin::V18, GoSide::Host, true;
    tether_broker_serves_callbacks_to_a_go_plugin_v1_0_1_in_plaintext: GoPlugin::V101, GoSide::Plugin, false;
    go_host_v1_0_1_serves_callbacks_to_a_tether_plugin_in_plaintext: GoPlugin::V101, GoSide::Host, false;
    go_host_v1_0_1_serves_callbacks_to_a_tether_plugin_with_automtls: GoPlugin::V101, GoSide::Host, true;
}

/// go-plugin ≤ 1.4.3 plugins verify the host's broker certificate against server name
/// "unused", so under AutoMTLS their callbacks fail. The tether host must say so (not hang) and
/// clean up; `--plaintext` is the documented way to run such plugins.
#[test]
fn a_go_plugin_v1_0_1_cannot_call_back_under_automtls_and_the_host_reports_why() {
    let Some(go) = peers::go_or_skip(
        GoPlugin::V101,
        "a_go_plugin_v1_0_1_cannot_call_back_under_automtls_and_the_host_reports_why",
    ) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let put = ExampleHost::counter(bins::COUNTER_HOST.path(), &go.counter_plugin)
        .run(work.path(), &["put", "c", "5"]);
    assert_eq!(put.status.code(), Some(1), "{}", describe(&put));
    let stderr = String::from_utf8_lossy(&put.stderr);
    assert!(
        stderr.contains("put \"c\" failed") && stderr.contains("not unused"),
        "the error names the call and go-plugin's server-name bug: {stderr}"
    );
    assert!(!work.path().join("kv_c").exists());
    let left = procs::in_dir(work.path());
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

/// The ergonomic layer: the host registers `AddHelper` once as a host service and the plugin
/// reaches it without an id (`add_server` 0); per-call ids keep working in the same launches.
#[test]
fn a_tether_plugin_reaches_a_host_service_without_an_id_next_to_per_call_callbacks() {
    let work = tempfile::tempdir().unwrap();
    let host = ExampleHost::counter(bins::COUNTER_HOST.path(), bins::COUNTER_PLUGIN.path());
    let put = |args: &[&str]| {
        let out = host.run(work.path(), args);
        assert!(out.status.success(), "{args:?}: {}", describe(&out));
    };
    put(&["--host-service", "put", "c", "5"]);
    put(&["put", "c", "7"]);
    put(&["--host-service", "put", "c", "30"]);
    let get = host.run(work.path(), &["get", "c"]);
    assert_eq!(
        String::from_utf8_lossy(&get.stdout),
        "42\n",
        "{}",
        describe(&get)
    );
    assert!(procs::in_dir(work.path()).is_empty());
}
