//! The `tether` command's diagnoses (issue 16, items 8, 9 and 11): a refused magic cookie is
//! named by its key and the manifest fields to fix (and no other failure is blamed on it),
//! every unknown key of a manifest or grants file is reported once and located, grants for
//! plugins that are not in the catalog are warnings, a broken manifest is what `call` and
//! `run` report for its plugin, and `--catalog DIR --plugin NAME` selects a catalog plugin.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tether_tests::bins;
use tether_tests::peers::{self, GoPlugin};

/// Exit statuses documented in `cli/src/main.rs`.
const EXIT_START: i32 = 3;

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

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
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
