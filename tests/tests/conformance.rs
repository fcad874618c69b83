//! `tether conformance` through the real binary: every SDK's example plugins and both
//! go-plugin versions' peers conform (checks a peer cannot do are `n/a` with the reason), and
//! each deliberately broken plugin fails the check it should, with its remedy.
//!
//! An SDK's examples are one more entry in [`conforming_plugins`].

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::process::Command;

use tether_tests::bins::{COUNTER_PLUGIN, KV_PLUGIN, TETHER};
use tether_tests::peers::{GoPlugin, go_or_skip};
use tether_tests::python::python_or_skip;
use tether_tests::typescript::node_or_skip;

/// What `tether conformance` printed and its exit status.
struct Run {
    stdout: String,
    code: Option<i32>,
}

fn conformance(cmd: &str, extra: &[&str]) -> Run {
    let out = Command::new(TETHER.path())
        .args([
            "conformance",
            "--cmd",
            cmd,
            "--cookie",
            "BASIC_PLUGIN=hello",
        ])
        .args(extra)
        .output()
        .unwrap();
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        code: out.status.code(),
    }
}

/// The table row of `check`.
fn row<'a>(run: &'a Run, check: &str) -> &'a str {
    run.stdout
        .lines()
        .find(|l| l.starts_with(check))
        .unwrap_or_else(|| panic!("no row {check:?} in:\n{}", run.stdout))
}

/// Checks expected `n/a`, each with a word of its reason.
type NotApplicable = Vec<(&'static str, &'static str)>;

/// The plugins that must conform: (name, command line, checks expected `n/a`).
fn conforming_plugins() -> Vec<(String, String, NotApplicable)> {
    let mut plugins = vec![
        (
            "Rust kv-plugin".to_owned(),
            KV_PLUGIN.path().to_owned(),
            vec![("callback, default mode", "proto.Counter")],
        ),
        (
            "Rust counter-plugin".to_owned(),
            COUNTER_PLUGIN.path().to_owned(),
            vec![],
        ),
    ];
    if let Some(py) = python_or_skip("python_sdk_examples_conform") {
        let python = py.interpreter.to_string_lossy().into_owned();
        for (example, na) in [
            (
                "kv_plugin.py",
                vec![("callback, default mode", "proto.Counter")],
            ),
            ("counter_plugin.py", vec![]),
        ] {
            let script = py.sdk.join("examples").join(example);
            plugins.push((
                format!("Python {example}"),
                shell_words::join([python.as_str(), &script.to_string_lossy()]),
                na,
            ));
        }
    }
    if let Some(node) = node_or_skip("typescript_sdk_examples_conform") {
        for (example, na) in [
            ("kv", vec![("callback, default mode", "proto.Counter")]),
            ("counter", vec![]),
        ] {
            plugins.push((format!("TypeScript {example}"), node.command(example), na));
        }
    }
    for (variant, na) in [
        (GoPlugin::V18, vec![]),
        (
            GoPlugin::V101,
            vec![
                ("callback, default mode", "go-plugin ≤ 1.4.3"),
                ("callback, multiplexed", "declined"),
                ("multiplexed connection", "declined"),
            ],
        ),
    ] {
        if let Some(peers) = go_or_skip(variant, "go_peers_conform") {
            for plugin in [&peers.plugin, &peers.counter_plugin] {
                let mut na = na.clone();
                if plugin == &peers.plugin {
                    na.retain(|(check, _)| !check.starts_with("callback, default"));
                    na.push(("callback, default mode", "proto.Counter"));
                }
                plugins.push((
                    format!("go-plugin {variant:?} {}", plugin.display()),
                    plugin.to_string_lossy().into_owned(),
                    na,
                ));
            }
        }
    }
    plugins
}

#[test]
fn every_sdks_examples_and_both_go_plugin_versions_conform() {
    for (name, cmd, na) in conforming_plugins() {
        let run = conformance(&cmd, &[]);
        assert_eq!(run.code, Some(0), "{name}:\n{}", run.stdout);
        assert!(
            run.stdout.contains("result: conforms"),
            "{name}:\n{}",
            run.stdout
        );
        for check in [
            "wrong cookie refused",
            "handshake line format",
            "pins the host's certificate",
            "Shutdown within the grace",
        ] {
            assert!(
                row(&run, check).contains(" pass "),
                "{name}: {check}:\n{}",
                run.stdout
            );
        }
        // Multiplexing passes wherever it is not expected to be n/a, and so do callbacks in
        // both modes for every counter plugin that multiplexes.
        let na_of = |check: &str| na.iter().any(|(c, _)| *c == check);
        let mut must_pass = Vec::new();
        if !na_of("multiplexed connection") {
            must_pass.push("multiplexed connection");
        }
        if !na_of("callback, default mode") && !na_of("callback, multiplexed") {
            must_pass.extend(["callback, default mode", "callback, multiplexed"]);
        }
        for check in must_pass {
            {
                assert!(
                    row(&run, check).contains(" pass "),
                    "{name}: {check}:\n{}",
                    run.stdout
                );
            }
        }
        for (check, reason) in na {
            let line = row(&run, check);
            assert!(
                line.contains(" n/a ") && line.contains(reason),
                "{name}: {check} should be n/a ({reason}):\n{}",
                run.stdout
            );
        }
    }
}

