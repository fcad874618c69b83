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

use std::path::Path;
use std::process::{Command, Output};

use tether_tests::peers::{self, GoPlugin};
use tether_tests::procs;

const RUST_HOST: &str = env!("CARGO_BIN_EXE_tests-counter-host");
const RUST_PLUGIN: &str = env!("CARGO_BIN_EXE_tests-counter-plugin");

fn run_host(host: &Path, plugin: &Path, work: &Path, tls: bool, args: &[&str]) -> Output {
    let mut cmd = Command::new(host);
    if !tls {
        cmd.arg("--plaintext");
    }
    cmd.args(args)
        .env("COUNTER_PLUGIN", plugin)
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

/// `put c 5`, `put c 7`, `get c` → `12`, each in a launch of its own; nothing left running.
fn counter_round_trip(host: &Path, plugin: &Path, tls: bool) {
    counter_round_trip_with(host, plugin, tls, &[]);
}

/// [`counter_round_trip`] with extra host flags before the command.
fn counter_round_trip_with(host: &Path, plugin: &Path, tls: bool, flags: &[&str]) {
    let work = tempfile::tempdir().unwrap();
    let args = |command: &[&'static str]| [flags, command].concat();
    for n in ["5", "7"] {
        let put = run_host(host, plugin, work.path(), tls, &args(&["put", "c", n]));
        assert!(put.status.success(), "put c {n} failed: {}", describe(&put));
    }
    assert_eq!(
        std::fs::read_to_string(work.path().join("kv_c")).unwrap(),
        r#"{"Value":12}"#,
        "the plugin stores go-plugin's JSON in kv_<key>"
    );
    let get = run_host(host, plugin, work.path(), tls, &args(&["get", "c"]));
    assert!(get.status.success(), "get failed: {}", describe(&get));
    assert_eq!(String::from_utf8_lossy(&get.stdout), "12\n");
    let left = procs::in_dir(work.path());
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

#[test]
fn tether_host_and_tether_plugin_add_through_a_callback_with_automtls() {
    counter_round_trip(Path::new(RUST_HOST), Path::new(RUST_PLUGIN), true);
}

#[test]
fn tether_host_and_tether_plugin_add_through_a_callback_in_plaintext() {
    counter_round_trip(Path::new(RUST_HOST), Path::new(RUST_PLUGIN), false);
}

#[test]
fn tether_host_and_tether_plugin_add_through_a_multiplexed_callback() {
    counter_round_trip_with(
        Path::new(RUST_HOST),
        Path::new(RUST_PLUGIN),
        true,
        &["--multiplex"],
    );
}

#[test]
fn tether_host_multiplexes_callbacks_to_a_go_plugin_v1_8() {
    let Some(go) = peers::go_or_skip(
        GoPlugin::V18,
        "tether_host_multiplexes_callbacks_to_a_go_plugin_v1_8",
    ) else {
        return;
    };
    counter_round_trip_with(
        Path::new(RUST_HOST),
        &go.counter_plugin,
        true,
        &["--multiplex"],
    );
}

#[test]
fn go_host_v1_8_multiplexes_callbacks_to_a_tether_plugin() {
    let Some(go) = peers::go_or_skip(
        GoPlugin::V18,
        "go_host_v1_8_multiplexes_callbacks_to_a_tether_plugin",
    ) else {
        return;
    };
    counter_round_trip_with(
        &go.counter_host,
        Path::new(RUST_PLUGIN),
        true,
        &["--multiplex"],
    );
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
        counter_round_trip(Path::new(RUST_HOST), &$go.counter_plugin, $tls)
    };
    (@run go_host, $go:ident, $tls:expr) => {
        counter_round_trip(&$go.counter_host, Path::new(RUST_PLUGIN), $tls)
    };
}

interop_tests! {
    tether_host_serves_callbacks_to_a_go_plugin_v1_8_with_automtls: GoPlugin::V18, rust_host, true;
    go_host_v1_8_serves_callbacks_to_a_tether_plugin_with_automtls: GoPlugin::V18, go_host, true;
    tether_host_serves_callbacks_to_a_go_plugin_v1_0_1_in_plaintext: GoPlugin::V101, rust_host, false;
    go_host_v1_0_1_serves_callbacks_to_a_tether_plugin_in_plaintext: GoPlugin::V101, go_host, false;
    go_host_v1_0_1_serves_callbacks_to_a_tether_plugin_with_automtls: GoPlugin::V101, go_host, true;
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
    let put = run_host(
        Path::new(RUST_HOST),
        &go.counter_plugin,
        work.path(),
        true,
        &["put", "c", "5"],
    );
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
    let (host, plugin) = (Path::new(RUST_HOST), Path::new(RUST_PLUGIN));
    let put = |args: &[&str]| {
        let out = run_host(host, plugin, work.path(), true, args);
        assert!(out.status.success(), "{args:?}: {}", describe(&out));
    };
    put(&["--host-service", "put", "c", "5"]);
    put(&["put", "c", "7"]);
    put(&["--host-service", "put", "c", "30"]);
    let get = run_host(host, plugin, work.path(), true, &["get", "c"]);
    assert_eq!(
        String::from_utf8_lossy(&get.stdout),
        "42\n",
        "{}",
        describe(&get)
    );
    assert!(procs::in_dir(work.path()).is_empty());
}
