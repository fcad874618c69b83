//! The `tether` command's diagnoses (issue 16, items 8, 9 and 11): a refused magic cookie is
//! named by its key and the manifest fields to fix (and no other failure is blamed on it),
//! every unknown key of a manifest or grants file is reported once and located, grants for
//! plugins that are not in the catalog are warnings, a broken manifest is what `call` and
//! `run` report for its plugin, and `--catalog DIR --plugin NAME` selects a catalog plugin.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tether_tests::bins;
use tether_tests::output::{stderr, stdout};
use tether_tests::peers::{self, GoPlugin};

/// Exit statuses documented in `cli/src/main.rs`.
const EXIT_START: i32 = 3;
const EXIT_INPUT: i32 = 4;

const EXIT_BEFORE_HANDSHAKE: &str = env!("CARGO_BIN_EXE_exit-before-handshake");
const BAD_HANDSHAKE: &str = env!("CARGO_BIN_EXE_bad-handshake");

fn tether(work: &Path, args: &[&str]) -> Output {
    Command::new(bins::TETHER.path())
        .args(args)
        .current_dir(work)
        .env_remove("RUST_LOG")
        .env_remove("TETHER_CATALOG")
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// A catalog `work/catalog` with plugin `kv` running `program` (linked as `bin/kv`) with the
/// magic cookie `cookie` (`KEY=VALUE`).
fn catalog_with(work: &Path, program: &Path, cookie: &str) -> PathBuf {
    let dir = work.join("catalog");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::os::unix::fs::symlink(program, dir.join("bin/kv")).unwrap();
    let (key, value) = cookie.split_once('=').unwrap();
    std::fs::write(
        dir.join("kv.toml"),
        format!(
            "name = \"kv\"\ncommand = \"bin/kv\"\n[handshake]\ncookie_key = \"{key}\"\ncookie_value = \"{value}\"\napp_versions = [1]\n"
        ),
    )
    .unwrap();
    dir
}

// Item 8: a refused cookie, and only a refused cookie, is blamed on the cookie.

#[test]
fn a_go_plugin_refusing_the_cookie_is_told_by_the_key_sent_and_the_manifest_fields_to_fix() {
    let Some(go) = peers::go_or_skip(GoPlugin::V18, "cookie_refused") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    // The Go KV plugin expects BASIC_PLUGIN=hello: a wrong value, then a wrong key.
    for cookie in ["BASIC_PLUGIN=not-hello-value", "KV_COOKIE=hello"] {
        let key = cookie.split_once('=').unwrap().0;
        let value = cookie.split_once('=').unwrap().1;
        let _ = std::fs::remove_dir_all(work.path().join("catalog"));
        let catalog = catalog_with(work.path(), &go.plugin, cookie);
        let manifest = catalog.join("kv.toml");
        let from_catalog = tether(
            work.path(),
            &["inspect", "--catalog", catalog.to_str().unwrap(), "kv"],
        );
        let text = stderr(&from_catalog);
        assert_eq!(from_catalog.status.code(), Some(EXIT_START), "{text}");
        for says in [
            "refused the host's magic cookie",
            &format!("`{key}`"),
            "cookie_key",
            "cookie_value",
            &manifest.display().to_string(),
        ] {
            assert!(text.contains(says), "{cookie}: no {says:?} in: {text}");
        }
        assert!(
            !text.contains(value),
            "{cookie}: the value is echoed: {text}"
        );

        let from_cmd = tether(
            work.path(),
            &[
                "inspect",
                "--cmd",
                go.plugin.to_str().unwrap(),
                "--cookie",
                cookie,
            ],
        );
        let text = stderr(&from_cmd);
        assert_eq!(from_cmd.status.code(), Some(EXIT_START), "{text}");
        for says in [
            "refused the host's magic cookie",
            &format!("`{key}`"),
            "--cookie",
        ] {
            assert!(text.contains(says), "{cookie}: no {says:?} in: {text}");
        }
        assert!(
            !text.contains(value),
            "{cookie}: the value is echoed: {text}"
        );
    }
}

#[test]
fn a_plugin_that_panics_exits_1_or_prints_garbage_before_its_handshake_gets_no_cookie_hint() {
    let work = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str], &str); 4] = [
        (EXIT_BEFORE_HANDSHAKE, &["panic"], "exit status: 101"),
        (EXIT_BEFORE_HANDSHAKE, &["exit-1"], "exit status: 1)"),
        (EXIT_BEFORE_HANDSHAKE, &[], "exit status: 3"),
        (BAD_HANDSHAKE, &["malformed"], "malformed handshake line"),
    ];
    for (program, args, says) in cases {
        let mut cmd = program.to_owned();
        for arg in args {
            cmd.push(' ');
            cmd.push_str(arg);
        }
        let out = tether(
            work.path(),
            &["inspect", "--cmd", &cmd, "--cookie", "BASIC_PLUGIN=hello"],
        );
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(EXIT_START), "{cmd}: {text}");
        assert!(text.contains(says), "{cmd}: no {says:?} in: {text}");
        assert!(
            !text.to_lowercase().contains("cookie"),
            "{cmd}: a cookie hint for a failure that is not the cookie's: {text}"
        );
    }
    // Through a catalog too, where the manifest's fields would be named.
    let catalog = catalog_with(
        work.path(),
        Path::new(EXIT_BEFORE_HANDSHAKE),
        "BASIC_PLUGIN=hello",
    );
    let out = tether(
        work.path(),
        &["inspect", "--catalog", catalog.to_str().unwrap(), "kv"],
    );
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(EXIT_START), "{text}");
    assert!(!text.to_lowercase().contains("cookie"), "{text}");
}