/// A go-plugin plugin whose only app version is 5 (as a Terraform provider's or a Vault
/// plugin's) conforms without `--app-version`, with no error repeated; and conformance leaves
/// none of its processes running (the host-death check kills the plugin's parent, after which
/// the plugin, which go-plugin does not end with its parent, must still be ended).
#[test]
fn a_go_plugin_speaking_only_app_version_5_conforms_without_flags_and_none_of_its_processes_is_left()
 {
    let Some(peers) = go_or_skip(GoPlugin::V18, "conformance_of_a_version_5_go_plugin") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // A unique path, to find the plugin's processes by their command line.
    let plugin = dir.path().join("kvplugin-speaking-5");
    std::os::unix::fs::symlink(&peers.plugin, &plugin).unwrap();
    let cmd = shell_words::join([plugin.to_str().unwrap(), "--app-version", "5"]);
    let out = Command::new(TETHER.path())
        .args([
            "conformance",
            "--cmd",
            &cmd,
            "--cookie",
            "BASIC_PLUGIN=hello",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("result: conforms"), "{stdout}");
    assert!(stderr.contains("speaks app protocol version 5"), "{stderr}");
    let run = Run {
        stdout: stdout.clone().into_owned(),
        code: out.status.code(),
    };
    assert!(
        row(&run, "version negotiation").contains(" pass "),
        "{stdout}"
    );
    assert!(!stdout.contains("incompatible"), "{stdout}");

    none_left(&plugin);
}

/// Every process started as `plugin` (a unique path) is gone, or ended by a SIGKILL tether
/// sent as it finished: gone within moments.
fn none_left(plugin: &std::path::Path) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for left in tether_tests::procs::with_command_line(plugin.to_str().unwrap()) {
        if let Ok(pidfd) = rustix::process::pidfd_open(
            rustix::process::Pid::from_raw(left.pid.try_into().unwrap()).unwrap(),
            rustix::process::PidfdFlags::empty(),
        ) {
            rt.block_on(tether_tests::procs::exited(
                pidfd,
                std::time::Duration::from_secs(5),
            ));
        }
    }
}

/// Each broken plugin, the check it must fail and a word of the remedy.
#[test]
fn each_broken_plugin_fails_the_check_it_should_with_its_remedy() {
    let bad = env!("CARGO_BIN_EXE_bad-handshake");
    let cases: Vec<(String, &str, &str)> = vec![
        (
            format!("{bad} malformed"),
            "handshake line format",
            "network unix or tcp",
        ),
        (
            format!("{bad} padded-cert"),
            "handshake line format",
            "without padding",
        ),
        (
            format!("{bad} seventh-field"),
            "7th field only when offered",
            "only when PLUGIN_MULTIPLEX_GRPC",
        ),
        (
            format!("{bad} app-version"),
            "version negotiation",
            "highest version offered",
        ),
        (
            env!("CARGO_BIN_EXE_wrong-certificate").to_owned(),
            "AutoMTLS certificate usable",
            "the certificate you announce",
        ),
        (
            env!("CARGO_BIN_EXE_exit-before-handshake").to_owned(),
            "handshake line format",
            "print the handshake line",
        ),
        (
            env!("CARGO_BIN_EXE_stubborn-plugin").to_owned(),
            "Shutdown within the grace",
            "exit by yourself",
        ),
    ];
    for (cmd, check, remedy) in cases {
        let mut extra = vec!["--start-timeout", "3s", "--host-death-timeout", "1s"];
        if cmd.ends_with(" app-version") {
            // It claims version 1 but answers 99 to any offer; without --app-version, its one
            // answer would be taken for its one version, as a go-plugin plugin's is.
            extra.extend(["--app-version", "1"]);
        }
        let run = conformance(&cmd, &extra);
        assert_eq!(run.code, Some(1), "{cmd}:\n{}", run.stdout);
        assert!(
            row(&run, check).contains(" FAIL "),
            "{cmd}: {check}:\n{}",
            run.stdout
        );
        let fix = run
            .stdout
            .lines()
            .skip_while(|l| !l.starts_with(&format!("- {check} (")))
            .nth(1)
            .unwrap_or_default();
        assert!(
            fix.contains("fix:") && fix.contains(remedy),
            "{cmd}: {check}: remedy {remedy:?}:\n{}",
            run.stdout
        );
        assert!(
            run.stdout.contains("result: does not conform"),
            "{cmd}:\n{}",
            run.stdout
        );
    }
}

