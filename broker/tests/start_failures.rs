//! Start-up failures against tiny shell-script "plugins": each must come back as its typed
//! error, with what the plugin printed, and leave no process or private directory behind.

use std::path::Path;
use std::time::Duration;

use tether_broker::{
    HandshakeConfig, OutputLimits, PluginClient, StartError, Timeouts, error::AddressProblem,
    error::Incompatibility, error::OutputLimit, error::Phase, error::StartErrorKind,
};

/// Runs `script` with `/bin/sh` as the plugin, private directories under `runtime`.
async fn start(script: &str, runtime: &Path, tls: bool) -> StartError {
    let mut builder = PluginClient::builder("/bin/sh")
        .args(["-c", script])
        .name("script")
        .private_dir_base(runtime)
        .timeouts(
            Timeouts::default()
                .start(Duration::from_secs(5))
                .terminate_grace(Duration::from_millis(200)),
        )
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]));
    if !tls {
        builder = builder.plaintext();
    }
    match builder.start().await {
        Ok(plugin) => panic!("script plugin started: {plugin:?}"),
        Err(e) => e,
    }
}

/// A private-directory base for one test, checked to be empty (no private directory left) at the end.
struct Runtime(tempfile::TempDir);

impl Runtime {
    fn new() -> Self {
        // Short, so sockets would fit.
        Self(
            tempfile::Builder::new()
                .prefix("tb")
                .tempdir_in("/tmp")
                .expect("a temporary directory"),
        )
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn assert_empty(&self) {
        let left: Vec<_> = std::fs::read_dir(self.path()).expect("readable").collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}

#[tokio::test]
async fn a_plugin_that_exits_reports_its_status_and_stderr_tail() {
    let rt = Runtime::new();
    let err = start("echo 'boom: no config' >&2; exit 7", rt.path(), true).await;
    let (StartErrorKind::Exited { status }, phase) = (err.kind(), err.phase()) else {
        panic!("expected Exited, got {err:?}");
    };
    assert_eq!(status.code(), Some(7));
    assert_eq!(phase, Phase::Handshake);
    assert_eq!(err.output().unwrap().stderr_tail, "boom: no config");
    let text = err.to_string();
    assert!(
        text.contains("plugin `script` exited (exit status: 7)"),
        "{text}"
    );
    assert!(text.contains("boom: no config"), "{text}");
    rt.assert_empty();
}

#[tokio::test]
async fn a_plugin_that_prints_no_handshake_times_out_and_is_killed() {
    let rt = Runtime::new();
    let err = PluginClient::builder("/bin/sh")
        .args(["-c", "echo starting; echo waiting >&2; exec sleep 30"])
        .private_dir_base(rt.path())
        .timeouts(
            Timeouts::default()
                .start(Duration::from_millis(300))
                .terminate_grace(Duration::from_millis(200)),
        )
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind(), StartErrorKind::Timeout { .. }),
        "{err:?}"
    );
    assert_eq!(err.phase(), Phase::Handshake);
    let output = err.output().unwrap();
    assert_eq!(output.stdout, "starting");
    assert_eq!(output.stderr_tail, "waiting");
    rt.assert_empty();
}

#[tokio::test]
async fn a_line_that_looks_like_a_handshake_but_is_broken_is_malformed() {
    let rt = Runtime::new();
    let err = start("echo '1|x|unix|/s|grpc|'; exec sleep 30", rt.path(), true).await;
    let StartErrorKind::Malformed { line, .. } = err.kind() else {
        panic!("expected Malformed, got {err:?}");
    };
    assert_eq!(line, "1|x|unix|/s|grpc|");
    rt.assert_empty();
}

#[tokio::test]
async fn an_app_version_the_host_did_not_offer_is_incompatible() {
    let rt = Runtime::new();
    let script = r#"echo "1|2|unix|$PLUGIN_UNIX_SOCKET_DIR/s|grpc|"; exec sleep 30"#;
    let err = start(script, rt.path(), false).await;
    let StartErrorKind::Incompatible {
        reason, offered, ..
    } = err.kind()
    else {
        panic!("expected Incompatible, got {err:?}");
    };
    assert_eq!(*reason, Incompatibility::AppVersion { got: 2 });
    assert_eq!(offered, &[1]);
    rt.assert_empty();
}

