//! Interpreted plugins work confined with no hand-found paths (issue 11 item 10): the exact
//! commands of the issue's "Done when" (`python3` here is whatever is on `PATH` — a pyenv shim
//! on the development machines), a virtualenv, Node.js, and the diagnosis of a denial.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;
use std::process::{Command, Output};

use tether_broker::launch::{Allowance, Interpreter};
use tether_broker::{HandshakeConfig, PluginClient, Runtime, error::StartErrorKind};
use tether_tests::bins;
use tether_tests::peers::repo_root;
use tether_tests::python::python_or_skip;
use tether_tests::typescript::node_or_skip;

const EXIT_START: i32 = 3;

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A working directory holding `sdk-python` (a link to the checkout's), so the issue's
/// relative command lines run as written.
fn work_dir() -> tempfile::TempDir {
    let work = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        repo_root().join("sdk-python"),
        work.path().join("sdk-python"),
    )
    .unwrap();
    work
}

/// Whether `python3` on `PATH` is a pyenv shim (the case the issue reports).
fn python3_is_a_shim() -> bool {
    let out = Command::new("sh")
        .args(["-c", "command -v python3"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("/shims/")
}

fn kv_host(work: &Path, plugin: &str, args: &[&str]) -> Output {
    Command::new(bins::KV_HOST.path())
        .args(args)
        .env("KV_PLUGIN", plugin)
        .current_dir(work)
        .output()
        .unwrap()
}

#[test]
fn kv_host_runs_the_python_kv_plugin_confined_through_python3_as_the_issue_writes_it() {
    let Some(_python) = python_or_skip("kv_host python3") else {
        return;
    };
    eprintln!("python3 is a pyenv shim: {}", python3_is_a_shim());
    let work = work_dir();
    let plugin = "python3 sdk-python/examples/kv_plugin.py";
    let put = kv_host(work.path(), plugin, &["put", "a", "1"]);
    assert!(put.status.success(), "{}", text(&put));
    assert_eq!(std::fs::read(work.path().join("kv_a")).unwrap(), b"1");
    let got = kv_host(work.path(), plugin, &["get", "a"]);
    assert!(got.status.success(), "{}", text(&got));
    assert_eq!(String::from_utf8_lossy(&got.stdout), "1\n");
}

fn tether_call(work: &Path, cmd: &str, extra: &[&str], key: &str) -> Output {
    let proto = repo_root().join("examples/proto/kv.proto");
    let request = format!(r#"{{"key":"{key}","value":"eQ=="}}"#);
    // `--work-dir .`: the KV plugin stores its files there (else in its private directory).
    let mut args = vec![
        "call",
        "--cmd",
        cmd,
        "--cookie",
        "BASIC_PLUGIN=hello",
        "--work-dir",
        ".",
    ];
    args.extend(extra);
    args.extend(["--proto", proto.to_str().unwrap(), "proto.KV/Put", &request]);
    Command::new(bins::TETHER.path())
        .args(&args)
        .current_dir(work)
        .env("RUST_LOG", "tether_broker=debug")
        .output()
        .unwrap()
}

#[test]
fn tether_call_runs_the_python_kv_plugin_confined_through_python3_without_flags() {
    let Some(_python) = python_or_skip("tether call python3") else {
        return;
    };
    let work = work_dir();
    let out = tether_call(
        work.path(),
        "python3 sdk-python/examples/kv_plugin.py",
        &[],
        "x",
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(work.path().join("kv_x")).unwrap(), b"y");
}

#[test]
fn a_virtualenvs_python_runs_confined_inside_its_venv() {
    let Some(_python) = python_or_skip("venv") else {
        return;
    };
    let work = work_dir();
    let venv = work.path().join("venv");
    let made = Command::new("python3")
        .args(["-m", "venv", "--system-site-packages"])
        .arg(&venv)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made));
    let cmd = format!(
        "{}/bin/python sdk-python/examples/kv_plugin.py",
        venv.display()
    );
    let out = tether_call(work.path(), &cmd, &[], "v");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(work.path().join("kv_v")).unwrap(), b"y");
    // It ran the venv's interpreter (so the venv is in force), with the venv allowed.
    let log = text(&out);
    let venv = venv.canonicalize().unwrap();
    let resolved = log
        .lines()
        .find(|l| l.contains("runtime resolved"))
        .unwrap_or_else(|| panic!("no runtime resolved: {log}"));
    assert!(
        resolved.contains(&format!("{}/bin/python ", venv.display())),
        "{resolved}"
    );
}

