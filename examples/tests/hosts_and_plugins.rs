//! The example hosts drive the example plugins as their READMEs show (`examples/kv/`,
//! `examples/counter/`): each command a launch of
//! its own, the value kept by the plugin in its working directory. (The interop suites in
//! `tether-tests` pair them with go-plugin's and Python's; this is the Rust pair alone, and
//! makes `cargo test` build the example binaries those suites launch.)

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;
use std::process::{Command, Output};

fn host(program: &str, var: &str, plugin: &str, work: &Path, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .env(var, plugin)
        .current_dir(work)
        .output()
        .unwrap()
}

fn kv(work: &Path, args: &[&str]) -> Output {
    let (host_bin, plugin) = (
        env!("CARGO_BIN_EXE_kv-host"),
        env!("CARGO_BIN_EXE_kv-plugin"),
    );
    host(host_bin, "KV_PLUGIN", plugin, work, args)
}

fn counter(work: &Path, args: &[&str]) -> Output {
    let host_bin = env!("CARGO_BIN_EXE_counter-host");
    let plugin = env!("CARGO_BIN_EXE_counter-plugin");
    host(host_bin, "COUNTER_PLUGIN", plugin, work, args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn kv_host_puts_in_one_launch_and_gets_in_another_and_a_missing_key_exits_3() {
    let work = tempfile::tempdir().unwrap();
    let put = kv(work.path(), &["put", "greeting", "hello from tether"]);
    assert!(put.status.success(), "{}", text(&put.stderr));
    assert_eq!(
        std::fs::read_to_string(work.path().join("kv_greeting")).unwrap(),
        "hello from tether"
    );
    let get = kv(work.path(), &["get", "greeting"]);
    assert!(get.status.success(), "{}", text(&get.stderr));
    assert_eq!(text(&get.stdout), "hello from tether\n");

    let missing = kv(work.path(), &["get", "nothing"]);
    assert_eq!(missing.status.code(), Some(3), "{}", text(&missing.stderr));
    assert!(
        text(&missing.stderr).contains("NotFound"),
        "{}",
        text(&missing.stderr)
    );
}

#[test]
fn counter_host_adds_through_the_plugins_callback_in_both_broker_modes() {
    let work = tempfile::tempdir().unwrap();
    for args in [&["put", "c", "5"][..], &["--multiplex", "put", "c", "7"]] {
        let put = counter(work.path(), args);
        assert!(put.status.success(), "{args:?}: {}", text(&put.stderr));
    }
    let host_service = counter(work.path(), &["--host-service", "put", "c", "30"]);
    assert!(
        host_service.status.success(),
        "{}",
        text(&host_service.stderr)
    );
    let get = counter(work.path(), &["get", "c"]);
    assert!(get.status.success(), "{}", text(&get.stderr));
    assert_eq!(text(&get.stdout), "42\n");
}

#[test]
fn a_host_without_its_plugin_variable_is_a_usage_error() {
    let work = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kv-host"))
        .args(["get", "x"])
        .env_remove("KV_PLUGIN")
        .current_dir(work.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("KV_PLUGIN is not set"),
        "{}",
        text(&out.stderr)
    );
}
