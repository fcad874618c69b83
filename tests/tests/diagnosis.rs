//! Issue 22 item 6, diagnosis that does not push users to loosen: a confined plugin's failure
//! before its handshake is blamed on the sandbox only when the sandbox plausibly caused it.
//! Real Python plugins (Debian's `/usr/bin/python3`, which a non-root host can run) fail the
//! way plugins do, for a root host and a non-root host (`tether_tests::host_user`):
//! - a module installed nowhere is "not installed" with `pip install` for that interpreter,
//!   never "allow a directory"; a module that exists only in a directory the sandbox refused
//!   names that directory (the one the plugin's `sys.path.insert` added, read, not run);
//! - a refused TCP `bind`/`connect` under `network = "none"` names the network setting, never
//!   `--allow-read`; under `network = "host"` a refused connection is not the sandbox's;
//! - a file that does not exist on the host either is not blamed on the sandbox.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use tether_broker::confine::{NamespacesMode, NetworkMechanism, NetworkMode};
use tether_broker::launch::Allowance;
use tether_broker::{HandshakeConfig, PluginClient, StartError, error::StartErrorKind};
use tether_tests::host_user::root_and_unprivileged;

/// Debian's interpreter: readable and executable by the unprivileged run too (pyenv's lives
/// under root's 0700 home).
const PYTHON: &str = "/usr/bin/python3";

/// What advises loosening the sandbox's file rules.
const FILE_LOOSENING: &[&str] = &["--allow-read", "--allow-exec", "sandbox_allow", "--runtime"];

/// A directory every user can read, holding the plugin's script in `plugin/` (its project)
/// and what it imports from elsewhere.
struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { dir }
    }

    /// Writes `text` at `relative` (directories made, every one readable by all).
    fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(relative);
        let mut dir = path.parent().unwrap().to_owned();
        std::fs::create_dir_all(&dir).unwrap();
        while dir != self.dir.path() {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            dir = dir.parent().unwrap().to_owned();
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }
}

/// Starts `script` under Python, confined as `configure` says; the start must fail.
async fn start_fails(
    script: &Path,
    configure: impl FnOnce(
        tether_broker::PluginClientBuilder<tether_broker::launch::NoHandshake>,
    )
        -> tether_broker::PluginClientBuilder<tether_broker::launch::NoHandshake>,
) -> StartError {
    let builder = configure(PluginClient::builder(PYTHON).arg(script));
    match builder
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .start()
        .await
    {
        Ok(_) => panic!("{} started", script.display()),
        Err(e) => e,
    }
}

fn python_or_skip(test: &str) -> bool {
    let usable = Path::new(PYTHON).is_file();
    if !usable {
        eprintln!("SKIPPED {test}: no {PYTHON}");
    }
    usable
}

fn assert_no_file_loosening(err: &StartError) {
    let text = err.to_string();
    for loosening in FILE_LOOSENING {
        assert!(
            !text.contains(loosening),
            "advises {loosening} where the sandbox's files were not the cause: {text}"
        );
    }
}

#[tokio::test]
async fn a_module_installed_nowhere_is_not_installed_and_the_advice_is_pip_for_that_interpreter() {
    let test =
        "a_module_installed_nowhere_is_not_installed_and_the_advice_is_pip_for_that_interpreter";
    if !python_or_skip(test) {
        return;
    }
    let run = root_and_unprivileged(test);
    let site = Site::new();
    let script = site.write(
        "plugin/plugin.py",
        "import sys\nsys.path.insert(0, '/opt/tether-nowhere')\nimport tether_module_installed_nowhere\n",
    );
    let err = start_fails(&script, |b| b).await;
    let StartErrorKind::NotInstalled { missing, .. } = err.kind() else {
        panic!("{:?}: expected NotInstalled, got {err}", run.host);
    };
    assert_eq!(missing.module, "tether_module_installed_nowhere");
    // The interpreter that ran it (its `sys.executable`).
    assert_eq!(
        missing.program.canonicalize().unwrap(),
        Path::new(PYTHON).canonicalize().unwrap(),
        "{err}"
    );
    let text = err.to_string();
    let pip = format!(
        "`{} -m pip install tether_module_installed_nowhere`",
        missing.program.display()
    );
    assert!(text.contains(&pip), "{:?}: no {pip} in: {text}", run.host);
    assert!(text.contains("not installed"), "{text}");
    assert_no_file_loosening(&err);
    assert!(!text.contains("refused something by its sandbox"), "{text}");
}

