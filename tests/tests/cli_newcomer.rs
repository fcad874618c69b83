//! The `tether` command as a newcomer meets it, following the README and the guides (issue
//! 25, item 5): a relative `--catalog` works for every command as its absolute form does, a
//! virtualenv's interpreter given relatively runs, and an interpreted script needs to be
//! readable, not executable, while a program the host executes itself must be executable.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tether_tests::bins;
use tether_tests::output::{stderr, stdout};
use tether_tests::peers::repo_root;
use tether_tests::python::python_or_skip;

/// Exit status for bad input, documented in `cli/src/main.rs`.
const EXIT_INPUT: i32 = 4;

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

fn text(out: &Output) -> String {
    format!("{}{}", stdout(out), stderr(out))
}

fn kv_proto() -> String {
    repo_root()
        .join("examples/proto/kv.proto")
        .to_string_lossy()
        .into_owned()
}

/// Writes the manifest `NAME.toml` of `catalog`: `command`, then `extra` lines, then the
/// handshake `KEY=VALUE`.
fn manifest(catalog: &Path, name: &str, command: &str, extra: &str, cookie: &str) {
    let (key, value) = cookie.split_once('=').unwrap();
    std::fs::write(
        catalog.join(format!("{name}.toml")),
        format!(
            "name = \"{name}\"\ncommand = \"{command}\"\n{extra}\n[handshake]\ncookie_key = \"{key}\"\ncookie_value = \"{value}\"\napp_versions = [1]\n"
        ),
    )
    .unwrap();
}

// Item 1: a relative --catalog.

/// `work/catalog` with the KV plugin (`kv`, which may read `work/data`, granted in
/// `work/grants.toml` relative to that file) and the agent demo's `word-count`, both in the
/// catalog's own `bin/`, and `work/workflow.toml` counting words with `word-count`.
fn catalog_in(work: &Path) {
    let catalog = work.join("catalog");
    std::fs::create_dir_all(catalog.join("bin")).unwrap();
    std::fs::create_dir_all(work.join("data")).unwrap();
    symlink(bins::KV_PLUGIN.path(), catalog.join("bin/kv")).unwrap();
    symlink(bins::AGENT_DEMO.path(), catalog.join("bin/agent-demo")).unwrap();
    manifest(
        &catalog,
        "kv",
        "bin/kv",
        "sandbox_allow_read = [\"../data\"]",
        "BASIC_PLUGIN=hello",
    );
    manifest(
        &catalog,
        "word-count",
        "bin/agent-demo",
        "args = [\"step\", \"word-count\"]",
        "TETHER_AGENT_PLUGIN=executor",
    );
    std::fs::write(
        work.join("grants.toml"),
        "[plugins.kv]\nsandbox_allow_read = [\"data\"]\n",
    )
    .unwrap();
    std::fs::write(
        work.join("workflow.toml"),
        "name = \"count\"\n[[steps]]\nname = \"count-words\"\nplugin = \"word-count\"\nparams = { text = \"one two three\" }\n",
    )
    .unwrap();
}

#[test]
fn every_command_works_with_a_relative_catalog_as_with_its_absolute_form() {
    let work = tempfile::tempdir().unwrap();
    catalog_in(work.path());
    let absolute = work.path().join("catalog");
    let request = r#"{"step":"s","paramsJson":"{\"text\":\"one two\"}"}"#;
    let commands: [&[&str]; 6] = [
        &["list"],
        &["check"],
        &["inspect", "--plugin", "kv"],
        &[
            "call",
            "--plugin",
            "word-count",
            "tether.agent.v1.Executor/Execute",
            request,
        ],
        &["run"],
        &["conformance", "--plugin", "kv"],
    ];
    for command in commands {
        for catalog in ["catalog", absolute.to_str().unwrap()] {
            let mut args = vec![command[0], "--catalog", catalog];
            args.extend(&command[1..]);
            let out = tether(work.path(), &args);
            assert!(
                out.status.success(),
                "tether {}: {}",
                args.join(" "),
                text(&out)
            );
            // What each prints when it got as far as the plugin.
            let expected = match command[0] {
                "list" => "kv",
                "check" => "ok       kv",
                "inspect" => "proto.KV",
                "call" | "run" => "words",
                _ => "handshake line format",
            };
            let said = stdout(&out);
            assert!(said.contains(expected), "{}: {said}", args.join(" "));
        }
    }
}

