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

use std::path::Path;
use std::process::{Command, Output};

use tether_broker::{HandshakeConfig, PluginClient, ShutdownOutcome};
use tether_tests::peers::{self, GoPlugin};
use tether_tests::procs;

const RUST_HOST: &str = env!("CARGO_BIN_EXE_tests-kv-host");
const RUST_PLUGIN: &str = env!("CARGO_BIN_EXE_tests-kv-plugin");

/// Both hosts exit with this status for `get` of a missing key.
const EXIT_NOT_FOUND: i32 = 3;

fn run_host(host: &Path, plugin: &Path, work: &Path, tls: bool, args: &[&str]) -> Output {
    let mut cmd = Command::new(host);
    if !tls {
        cmd.arg("--plaintext");
    }
    cmd.args(args)
        .env("KV_PLUGIN", plugin)
        .current_dir(work)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", host.display()))
}

fn describe(out: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `put` in one launch, `get` in another, then `get` of a missing key; nothing may be left
/// running.
fn kv_round_trip(host: &Path, plugin: &Path, tls: bool) {
    let work = tempfile::tempdir().unwrap();
    // A value no earlier run can have left behind.
    let value = format!("value-{}-{}", std::process::id(), rand_suffix());

    let put = run_host(host, plugin, work.path(), tls, &["put", "greeting", &value]);
    assert!(put.status.success(), "put failed: {}", describe(&put));
    assert_eq!(
        std::fs::read_to_string(work.path().join("kv_greeting")).unwrap(),
        value,
        "the plugin stores the value in kv_<key> in its working directory"
    );

    let get = run_host(host, plugin, work.path(), tls, &["get", "greeting"]);
    assert!(get.status.success(), "get failed: {}", describe(&get));
    assert_eq!(String::from_utf8_lossy(&get.stdout), format!("{value}\n"));

    let missing = run_host(host, plugin, work.path(), tls, &["get", "no-such-key"]);
    assert_eq!(
        missing.status.code(),
        Some(EXIT_NOT_FOUND),
        "a missing key is NotFound: {}",
        describe(&missing)
    );
    assert!(missing.stdout.is_empty(), "{}", describe(&missing));

    let left = procs::in_dir(work.path());
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

macro_rules! interop_tests {
    ($($name:ident: $variant:expr, $direction:ident, $tls:expr;)*) => {$(
        #[test]
        fn $name() {
            let Some(go) = peers::go_or_skip($variant, stringify!($name)) else {
                return;
            };
            interop_tests!(@run $direction, go, $tls);
        }
    )*};
    (@run rust_host, $go:ident, $tls:expr) => {
        kv_round_trip(Path::new(RUST_HOST), &$go.plugin, $tls)
    };
    (@run go_host, $go:ident, $tls:expr) => {
        kv_round_trip(&$go.host, Path::new(RUST_PLUGIN), $tls)
    };
}

interop_tests! {
    tether_host_runs_a_go_plugin_v1_8_with_automtls: GoPlugin::V18, rust_host, true;
    tether_host_runs_a_go_plugin_v1_8_in_plaintext: GoPlugin::V18, rust_host, false;
    tether_host_runs_a_go_plugin_v1_0_1_with_automtls: GoPlugin::V101, rust_host, true;
    tether_host_runs_a_go_plugin_v1_0_1_in_plaintext: GoPlugin::V101, rust_host, false;
    go_host_v1_8_runs_a_tether_plugin_with_automtls: GoPlugin::V18, go_host, true;
    go_host_v1_8_runs_a_tether_plugin_in_plaintext: GoPlugin::V18, go_host, false;
    go_host_v1_0_1_runs_a_tether_plugin_with_automtls: GoPlugin::V101, go_host, true;
    go_host_v1_0_1_runs_a_tether_plugin_in_plaintext: GoPlugin::V101, go_host, false;
}

#[test]
fn tether_host_runs_a_tether_plugin_with_automtls() {
    kv_round_trip(Path::new(RUST_HOST), Path::new(RUST_PLUGIN), true);
}

#[test]
fn tether_host_runs_a_tether_plugin_in_plaintext() {
    kv_round_trip(Path::new(RUST_HOST), Path::new(RUST_PLUGIN), false);
}

/// go-plugin's own certificates (P-521, ECDSA-SHA512, CA:TRUE) are accepted by pinning: the
/// connection really is TLS, not a silent fallback, and Shutdown ends the Go plugin gracefully.
#[tokio::test]
async fn tether_host_connects_to_go_plugins_over_pinned_automtls_and_shuts_them_down() {
    for variant in [GoPlugin::V18, GoPlugin::V101] {
        let Some(go) = peers::go_or_skip(
            variant,
            "tether_host_connects_to_go_plugins_over_pinned_automtls",
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
