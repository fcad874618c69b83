//! The `tether` command against real plugins: tether's KV plugin and go-plugin's (newest and
//! Debian's 1.0.1), with message types from `--proto` files and from server reflection.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;
use std::process::{Command, Output};

use tether_tests::bins;
use tether_tests::output::{stderr, stdout};
use tether_tests::peers::{self, GoPlugin, repo_root};
use tether_tests::procs;

/// Exit statuses documented in `cli/src/main.rs`.
const EXIT_CALL: i32 = 1;
const EXIT_START: i32 = 3;
const EXIT_INPUT: i32 = 4;

fn tether(work: &Path, args: &[&str]) -> Output {
    Command::new(bins::TETHER.path())
        .args(args)
        .current_dir(work)
        .output()
        .unwrap()
}

fn kv_proto() -> String {
    repo_root()
        .join("examples/proto/kv.proto")
        .to_string_lossy()
        .into_owned()
}

/// `Put` then `Get` through `tether call`; `extra` selects where types come from.
fn put_then_get(plugin: &Path, extra: &[&str]) {
    let work = tempfile::tempdir().unwrap();
    let cmd = plugin.to_str().unwrap();
    // The KV plugins keep `kv_<key>` in their working directory: granted explicitly.
    let work_dir = work.path().to_str().unwrap();
    let base = [
        "call",
        "--cmd",
        cmd,
        "--cookie",
        "BASIC_PLUGIN=hello",
        "--work-dir",
        work_dir,
    ];
    let put: Vec<&str> = base
        .iter()
        .chain(extra)
        .chain(&["proto.KV/Put", r#"{"key":"x","value":"eQ=="}"#])
        .copied()
        .collect();
    let out = tether(work.path(), &put);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "{}\n");
    assert_eq!(std::fs::read(work.path().join("kv_x")).unwrap(), b"y");

    let get: Vec<&str> = base
        .iter()
        .chain(extra)
        .chain(&["proto.KV/Get", r#"{"key":"x"}"#])
        .copied()
        .collect();
    let out = tether(work.path(), &get);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "{\"value\":\"eQ==\"}\n");
    assert!(procs::in_dir(work.path()).is_empty());
}

#[test]
fn call_puts_and_gets_through_a_tether_plugin_with_proto_files() {
    put_then_get(Path::new(bins::KV_PLUGIN.path()), &["--proto", &kv_proto()]);
}

#[test]
fn call_learns_types_from_a_tether_plugin_by_server_reflection() {
    put_then_get(Path::new(bins::KV_PLUGIN.path()), &[]);
}

#[test]
fn call_learns_types_from_a_go_plugin_v1_8_by_server_reflection() {
    let Some(go) = peers::go_or_skip(GoPlugin::V18, "call_learns_types_by_reflection") else {
        return;
    };
    put_then_get(&go.plugin, &[]);
}

#[test]
fn calling_shutdown_on_a_go_plugin_is_a_success_since_it_stopped_as_asked() {
    let Some(go) = peers::go_or_skip(GoPlugin::V18, "call_shutdown_on_a_go_plugin") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let out = tether(
        work.path(),
        &[
            "call",
            "--cmd",
            go.plugin.to_str().unwrap(),
            "--cookie",
            "BASIC_PLUGIN=hello",
            "plugin.GRPCController/Shutdown",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "{}\n");
}

#[test]
fn call_decodes_responses_larger_than_tonics_4_mib_and_names_its_limit_when_one_is_larger() {
    let work = tempfile::tempdir().unwrap();
    // kv-plugin answers Get with the file kv_<key> of its working directory.
    std::fs::write(work.path().join("kv_big"), vec![b'x'; 5 << 20]).unwrap();
    let get = |extra: &[&str]| {
        let mut args = vec![
            "call",
            "--cmd",
            bins::KV_PLUGIN.path(),
            "--cookie",
            "BASIC_PLUGIN=hello",
            "--work-dir",
            work.path().to_str().unwrap(),
        ];
        args.extend(extra);
        args.extend(["proto.KV/Get", r#"{"key":"big"}"#]);
        tether(work.path(), &args)
    };
    let out = get(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).len() > 5 << 20);
    let out = get(&["--max-message-size", "1MiB"]);
    assert_eq!(out.status.code(), Some(EXIT_CALL), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("larger than 1MiB (--max-message-size)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn call_drives_a_go_plugin_v1_0_1_with_proto_files() {
    let Some(go) = peers::go_or_skip(GoPlugin::V101, "call_drives_a_go_plugin_v1_0_1") else {
        return;
    };
    put_then_get(&go.plugin, &["--proto", &kv_proto()]);
}

#[test]
fn bad_input_gives_one_clear_error_line_and_a_non_zero_exit() {
    let work = tempfile::tempdir().unwrap();
    let proto = kv_proto();
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["proto.KV/Delete", "{}"],
            EXIT_INPUT,
            "service proto.KV has no method \"Delete\"; its methods: Get, Put",
        ),
        (
            &["proto.Nope/Get", "{}"],
            EXIT_INPUT,
            "service \"proto.Nope\" is not declared in the --proto files",
        ),
        (
            &["proto.KV/Get", r#"{"key":7}"#],
            EXIT_INPUT,
            "the request does not fit message proto.GetRequest",
        ),
        (
            &["proto.KV/Get", r#"{"key":"missing"}"#],
            EXIT_CALL,
            "proto.KV/Get failed: NotFound",
        ),
    ];
    for (args, code, message) in cases {
        let mut full = vec![
            "call",
            "--cmd",
            bins::KV_PLUGIN.path(),
            "--cookie",
            "BASIC_PLUGIN=hello",
            "--proto",
            &proto,
        ];
        full.extend_from_slice(args);
        let out = tether(work.path(), &full);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(first.starts_with("tether: error: "), "{args:?}: {err}");
        assert!(first.contains(message), "{args:?}: {err}");
        assert!(stdout(&out).is_empty(), "{args:?}");
    }
    assert!(procs::in_dir(work.path()).is_empty());
}

#[test]
fn a_missing_plugin_is_a_start_error() {
    let work = tempfile::tempdir().unwrap();
    let out = tether(
        work.path(),
        &[
            "call",
            "--cmd",
            "/nonexistent/plugin",
            "--cookie",
            "BASIC_PLUGIN=hello",
            "proto.KV/Get",
            "{}",
        ],
    );
    assert_eq!(out.status.code(), Some(EXIT_START), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with(
            "tether: error: plugin `plugin`: its program is in none of the places searched: /nonexistent/plugin (--cmd)"
        ),
        "{err}"
    );
}

#[test]
fn inspect_reports_version_transport_certificate_health_and_services() {
    let Some(go) = peers::go_or_skip(GoPlugin::V18, "inspect_reports") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let out = tether(
        work.path(),
        &[
            "inspect",
            "--cmd",
            go.plugin.to_str().unwrap(),
            "--cookie",
            "BASIC_PLUGIN=hello",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("app protocol version: 1\n"), "{text}");
    assert!(text.contains("transport: unix /"), "{text}");
    assert!(text.contains("broker: default\n"), "{text}");
    assert!(
        text.contains("tls: mutual, plugin certificate sha256 "),
        "{text}"
    );
    assert!(text.contains("health: Serving\n"), "{text}");
    assert!(text.contains("proto.KV"), "{text}");
    assert!(text.contains("shutdown: exited gracefully"), "{text}");
}

#[test]
fn inspect_with_multiplex_reports_the_multiplexed_broker_of_a_go_plugin_v1_8() {
    let Some(go) = peers::go_or_skip(GoPlugin::V18, "inspect_with_multiplex") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let out = tether(
        work.path(),
        &[
            "inspect",
            "--multiplex",
            "--cmd",
            go.plugin.to_str().unwrap(),
            "--cookie",
            "BASIC_PLUGIN=hello",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("broker: multiplexed\n"), "{text}");
    assert!(text.contains("health: Serving\n"), "{text}");
    assert!(text.contains("shutdown: exited gracefully"), "{text}");
}

/// Issue 11 ("also found") / issue 16 item 3: a plugin that dies in the middle of a call is
/// reported as the plugin ending badly, with what the operator needs to see why.
#[test]
fn a_plugin_that_crashes_during_a_call_exits_3_with_its_name_exit_status_and_stderr_tail() {
    let work = tempfile::tempdir().unwrap();
    let out = tether(
        work.path(),
        &[
            "call",
            "--proto",
            &kv_proto(),
            "--cmd",
            env!("CARGO_BIN_EXE_probe-plugin"),
            "--cookie",
            "BASIC_PLUGIN=hello",
            "proto.KV/Put",
            r#"{"key":"crash:"}"#,
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(EXIT_START), "{err}");
    assert!(err.contains("`probe-plugin`"), "names the plugin: {err}");
    assert!(
        err.contains("exit status: 3"),
        "gives its exit status: {err}"
    );
    assert!(
        err.contains("crashing on purpose"),
        "shows its stderr tail: {err}"
    );
    assert!(procs::in_dir(work.path()).is_empty());
}
