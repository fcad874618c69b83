//! Interop with real HashiCorp go-plugin peers, built by `tests/go/build.sh` with the newest
//! go-plugin (v1.8.x, Go modules) and Debian's go-plugin 1.0.1 (GOPATH, Go 1.19):
//!
//! - tether's `kv-host` drives go-plugin's KV plugin;
//! - go-plugin's KV host drives tether's `kv-plugin`;
//! - and tether ↔ tether, for comparison;
//!
//! each with AutoMTLS on and off, `put` then `get` across separate launches, and a missing key.
//! When a Go toolchain is missing the Go tests print why and pass as skipped, unless
//! `TETHER_REQUIRE_PEERS=1` (CI sets it): then they fail.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use tether_broker::{HandshakeConfig, PluginClient, ShutdownOutcome};
use tether_tests::bins;
use tether_tests::example_host::{Contract, ExampleHost, GoSide};
use tether_tests::go_interop_tests;
use tether_tests::peers::{self, GoPlugin};
use tether_tests::procs;

go_interop_tests! { Contract::Kv;
    tether_broker_runs_a_go_plugin_v1_8_with_automtls: GoPlugin::V18, GoSide::Plugin, true;
    tether_broker_runs_a_go_plugin_v1_8_in_plaintext: GoPlugin::V18, GoSide::Plugin, false;
    tether_broker_runs_a_go_plugin_v1_0_1_with_automtls: GoPlugin::V101, GoSide::Plugin, true;
    tether_broker_runs_a_go_plugin_v1_0_1_in_plaintext: GoPlugin::V101, GoSide::Plugin, false;
    go_host_v1_8_runs_a_tether_plugin_with_automtls: GoPlugin::V18, GoSide::Host, true;
    go_host_v1_8_runs_a_tether_plugin_in_plaintext: GoPlugin::V18, GoSide::Host, false;
    go_host_v1_0_1_runs_a_tether_plugin_with_automtls: GoPlugin::V101, GoSide::Host, true;
    go_host_v1_0_1_runs_a_tether_plugin_in_plaintext: GoPlugin::V101, GoSide::Host, false;
}

#[test]
fn tether_broker_runs_a_tether_plugin_with_automtls() {
    ExampleHost::kv(bins::KV_HOST.path(), bins::KV_PLUGIN.path()).kv_round_trip();
}

#[test]
fn tether_broker_runs_a_tether_plugin_in_plaintext() {
    ExampleHost::kv(bins::KV_HOST.path(), bins::KV_PLUGIN.path())
        .tls(false)
        .kv_round_trip();
}

/// go-plugin's own certificates (P-521, ECDSA-SHA512, CA:TRUE) are accepted by pinning: the
/// connection really is TLS, not a silent fallback, and Shutdown ends the Go plugin gracefully.
#[tokio::test]
async fn tether_broker_connects_to_go_plugins_over_pinned_automtls_and_shuts_them_down() {
    for variant in [GoPlugin::V18, GoPlugin::V101] {
        let Some(go) = peers::go_or_skip(
            variant,
            "tether_broker_connects_to_go_plugins_over_pinned_automtls",
        ) else {
            continue;
        };
        let work = tempfile::tempdir().unwrap();
        let plugin = PluginClient::builder(&go.plugin)
            .current_dir(work.path())
            .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
            .start()
            .await
            .unwrap_or_else(|e| panic!("{variant:?}: {e}"));
        assert!(plugin.is_tls(), "{variant:?}");
        let fingerprint = plugin.peer_fingerprint().expect("AutoMTLS is on");
        assert_eq!(fingerprint.len(), 32 * 3 - 1, "{variant:?}: {fingerprint}");
        assert_eq!(plugin.app_version(), 1);
        let outcome = plugin.shutdown().await.unwrap();
        assert!(
            matches!(outcome, ShutdownOutcome::Graceful(status) if status.success()),
            "{variant:?}: {outcome}"
        );
        let left = procs::in_dir(work.path());
        assert!(
            left.is_empty(),
            "{variant:?}: processes left behind: {left:?}"
        );
    }
}