// Item 9: manifests and grants.

/// A catalog `work/catalog` with a good plugin `ok` (tether's KV plugin) and `kv.toml`, whose
/// three unknown keys are on lines 3, 7 and 9; a workflow `wf.toml` whose one step uses
/// `step_plugin`.
fn catalog_with_a_broken_manifest(work: &Path, step_plugin: &str) -> PathBuf {
    let dir = work.join("catalog");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::os::unix::fs::symlink(bins::KV_PLUGIN.path(), dir.join("bin/ok")).unwrap();
    std::fs::write(
        dir.join("ok.toml"),
        "name = \"ok\"\ncommand = \"bin/ok\"\n[handshake]\ncookie_key = \"BASIC_PLUGIN\"\ncookie_value = \"hello\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("kv.toml"),
        "name = \"kv\"\ncommand = \"bin/kv\"\ncolour = \"red\"\n[handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\nflavour = 1\n[limits]\nmemroy_mib = 3\n",
    )
    .unwrap();
    std::fs::write(
        work.join("wf.toml"),
        format!("name = \"w\"\n[[steps]]\nname = \"s\"\nplugin = \"{step_plugin}\"\n"),
    )
    .unwrap();
    dir
}

const UNKNOWN_KEYS: [&str; 3] = [
    "kv.toml:3:1: key `colour`: unknown key",
    "kv.toml:7:1: key `handshake.flavour`: unknown key",
    "kv.toml:9:1: key `limits.memroy_mib`: unknown key",
];

#[test]
fn check_and_list_report_every_unknown_key_of_a_manifest_once_with_its_line() {
    let work = tempfile::tempdir().unwrap();
    let catalog = catalog_with_a_broken_manifest(work.path(), "ok");
    let catalog = catalog.to_str().unwrap();
    let runs: [&[&str]; 3] = [
        &["check", "--catalog", catalog],
        &["list", "--catalog", catalog],
        &["run", "--catalog", catalog, "wf.toml"],
    ];
    for args in runs {
        let out = tether(work.path(), args);
        let text = format!("{}{}", stdout(&out), stderr(&out));
        if args[0] != "run" {
            assert_eq!(out.status.code(), Some(EXIT_INPUT), "{args:?}: {text}");
        }
        for key in UNKNOWN_KEYS {
            assert_eq!(
                text.matches(key).count(),
                1,
                "{args:?}: {key:?} not printed exactly once: {text}"
            );
        }
        assert!(text.contains("fix the manifest"), "{args:?}: {text}");
    }
}

