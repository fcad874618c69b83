//! Text a plugin controls reaches the operator's terminal escaped (issue 22, hole 7): a real
//! hostile plugin puts window-title, clipboard, clear-screen, C1, bidi, overwrite and
//! forged-line sequences into everything it can (stray stdout before the handshake, stderr
//! lines plain and hclog, GRPCStdio lines, gRPC errors, its stderr when it crashes, its
//! reflection names, the strings of its answers), and the tests read what a real
//! pseudo-terminal received from `tether` and from a host built on the library.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::process::Command;
use std::time::Duration;

use tether_tests::bins;
use tether_tests::host_user::root_and_unprivileged;
use tether_tests::hostile_text::{shown, unsafe_output};
use tether_tests::terminal::run_on_a_terminal;

const HOSTILE: &str = env!("CARGO_BIN_EXE_hostile-plugin");
const TEXT_HOST: &str = env!("CARGO_BIN_EXE_text-host");
/// How long one command may keep its terminal open.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `tether ARGS` on a terminal; returns its exit code and what the terminal showed.
fn tether_on_a_terminal(args: &[&str]) -> (Option<i32>, String) {
    let work = tempfile::tempdir().unwrap();
    let mut command = Command::new(bins::TETHER.path());
    command
        .args(args)
        .current_dir(work.path())
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG");
    let (status, screen) = run_on_a_terminal(command, COMMAND_TIMEOUT);
    let problems = unsafe_output(&screen);
    let screen = String::from_utf8_lossy(&screen).into_owned();
    assert!(
        problems.is_empty(),
        "tether {args:?} let the plugin's text reach the terminal raw:\n{}\n--- the terminal showed:\n{}",
        problems.join("\n"),
        screen.escape_debug()
    );
    (status.code(), screen)
}

#[track_caller]
fn assert_shown(screen: &str, markers: &[&str]) {
    for marker in markers {
        assert!(
            screen.contains(&shown(marker)),
            "the {marker} text is not shown escaped:\n{screen}"
        );
    }
}

#[test]
fn text_from_a_plugin_reaches_the_operators_terminal_escaped_in_every_tether_command() {
    let _both = root_and_unprivileged(
        "text_from_a_plugin_reaches_the_operators_terminal_escaped_in_every_tether_command",
    );
    let launch = ["--cmd", HOSTILE, "--cookie", "BASIC_PLUGIN=hello"];
    let call = |method: &str, request: &str| {
        let mut args = vec!["-v", "call"];
        args.extend(launch);
        args.extend([method, request]);
        tether_on_a_terminal(&args)
    };

    // Stray stdout before the handshake, stderr lines, GRPCStdio lines, the gRPC error.
    let (code, screen) = call("proto.KV/Get", r#"{"key":"x"}"#);
    assert_eq!(code, Some(1), "{screen}");
    assert_shown(
        &screen,
        &[
            "stray-stdout",
            "stderr-plain",
            "stderr-warn",
            "hclog-message",
            "hclog-module",
            "hclog-key",
            "hclog-value",
            "grpc-stdio-stderr",
            "grpc-stdio-stdout",
            "grpc-error",
        ],
    );

    // The stderr tail of a plugin that exits during the call.
    let (code, screen) = call("proto.KV/Put", r#"{"key":"crash"}"#);
    assert_eq!(code, Some(3), "{screen}");
    assert_shown(&screen, &["crash-stderr"]);

    // What a plugin printed before it exited without a handshake.
    let early = format!("{HOSTILE} exit-early");
    let (code, screen) = tether_on_a_terminal(&[
        "-v",
        "call",
        "--cmd",
        &early,
        "--cookie",
        "BASIC_PLUGIN=hello",
        "proto.KV/Get",
        "{}",
    ]);
    assert_eq!(code, Some(3), "{screen}");
    assert_shown(&screen, &["stray-stdout", "stderr-plain"]);

    // The names its server reflection lists.
    let mut inspect = vec!["inspect"];
    inspect.extend(launch);
    let (code, screen) = tether_on_a_terminal(&inspect);
    assert_eq!(code, Some(0), "{screen}");
    assert_shown(&screen, &["reflection-name"]);

    // Strings in its answer, printed as JSON: valid JSON, every control escaped.
    let (code, screen) = call("tether.agent.v1.Executor/Execute", "{}");
    assert_eq!(code, Some(0), "{screen}");
    let json = screen
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line in:\n{screen}"));
    let answer: serde_json::Value = serde_json::from_str(json.trim_end()).unwrap();
    assert_eq!(
        answer["message"].as_str().unwrap(),
        tether_tests::hostile_text::hostile("step-message")
    );
    for marker in ["step-message", "json-output"] {
        let json_shown = format!("<{marker}>\\u001b]0;tether-owned-title\\u0007");
        assert!(screen.contains(&json_shown), "{marker}:\n{screen}");
    }
}

#[test]
fn text_from_a_plugin_reaches_the_terminal_of_a_host_built_on_the_library_escaped() {
    let _both = root_and_unprivileged(
        "text_from_a_plugin_reaches_the_terminal_of_a_host_built_on_the_library_escaped",
    );
    let mut command = Command::new(TEXT_HOST);
    command.arg(HOSTILE).env_remove("NO_COLOR");
    let (status, screen) = run_on_a_terminal(command, COMMAND_TIMEOUT);
    let problems = unsafe_output(&screen);
    let screen = String::from_utf8_lossy(&screen).into_owned();
    assert!(status.success(), "text-host ended with {status}:\n{screen}");
    assert!(
        problems.is_empty(),
        "the library let the plugin's text reach the terminal raw:\n{}\n--- the terminal showed:\n{}",
        problems.join("\n"),
        screen.escape_debug()
    );
    assert_shown(
        &screen,
        &[
            "stray-stdout",
            "stderr-plain",
            "stderr-warn",
            "hclog-message",
            "hclog-value",
            "grpc-stdio-stderr",
            "grpc-stdio-stdout",
        ],
    );
}