#[tokio::test]
async fn a_netrpc_plugin_is_incompatible() {
    let rt = Runtime::new();
    let err = start(
        "echo '1|1|unix|/s|netrpc|'; exec sleep 30",
        rt.path(),
        false,
    )
    .await;
    assert!(
        matches!(err.kind(),
            StartErrorKind::Incompatible {
                reason: Incompatibility::Protocol { got },
                ..
            } if got == "netrpc"
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn multiplexing_the_host_did_not_offer_is_refused() {
    let rt = Runtime::new();
    let script = r#"echo "1|1|unix|$PLUGIN_UNIX_SOCKET_DIR/s|grpc||true"; exec sleep 30"#;
    let err = start(script, rt.path(), false).await;
    assert!(
        matches!(
            err.kind(),
            StartErrorKind::Incompatible {
                reason: Incompatibility::Multiplexing,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_plugin_without_a_certificate_is_told_about_plaintext() {
    let rt = Runtime::new();
    let script = r#"echo "1|1|unix|$PLUGIN_UNIX_SOCKET_DIR/s|grpc|"; exec sleep 30"#;
    let err = start(script, rt.path(), true).await;
    assert!(matches!(err.kind(), StartErrorKind::NoAutoMtls), "{err:?}");
    assert!(err.to_string().contains(".plaintext()"));
    rt.assert_empty();
}

#[tokio::test]
async fn a_socket_outside_the_private_directory_is_refused() {
    let rt = Runtime::new();
    let err = start(
        "echo '1|1|unix|/run/elsewhere.sock|grpc|'; exec sleep 30",
        rt.path(),
        false,
    )
    .await;
    assert!(
        matches!(
            err.kind(),
            StartErrorKind::Address {
                problem: AddressProblem::OutsidePrivateDir { .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.phase(), Phase::Connect);
    rt.assert_empty();
}

#[tokio::test]
async fn a_socket_that_does_not_exist_is_refused() {
    let rt = Runtime::new();
    let script = r#"echo "1|1|unix|$PLUGIN_UNIX_SOCKET_DIR/nothing|grpc|"; exec sleep 30"#;
    let err = start(script, rt.path(), false).await;
    assert!(
        matches!(
            err.kind(),
            StartErrorKind::Address {
                problem: AddressProblem::Inaccessible { .. },
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_non_loopback_tcp_address_is_refused() {
    let rt = Runtime::new();
    let err = start(
        "echo '1|1|tcp|192.0.2.1:1234|grpc|'; exec sleep 30",
        rt.path(),
        false,
    )
    .await;
    assert!(
        matches!(
            err.kind(),
            StartErrorKind::Address {
                problem: AddressProblem::NotLoopback,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn endless_chatter_before_the_handshake_is_cut_off() {
    let rt = Runtime::new();
    let script = "i=0; while [ $i -lt 500 ]; do echo line $i; i=$((i+1)); done; exec sleep 30";
    let err = start(script, rt.path(), true).await;
    assert!(
        matches!(
            err.kind(),
            StartErrorKind::TooMuchOutput {
                limit: OutputLimit::Lines(100),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.output().unwrap().stdout.starts_with("line 0\nline 1\n"));
    rt.assert_empty();
}

#[tokio::test]
async fn the_plugin_environment_holds_only_allowed_and_protocol_variables() {
    let rt = Runtime::new();
    // The plugin dumps its environment to stderr and exits; the error carries the tail.
    let err = PluginClient::builder("/bin/sh")
        .args(["-c", "env >&2; exit 1"])
        .private_dir_base(rt.path())
        .env("EXTRA", "yes")
        .env("TMPDIR", "/forged")
        .output_limits(OutputLimits::default().stderr_tail_len(16 * 1024))
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1, 2]))
        .start()
        .await
        .unwrap_err();
    let tail = &err.output().unwrap().stderr_tail;
    let vars: Vec<&str> = tail
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        .collect();
    for want in [
        "BASIC_PLUGIN",
        "PLUGIN_PROTOCOL_VERSIONS",
        "PLUGIN_CLIENT_CERT",
        "PLUGIN_MIN_PORT",
        "PLUGIN_MAX_PORT",
        "PLUGIN_UNIX_SOCKET_DIR",
        "TMPDIR",
        "EXTRA",
    ] {
        assert!(vars.contains(&want), "{want} missing from {vars:?}");
    }
    for unwanted in [
        "HOME",
        "USER",
        "CARGO",
        "PLUGIN_MULTIPLEX_GRPC",
        "RUST_BACKTRACE",
    ] {
        assert!(!vars.contains(&unwanted), "{unwanted} leaked into {vars:?}");
    }
    assert!(tail.contains("PLUGIN_PROTOCOL_VERSIONS=1,2"));
    assert!(tail.contains("BASIC_PLUGIN=hello"));
    let private_dir = tail
        .lines()
        .find_map(|l| l.strip_prefix("PLUGIN_UNIX_SOCKET_DIR="))
        .unwrap();
    assert!(tail.contains(&format!("TMPDIR={private_dir}")));
    // In a world of its own the private directory is the world's `/tmp` (nothing of the launch
    // is on the host's disk); without one, a directory of the configured runtime directory.
    if tether_broker::confine::worlds_available().is_ok() {
        assert_eq!(private_dir, tether_broker::confine::WORLD_TMP);
    } else {
        assert!(private_dir.starts_with(rt.path().to_str().unwrap()));
    }
    rt.assert_empty();
}

#[tokio::test]
async fn a_program_that_does_not_exist_fails_to_spawn() {
    let rt = Runtime::new();
    let err = PluginClient::builder("/nonexistent/plugin")
        .private_dir_base(rt.path())
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind(), StartErrorKind::Spawn { .. }),
        "{err:?}"
    );
    assert_eq!(err.plugin(), "plugin");
    assert!(err.output().is_none());
    rt.assert_empty();
}