#[test]
fn every_unknown_key_of_the_grants_file_is_reported_at_its_line_asking_to_fix_the_grants_file() {
    let work = tempfile::tempdir().unwrap();
    let catalog = catalog_with_a_broken_manifest(work.path(), "ok");
    let grants = work.path().join("grants.toml");
    std::fs::write(
        &grants,
        "[plugins.ok]\nsecret = [\"x\"]\nnetwork = \"host\"\nnetwrok = \"host\"\n",
    )
    .unwrap();
    let out = tether(
        work.path(),
        &["check", "--catalog", catalog.to_str().unwrap()],
    );
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(EXIT_INPUT), "{text}");
    let grants = grants.display();
    for (line, key) in [(2, "plugins.ok.secret"), (4, "plugins.ok.netwrok")] {
        let says = format!("{grants}:{line}:1: key `{key}`: unknown key");
        assert!(text.contains(&says), "no {says:?} in: {text}");
    }
    assert_eq!(text.matches("; fix the grants file").count(), 2, "{text}");
}

#[test]
fn a_grant_for_a_plugin_that_is_not_in_the_catalog_is_a_check_warning_not_a_problem() {
    let work = tempfile::tempdir().unwrap();
    let catalog = catalog_with_a_broken_manifest(work.path(), "ok");
    std::fs::remove_file(catalog.join("kv.toml")).unwrap();
    let grants = work.path().join("grants.toml");
    std::fs::write(
        &grants,
        "[plugins.ok]\nenv_allow = []\n\n[plugins.ghost]\nsecrets = [\"db\"]\n",
    )
    .unwrap();
    let out = tether(
        work.path(),
        &["check", "--catalog", catalog.to_str().unwrap()],
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    let says = format!(
        "warning: {}:4:10: grants for plugin `ghost`",
        grants.display()
    );
    assert!(text.contains(&says), "no {says:?} in: {text}");
    assert!(text.contains("not in the catalog"), "{text}");
    assert!(!text.contains("`ok`, which is not"), "{text}");
    assert!(text.contains("no problems, 1 warning"), "{text}");
}

#[test]
fn a_grant_for_a_plugin_whose_manifest_is_broken_is_no_warning() {
    let work = tempfile::tempdir().unwrap();
    let catalog = catalog_with_a_broken_manifest(work.path(), "ok");
    std::fs::write(
        work.path().join("grants.toml"),
        "[plugins.kv]\nsecrets = [\"db\"]\n",
    )
    .unwrap();
    let out = tether(
        work.path(),
        &["check", "--catalog", catalog.to_str().unwrap()],
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(EXIT_INPUT), "{text}");
    assert!(!text.contains("warning:"), "{text}");
}

#[test]
fn call_and_run_of_a_plugin_whose_manifest_is_broken_show_that_manifests_errors() {
    let work = tempfile::tempdir().unwrap();
    let catalog = catalog_with_a_broken_manifest(work.path(), "kv");
    let catalog = catalog.to_str().unwrap();
    let runs: [&[&str]; 2] = [
        &["call", "--catalog", catalog, "kv", "proto.KV/Get", "{}"],
        &["run", "--catalog", catalog, "wf.toml"],
    ];
    for args in runs {
        let out = tether(work.path(), args);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(EXIT_INPUT), "{args:?}: {text}");
        assert!(
            text.contains("plugin `kv` cannot be used: its manifest"),
            "{args:?}: {text}"
        );
        for key in UNKNOWN_KEYS {
            assert!(text.contains(key), "{args:?}: no {key:?} in: {text}");
        }
        assert!(!text.contains("not in the catalog"), "{args:?}: {text}");
    }
}

// Item 11: `--catalog DIR --plugin NAME`.