#[test]
fn conformance_of_a_catalog_program_that_cannot_start_says_to_fix_the_manifests_command() {
    let work = tempfile::tempdir().unwrap();
    let catalog = work.path().join("catalog");
    std::fs::create_dir_all(catalog.join("bin")).unwrap();
    // There, but not executable.
    std::fs::write(catalog.join("bin/kv"), "not a program\n").unwrap();
    manifest(&catalog, "kv", "bin/kv", "", "BASIC_PLUGIN=hello");
    let out = tether(
        work.path(),
        &["conformance", "--catalog", "catalog", "--plugin", "kv"],
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    let manifest_line = format!("{}:2", catalog.join("kv.toml").display());
    for says in ["the command starts", "fix `command` at", &manifest_line] {
        assert!(said.contains(says), "no {says:?} in: {said}");
    }
    assert!(!said.contains("give --cmd"), "{said}");
}

// Item 2: a relative interpreter.

/// A working directory holding `sdk-python` (a link to the checkout's).
fn python_work() -> tempfile::TempDir {
    let work = tempfile::tempdir().unwrap();
    symlink(
        repo_root().join("sdk-python"),
        work.path().join("sdk-python"),
    )
    .unwrap();
    work
}

#[test]
fn a_virtualenvs_interpreter_written_relatively_runs_confined_from_the_users_directory() {
    let Some(python) = python_or_skip("relative venv") else {
        return;
    };
    let work = python_work();
    let made = Command::new(&python.interpreter)
        .args(["-m", "venv", "--system-site-packages", "venv"])
        .current_dir(work.path())
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made));
    let out = Command::new(bins::TETHER.path())
        .args([
            "call",
            "--cmd",
            "venv/bin/python sdk-python/examples/kv_plugin.py",
            "--cookie",
            "BASIC_PLUGIN=hello",
            "--work-dir",
            ".",
            "--proto",
            &kv_proto(),
            "proto.KV/Put",
            r#"{"key":"v","value":"eQ=="}"#,
        ])
        .current_dir(work.path())
        .env("RUST_LOG", "tether_broker=debug")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    assert_eq!(std::fs::read(work.path().join("kv_v")).unwrap(), b"y");
    // The venv's own interpreter ran (so the venv was in force), not the one it links to.
    let venv = work.path().canonicalize().unwrap().join("venv");
    let resolved = log
        .lines()
        .find(|l| l.contains("runtime resolved"))
        .unwrap_or_else(|| panic!("no runtime resolved: {log}"));
    assert!(
        resolved.contains(&format!("{}/bin/python ", venv.display())),
        "{resolved}"
    );
}

// Item 3: what must be executable.

/// A copy of the Python SDK in `work/sdk` (its project: `pyproject.toml`, `src/`,
/// `examples/`) whose KV plugin script is not executable; the catalog `work/catalog` runs it
/// as `kv` (through its `#!` line's interpreter) and as `native-kv` (`runtime = "native"`:
/// the host executes the file itself).
fn non_executable_script_catalog(work: &Path) -> PathBuf {
    let sdk = work.join("sdk");
    std::fs::create_dir_all(&sdk).unwrap();
    for part in ["pyproject.toml", "src", "examples"] {
        let out = Command::new("cp")
            .arg("-r")
            .arg(repo_root().join("sdk-python").join(part))
            .arg(&sdk)
            .output()
            .unwrap();
        assert!(out.status.success(), "cp: {}", text(&out));
    }
    let script = sdk.join("examples/kv_plugin.py");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let catalog = work.join("catalog");
    std::fs::create_dir_all(catalog.join("bin")).unwrap();
    symlink(&script, catalog.join("bin/kv")).unwrap();
    manifest(&catalog, "kv", "bin/kv", "", "BASIC_PLUGIN=hello");
    manifest(
        &catalog,
        "native-kv",
        "bin/kv",
        "runtime = \"native\"",
        "BASIC_PLUGIN=hello",
    );
    catalog
}

#[test]
fn check_accepts_a_readable_script_an_interpreter_runs_and_asks_for_chmod_only_when_executed_itself()
 {
    let Some(_python) = python_or_skip("non-executable script") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let catalog = non_executable_script_catalog(work.path());
    let out = tether(work.path(), &["check", "--catalog", "catalog"]);
    let said = stdout(&out);
    assert_eq!(out.status.code(), Some(EXIT_INPUT), "{}", text(&out));
    assert!(said.contains("ok       kv "), "{said}");
    assert!(said.contains("problem  native-kv "), "{said}");
    let problems: Vec<&str> = said.lines().filter(|l| l.starts_with("problem:")).collect();
    assert_eq!(problems.len(), 1, "{said}");
    let native = catalog.join("native-kv.toml");
    for says in [
        &format!("{}:2: plugin `native-kv`", native.display()),
        "is not executable, and no interpreter runs it",
        &format!("chmod +x {}", catalog.join("bin/kv").display()),
    ] {
        assert!(
            problems[0].contains(says),
            "no {says:?} in: {}",
            problems[0]
        );
    }

    // And it does run, not executable.
    let out = tether(
        work.path(),
        &[
            "call",
            "--catalog",
            "catalog",
            "--plugin",
            "kv",
            "--work-dir",
            ".",
            "--proto",
            &kv_proto(),
            "proto.KV/Put",
            r#"{"key":"n","value":"eQ=="}"#,
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(work.path().join("kv_n")).unwrap(), b"y");
}