#[test]
fn a_python_plugin_refused_by_the_sandbox_is_told_which_allowance_to_add_not_the_cookie() {
    let Some(_python) = python_or_skip("denial") else {
        return;
    };
    let work = work_dir();
    let out = tether_call(
        work.path(),
        "python3 sdk-python/examples/kv_plugin.py",
        &["--runtime", "native"],
        "d",
    );
    assert_eq!(out.status.code(), Some(EXIT_START), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("refused something by its sandbox"), "{err}");
    assert!(!err.contains("magic cookie"), "{err}");
    if python3_is_a_shim() {
        assert!(err.contains("--runtime python"), "{err}");
    } else {
        assert!(err.contains("--allow-"), "{err}");
    }
}

#[tokio::test]
async fn the_library_reports_a_denial_as_data_with_the_allowance() {
    let Some(python) = python_or_skip("denial library") else {
        return;
    };
    let err = PluginClient::builder(&python.interpreter)
        .arg(&python.kv_plugin)
        .runtime(Runtime::Native)
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .start()
        .await
        .unwrap_err();
    let StartErrorKind::SandboxDenied { denial, .. } = err.kind() else {
        panic!("expected a sandbox denial, got {err}");
    };
    // The real interpreter, unresolved, cannot read its own standard library.
    assert_eq!(
        denial.allowance,
        Allowance::Runtime(Interpreter::Python),
        "{err}"
    );
}

#[tokio::test]
async fn node_is_resolved_to_its_real_binary_and_runs_confined() {
    let Ok(node) = which("node") else {
        eprintln!("SKIPPED node: no node on PATH");
        return;
    };
    let builder = PluginClient::builder("node").args(["-e", "1"]);
    let resolved = builder.resolve_runtime().await.unwrap().unwrap();
    assert_eq!(resolved.interpreter, Interpreter::Node);
    assert_eq!(resolved.program, node.canonicalize().unwrap());
    assert!(
        resolved
            .read_exec
            .iter()
            .all(|p| p.components().count() >= 2)
    );

    // No Node plugin exists in the tree: a script that says it ran and exits. Confined, it
    // gets as far as its own code (no denial), and the error is an ordinary exit.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hello.js");
    std::fs::write(
        &script,
        "console.error('node ran confined ' + process.version); process.exit(3);\n",
    )
    .unwrap();
    let err = PluginClient::builder("node")
        .arg(&script)
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .start()
        .await
        .unwrap_err();
    assert!(matches!(err.kind(), StartErrorKind::Exited { .. }), "{err}");
    assert!(
        err.output()
            .unwrap()
            .stderr_tail
            .contains("node ran confined"),
        "{err}"
    );
}

#[test]
fn kv_host_runs_the_typescript_kv_plugin_confined_through_node_without_flags() {
    let Some(node) = node_or_skip("kv_host node") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let plugin = format!("node {}", node.example("kv").display());
    let put = kv_host(work.path(), &plugin, &["put", "n", "1"]);
    assert!(put.status.success(), "{}", text(&put));
    let got = kv_host(work.path(), &plugin, &["get", "n"]);
    assert!(got.status.success(), "{}", text(&got));
    assert_eq!(String::from_utf8_lossy(&got.stdout), "1\n");
}

fn which(program: &str) -> Result<std::path::PathBuf, ()> {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .map_err(|_| ())?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if out.status.success() && !path.is_empty() {
        Ok(path.into())
    } else {
        Err(())
    }
}