#[test]
fn catalog_and_plugin_are_two_flags_and_the_old_two_value_form_still_works() {
    let work = tempfile::tempdir().unwrap();
    let catalog = catalog_with_a_broken_manifest(work.path(), "ok");
    std::fs::remove_file(catalog.join("kv.toml")).unwrap();
    let catalog = catalog.to_str().unwrap();
    let put = ["proto.KV/Put", r#"{"key":"x","value":"eQ=="}"#];
    let runs: [Vec<&str>; 4] = [
        [&["call", "--catalog", catalog, "--plugin", "ok"][..], &put].concat(),
        [&["call", "--plugin", "ok", "--catalog", catalog][..], &put].concat(),
        [&["call", "--catalog", catalog, "ok"][..], &put].concat(),
        vec!["inspect", "--catalog", catalog, "--plugin", "ok"],
    ];
    for args in runs {
        let out = tether(work.path(), &args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        if args[0] == "call" {
            assert_eq!(stdout(&out).trim(), "{}", "{args:?}");
        } else {
            assert!(
                stdout(&out).contains("health: Serving"),
                "{args:?}: {}",
                stdout(&out)
            );
        }
    }
    let help = stdout(&tether(work.path(), &["call", "--help"]));
    assert!(help.contains("--plugin <NAME>"), "{help}");
}

#[test]
fn a_catalog_without_a_plugin_or_with_two_is_a_usage_error() {
    let work = tempfile::tempdir().unwrap();
    let catalog = catalog_with_a_broken_manifest(work.path(), "ok");
    let catalog = catalog.to_str().unwrap();
    let out = tether(work.path(), &["inspect", "--catalog", catalog]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("--catalog DIR --plugin NAME"), "{text}");
    // With --plugin, --catalog takes one value: a second one is an argument too many.
    let out = tether(
        work.path(),
        &["inspect", "--catalog", catalog, "ok", "--plugin", "ok"],
    );
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("unexpected argument 'ok'"), "{text}");
}

#[test]
fn a_malformed_cookie_command_or_method_argument_is_a_usage_error_with_status_2() {
    let work = tempfile::tempdir().unwrap();
    let kv = bins::KV_PLUGIN.path();
    for (args, says) in [
        (
            vec!["inspect", "--cmd", kv, "--cookie", "no-equals-sign"],
            "is not of the form KEY=VALUE",
        ),
        (
            vec![
                "inspect",
                "--cmd",
                "'unclosed",
                "--cookie",
                "BASIC_PLUGIN=hello",
            ],
            "is not a command line",
        ),
        (
            vec![
                "call",
                "--cmd",
                kv,
                "--cookie",
                "BASIC_PLUGIN=hello",
                "no-slash",
                "{}",
            ],
            "is not of the form SERVICE/METHOD",
        ),
    ] {
        let out = tether(work.path(), &args);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(says), "{args:?}: {text}");
    }
}

// Issue 22 item 6: the CLI's text blames the sandbox only where it plausibly failed the plugin.

#[test]
fn call_tells_a_missing_module_and_a_refused_connection_apart_from_a_sandbox_denial() {
    const PYTHON: &str = "/usr/bin/python3";
    if !Path::new(PYTHON).is_file() {
        eprintln!("SKIPPED: no {PYTHON}");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let missing = work.path().join("missing.py");
    std::fs::write(&missing, "import tether_cli_module_installed_nowhere\n").unwrap();
    let connect = work.path().join("connect.py");
    std::fs::write(
        &connect,
        format!("import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)\n"),
    )
    .unwrap();
    let cases = [
        (
            &missing,
            "-m pip install tether_cli_module_installed_nowhere",
        ),
        (&connect, "--network host"),
    ];
    for (script, says) in cases {
        let cmd = format!("{PYTHON} {}", script.display());
        let out = tether(
            work.path(),
            &["inspect", "--cmd", &cmd, "--cookie", "BASIC_PLUGIN=hello"],
        );
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(EXIT_START), "{cmd}: {text}");
        assert!(text.contains(says), "{cmd}: no {says:?} in: {text}");
        for loosening in ["--allow-read", "--allow-exec", "sandbox_allow", "cookie"] {
            assert!(
                !text.contains(loosening),
                "{cmd}: advises {loosening}: {text}"
            );
        }
    }
    drop(listener);
}