/// `guarded-counter` (tests/src/bin/guarded-counter.rs) run by conformance with what it needs,
/// as the command docs/cli.md shows (its conformance section); `host_reply` is the sum the
/// host's `AddHelper` stub answers, `call` whether `--call` is given.
fn guarded(dir: &std::path::Path, host_reply: Option<&str>, call: bool) -> Run {
    let token = dir.join("token");
    std::fs::write(&token, "s3cret").unwrap();
    let counter_proto = tether_tests::peers::repo_root().join("examples/proto/counter.proto");
    let mut extra: Vec<String> = vec![
        "--env".into(),
        "GUARDED_COUNTER_ENABLED=true".into(),
        "--secret".into(),
        format!("api-token={}", token.display()),
        "-H".into(),
        "authorization: Bearer s3cret".into(),
        "--host-proto".into(),
        counter_proto.display().to_string(),
    ];
    if let Some(r) = host_reply {
        extra.extend([
            "--host-reply".into(),
            format!(r#"proto.AddHelper/Sum={{"r":"{r}"}}"#),
        ]);
    }
    if call {
        extra.extend(
            [
                "--call",
                "proto.Counter/Put",
                "--data",
                r#"{"key":"k","value":"5"}"#,
            ]
            .map(String::from),
        );
    }
    let plugin = dir.join("guarded-counter-under-conformance");
    if !plugin.exists() {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_guarded-counter"), &plugin).unwrap();
    }
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    conformance(plugin.to_str().unwrap(), &extra)
}

/// The remedy line under `check` in the "to change" list.
fn remedy<'a>(run: &'a Run, check: &str) -> &'a str {
    run.stdout
        .lines()
        .skip_while(|l| !l.starts_with(&format!("- {check} (")))
        .nth(1)
        .unwrap_or_default()
}

/// Given what it needs and a `--call` that calls the host back with the secret, a plugin
/// passes the host-service callback and secrets rows, and none of the launches is left.
#[test]
fn with_a_call_the_callback_and_secrets_rows_pass_and_no_process_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let run = guarded(dir.path(), Some("10"), true);
    // Not the whole table: guarded-counter's Get answers its config, not what Put stored, so
    // go-plugin's counter round trip (§8.2, §8.3) cannot pass for it.
    let callback = row(&run, "host-service callback");
    assert!(
        callback.contains(" pass ") && callback.contains("proto.AddHelper/Sum"),
        "{}",
        run.stdout
    );
    let secrets = row(&run, "secrets from the delivered dir");
    assert!(
        secrets.contains(" pass ") && secrets.contains("failed without"),
        "{}",
        run.stdout
    );
    none_left(&dir.path().join("guarded-counter-under-conformance"));
}

/// A stub answering a wrong sum fails the callback row (the plugin refuses the answer), with
/// the remedy; without `--call` both rows are `n/a`, naming the flags that make them run.
#[test]
fn the_callback_row_fails_on_a_wrong_host_answer_and_is_not_applicable_without_a_call() {
    let dir = tempfile::tempdir().unwrap();
    let run = guarded(dir.path(), Some("3"), true);
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    let callback = row(&run, "host-service callback");
    assert!(
        callback.contains(" FAIL ") && callback.contains("proto.AddHelper/Sum"),
        "{}",
        run.stdout
    );
    assert!(
        remedy(&run, "host-service callback").contains("--host-reply"),
        "{}",
        run.stdout
    );
    // Failing with the secrets delivered is the secrets row's failure too, quoting the plugin.
    assert!(
        row(&run, "secrets from the delivered dir").contains(" FAIL "),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("answered 3 for 5+5"), "{}", run.stdout);

    let run = guarded(dir.path(), Some("10"), false);
    for (check, flag) in [
        ("host-service callback", "--call"),
        ("secrets from the delivered dir", "--secret"),
    ] {
        let line = row(&run, check);
        assert!(
            line.contains(" n/a ") && line.contains(flag),
            "{}",
            run.stdout
        );
    }
    none_left(&dir.path().join("guarded-counter-under-conformance"));
}

/// A call that succeeds without the secret proves nothing about it: a warning, not a pass.
#[test]
fn a_call_that_succeeds_without_the_secret_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let unused = dir.path().join("unused");
    std::fs::write(&unused, "x").unwrap();
    let secret = format!("unused={}", unused.display());
    let run = conformance(
        KV_PLUGIN.path(),
        &[
            "--secret",
            &secret,
            "--call",
            "proto.KV/Put",
            "--data",
            r#"{"key":"a","value":"eQ=="}"#,
        ],
    );
    assert_eq!(run.code, Some(0), "{}", run.stdout);
    let line = row(&run, "secrets from the delivered dir");
    assert!(
        line.contains(" warn ") && line.contains("not proven"),
        "{}",
        run.stdout
    );
    let line = row(&run, "host-service callback");
    assert!(
        line.contains(" n/a ") && line.contains("--host-proto"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_command_that_does_not_exist_is_one_failed_row() {
    let run = conformance("/nonexistent/plugin", &[]);
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    assert!(
        row(&run, "the command starts").contains("FAIL"),
        "{}",
        run.stdout
    );
}