#[tokio::test]
async fn a_module_only_in_a_directory_the_sandbox_refused_names_that_directory() {
    let test = "a_module_only_in_a_directory_the_sandbox_refused_names_that_directory";
    if !python_or_skip(test) {
        return;
    }
    let run = root_and_unprivileged(test);
    let site = Site::new();
    site.write("elsewhere/lib/tether_denied_module.py", "X = 1\n");
    site.write("vendor/tether_vendored_module.py", "X = 1\n");
    let lib = site.path("elsewhere/lib");
    // Outside the sandbox the script imports both (the control).
    for (module, adds) in [
        ("tether_denied_module", format!("sys.path.insert(0, {:?})", lib.to_str().unwrap())),
        (
            "tether_vendored_module",
            "sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'vendor'))".to_owned(),
        ),
    ] {
        let script = site.write(
            &format!("plugin/{module}_plugin.py"),
            &format!("import os, sys\n{adds}\nimport {module}\nsys.exit(7)\n"),
        );
        let control = std::process::Command::new(PYTHON).arg(&script).status().unwrap();
        assert_eq!(control.code(), Some(7), "{module}: the control does not import it");

        let err = start_fails(&script, |b| b).await;
        let StartErrorKind::SandboxDenied { denial, .. } = err.kind() else {
            panic!("{:?}: {module}: expected SandboxDenied, got {err}", run.host);
        };
        let expected = match module {
            "tether_denied_module" => lib.clone(),
            _ => site.path("vendor"),
        };
        assert_eq!(
            denial.allowance,
            Allowance::Read(expected.clone()),
            "{:?}: {err}",
            run.host
        );
        let text = err.to_string();
        let flag = format!("--allow-read {}", expected.display());
        assert!(text.contains(&flag), "no {flag} in: {text}");
        assert!(!text.contains("pip install"), "{text}");
    }
}

/// A listener on the host's loopback, as a database a plugin connects to at start-up.
fn host_service() -> (std::net::TcpListener, u16) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

const CONNECT_SCRIPT: &str = "import socket, sys\n\
s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)\n\
print('connected', file=sys.stderr)\nsys.exit(5)\n";

