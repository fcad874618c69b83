//! `tether call` gives a plugin what a host gives — an environment value it requires
//! (`--env`), a secret and a config file (`--secret`, `--config`), host services it calls back
//! (`--host-proto`, `--host-reply`) — and sends request metadata (`-H`), from the command line
//! alone, through the real binary, to a plugin that needs all of them (`guarded-counter`).
//! It is the command docs/cli.md shows ("Giving a plugin what a host gives").

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;
use std::process::{Command, Output};

use tether_tests::bins;
use tether_tests::output::{stderr, stdout};
use tether_tests::peers::repo_root;

const GUARDED: &str = env!("CARGO_BIN_EXE_guarded-counter");

/// Exit statuses documented in `cli/src/main.rs`.
const EXIT_CALL: i32 = 1;
const EXIT_USAGE: i32 = 2;
const EXIT_START: i32 = 3;

/// What one `tether call` of `guarded-counter` is given, each part droppable.
struct Given {
    env: bool,
    secret: bool,
    header: bool,
    host_proto: bool,
    host_reply: bool,
}

const EVERYTHING: Given = Given {
    env: true,
    secret: true,
    header: true,
    host_proto: true,
    host_reply: true,
};

fn call(dir: &Path, given: &Given, extra: &[&str], method: &str, json: &str) -> Output {
    let counter_proto = repo_root().join("examples/proto/counter.proto");
    let token = dir.join("token");
    std::fs::write(&token, "s3cret").unwrap();
    let mut args: Vec<String> = ["call", "--cmd", GUARDED, "--cookie", "BASIC_PLUGIN=hello"]
        .map(String::from)
        .to_vec();
    let mut add = |flag: &str, value: String| args.extend([flag.to_owned(), value]);
    if given.env {
        add("--env", "GUARDED_COUNTER_ENABLED=true".to_owned());
    }
    if given.secret {
        add("--secret", format!("api-token={}", token.display()));
    }
    if given.header {
        add("-H", "authorization: Bearer s3cret".to_owned());
    }
    if given.host_proto {
        add("--host-proto", counter_proto.display().to_string());
    }
    if given.host_reply {
        add(
            "--host-reply",
            r#"proto.AddHelper/Sum={"r":"10"}"#.to_owned(),
        );
    }
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args.extend([method.to_owned(), json.to_owned()]);
    Command::new(bins::TETHER.path())
        .args(&args)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn call_drives_a_plugin_that_needs_an_env_value_a_secret_metadata_and_a_host_callback() {
    let dir = tempfile::tempdir().unwrap();
    let put = |given: &Given| {
        call(
            dir.path(),
            given,
            &[],
            "proto.Counter/Put",
            r#"{"key":"k","value":"5"}"#,
        )
    };

    let out = put(&EVERYTHING);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "{}\n");
    let calls: Vec<serde_json::Value> = stderr(&out)
        .lines()
        .filter_map(|l| l.strip_prefix("tether: host call "))
        .map(|json| serde_json::from_str(json).unwrap())
        .collect();
    assert_eq!(calls.len(), 1, "{}", stderr(&out));
    assert_eq!(calls[0]["method"], "proto.AddHelper/Sum");
    assert_eq!(calls[0]["request"], serde_json::json!({"a": "5", "b": "5"}));

    // Each thing the host gives, left out, is the plugin's own refusal.
    let without = |f: fn(&mut Given)| {
        let mut given = Given { ..EVERYTHING };
        f(&mut given);
        put(&given)
    };
    let out = without(|g| g.env = false);
    assert_eq!(out.status.code(), Some(EXIT_START), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("set GUARDED_COUNTER_ENABLED=true"),
        "{}",
        stderr(&out)
    );
    let out = without(|g| g.header = false);
    assert_eq!(out.status.code(), Some(EXIT_CALL), "{}", stderr(&out));
    assert!(stderr(&out).contains("Unauthenticated"), "{}", stderr(&out));
    let out = without(|g| g.secret = false);
    assert_eq!(out.status.code(), Some(EXIT_CALL), "{}", stderr(&out));
    assert!(stderr(&out).contains("api-token"), "{}", stderr(&out));
    let out = without(|g| g.host_reply = false);
    assert_eq!(out.status.code(), Some(EXIT_CALL), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("answered 0 for 5+5"),
        "{}",
        stderr(&out)
    );
    let out = without(|g| {
        g.host_proto = false;
        g.host_reply = false;
    });
    assert_eq!(out.status.code(), Some(EXIT_CALL), "{}", stderr(&out));
    assert!(stderr(&out).contains("AddHelper"), "{}", stderr(&out));
}

#[test]
fn call_delivers_a_config_file_named_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let start = dir.path().join("start");
    std::fs::write(&start, "7\n").unwrap();
    let config = format!("start={}", start.display());
    let out = call(
        dir.path(),
        &EVERYTHING,
        &["--config", &config],
        "proto.Counter/Get",
        r#"{"key":"k"}"#,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "{\"value\":\"7\"}\n");
}

#[test]
fn bad_host_flags_are_usage_errors_that_name_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    for (flag, value, expected) in [
        (
            "--secret",
            "api-token",
            "--secret \"api-token\" is not NAME=FILE",
        ),
        ("--env", "NOVALUE", "--env \"NOVALUE\" is not NAME=VALUE"),
        ("-H", "no colon", "-H 'NAME: VALUE'"),
        (
            "--host-reply",
            "proto.AddHelper/Nope={}",
            "which no --host-proto file declares",
        ),
    ] {
        let out = call(
            dir.path(),
            &EVERYTHING,
            &[flag, value],
            "proto.Counter/Get",
            "{}",
        );
        assert_eq!(
            out.status.code(),
            Some(EXIT_USAGE),
            "{flag}: {}",
            stderr(&out)
        );
        assert!(stderr(&out).contains(expected), "{flag}: {}", stderr(&out));
    }
}
