//! The `tether` binary as an installed tool: it knows no source tree, finds its catalog from
//! `--catalog`, `$TETHER_CATALOG` or `./catalog`, and says which it used. (The behaviour tests
//! against the demo catalog are in `tether-tests`; this also makes `cargo test` build
//! `tether` for them.)

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;
use std::process::{Command, Output};

/// Exit status for bad input, documented in `src/main.rs`.
const EXIT_INPUT: i32 = 4;

/// `tether ARGS` in `cwd`, with `TETHER_CATALOG` as given (`cargo test` itself sets it for this
/// checkout through `.cargo/config.toml`).
fn tether(cwd: &Path, catalog_env: Option<&Path>, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tether"));
    command
        .args(args)
        .current_dir(cwd)
        .env_remove("TETHER_CATALOG");
    if let Some(dir) = catalog_env {
        command.env("TETHER_CATALOG", dir);
    }
    command.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A catalog of one manifest in `root/NAME`.
fn catalog(root: &Path, name: &str) -> std::path::PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("p.toml"),
        "name = \"p\"\ncommand = \"bin/p\"\n[handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\n",
    )
    .unwrap();
    dir
}

#[test]
fn help_succeeds_and_names_the_catalog_defaults_but_not_the_source_tree() {
    let work = tempfile::tempdir().unwrap();
    let out = tether(work.path(), None, &["--help"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let help = text(&out.stdout);
    assert!(help.contains("Usage: tether"), "{help}");
    let list_help = text(&tether(work.path(), None, &["list", "--help"]).stdout);
    assert!(list_help.contains("$TETHER_CATALOG"), "{list_help}");
    assert!(
        !list_help.contains(env!("CARGO_MANIFEST_DIR")),
        "{list_help}"
    );
}

#[test]
fn list_without_any_catalog_says_what_it_looked_for() {
    let work = tempfile::tempdir().unwrap();
    let out = tether(work.path(), None, &["list"]);
    assert_eq!(out.status.code(), Some(EXIT_INPUT), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    for looked_for in ["--catalog", "TETHER_CATALOG", "./catalog"] {
        assert!(err.contains(looked_for), "{err}");
    }
}

#[test]
fn the_flag_wins_over_the_environment_which_wins_over_the_current_directory() {
    let work = tempfile::tempdir().unwrap();
    let here = catalog(work.path(), "catalog");
    let env = catalog(work.path(), "from-env");
    let flag = catalog(work.path(), "from-flag");
    let header = |out: &Output| text(&out.stdout).lines().next().unwrap_or("").to_owned();

    let out = tether(
        work.path(),
        Some(&env),
        &["list", "--catalog", flag.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        header(&out),
        format!("catalog {} (from --catalog)", flag.display())
    );

    let out = tether(work.path(), Some(&env), &["list"]);
    assert_eq!(
        header(&out),
        format!("catalog {} (from $TETHER_CATALOG)", env.display())
    );

    let out = tether(work.path(), None, &["check"]);
    assert!(
        header(&out).starts_with(&format!("catalog {} (from ./catalog", here.display())),
        "{}",
        header(&out)
    );
}