#[tokio::test]
async fn a_refused_connect_under_network_none_names_the_network_setting_and_not_under_host() {
    let test = "a_refused_connect_under_network_none_names_the_network_setting_and_not_under_host";
    if !python_or_skip(test) {
        return;
    }
    let run = root_and_unprivileged(test);
    let site = Site::new();
    let script = site.write("plugin/connect.py", CONNECT_SCRIPT);
    let (listener, port) = host_service();
    let port_arg = port.to_string();

    for namespaces in [NamespacesMode::Preferred, NamespacesMode::Off] {
        let err = start_fails(&script, |b| b.arg(&port_arg).namespaces(namespaces)).await;
        let StartErrorKind::NetworkDenied { refusal, .. } = err.kind() else {
            panic!(
                "{:?}, {namespaces:?}: expected NetworkDenied, got {err}",
                run.host
            );
        };
        eprintln!("{:?}, {namespaces:?}: {err}", run.host);
        let text = err.to_string();
        for says in [
            "network is `none`",
            "`network = \"host\"`",
            "--network host",
        ] {
            assert!(
                text.contains(says),
                "{namespaces:?}: no {says:?} in: {text}"
            );
        }
        assert_no_file_loosening(&err);
        if namespaces == NamespacesMode::Off {
            assert!(!refusal.own_loopback, "{err}");
        } else if tether_broker::confine::worlds_available().is_ok() {
            assert_eq!(refusal.mechanism, NetworkMechanism::Namespace, "{err}");
            assert!(refusal.own_loopback, "{err}");
        }
    }

    // The control: with the host's network it connects (and exits 5 on purpose).
    let err = start_fails(&script, |b| b.arg(&port_arg).network(NetworkMode::Host)).await;
    assert!(
        matches!(err.kind(), StartErrorKind::Exited { .. }),
        "{:?}: {err}",
        run.host
    );
    assert!(
        err.output().unwrap().stderr_tail.contains("connected"),
        "{err}"
    );
    drop(listener);

    // Under the host's network a refused connection is the service's, not the sandbox's.
    let err = start_fails(&script, |b| b.arg(&port_arg).network(NetworkMode::Host)).await;
    assert!(
        matches!(err.kind(), StartErrorKind::Exited { .. }),
        "{:?}: a refused connection under network host is blamed: {err}",
        run.host
    );
    assert!(!err.to_string().contains("sandbox"), "{err}");
}

#[tokio::test]
async fn a_plugin_binding_tcp_without_a_world_is_told_the_network_setting_and_in_a_world_binds() {
    let test =
        "a_plugin_binding_tcp_without_a_world_is_told_the_network_setting_and_in_a_world_binds";
    if !python_or_skip(test) {
        return;
    }
    let run = root_and_unprivileged(test);
    let site = Site::new();
    // go-plugin's Python example binds 127.0.0.1:1234; any port will do here.
    let script = site.write(
        "plugin/bind.py",
        "import socket, sys\ns = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\ns.bind(('127.0.0.1', 0))\ns.listen()\nprint('bound', file=sys.stderr)\nsys.exit(5)\n",
    );
    let err = start_fails(&script, |b| b.namespaces(NamespacesMode::Off)).await;
    let StartErrorKind::NetworkDenied { refusal, .. } = err.kind() else {
        panic!("{:?}: expected NetworkDenied, got {err}", run.host);
    };
    eprintln!("{:?}: {err}", run.host);
    assert!(!refusal.own_loopback);
    assert!(err.to_string().contains("--network host"), "{err}");
    assert_no_file_loosening(&err);

    if tether_broker::confine::worlds_available().is_ok() {
        // In a world the plugin's loopback is its own: it binds (and exits 5 on purpose).
        let err = start_fails(&script, |b| b).await;
        assert!(
            matches!(err.kind(), StartErrorKind::Exited { .. }),
            "{:?}: {err}",
            run.host
        );
        assert!(err.output().unwrap().stderr_tail.contains("bound"), "{err}");
    }
}

#[tokio::test]
async fn a_file_missing_on_the_host_too_is_not_blamed_on_the_sandbox() {
    let test = "a_file_missing_on_the_host_too_is_not_blamed_on_the_sandbox";
    if !python_or_skip(test) {
        return;
    }
    let run = root_and_unprivileged(test);
    let site = Site::new();
    let present = site.write("elsewhere/conf/present.toml", "x = 1\n");
    for (file, blamed) in [
        (site.path("elsewhere/conf/missing.toml"), false),
        (present, true),
    ] {
        let script = site.write(
            "plugin/config.py",
            &format!("open({:?}).read()\n", file.to_str().unwrap()),
        );
        let err = start_fails(&script, |b| b).await;
        let denied = matches!(err.kind(), StartErrorKind::SandboxDenied { .. });
        assert_eq!(denied, blamed, "{:?}: {}: {err}", run.host, file.display());
        if !blamed {
            assert!(matches!(err.kind(), StartErrorKind::Exited { .. }), "{err}");
            assert_no_file_loosening(&err);
        }
    }
}
