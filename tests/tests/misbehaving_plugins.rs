//! Real misbehaving plugin binaries (this crate's `[[bin]]`s) against the host library: each
//! start must fail with its typed error, name the plugin and the phase, quote what the plugin
//! printed, and leave no process (grandchildren included), socket or private directory behind.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;
use std::time::{Duration, Instant};

use tether_broker::{
    HandshakeConfig, OutputLimits, PluginClient, PluginClientBuilder, StartError, Timeouts,
    error::Incompatibility, error::OutputLimit, error::Phase, error::StartErrorKind,
};
use tether_tests::bins;
use tether_tests::procs;

/// Start timeout used by these tests: long enough for a loaded 2-core machine to print a
/// handshake, short enough to keep the hang test quick.
const TEST_START_TIMEOUT: Duration = Duration::from_secs(3);

/// How long after the start timeout the hang test may take to return (ending the process group
/// included).
const TIMEOUT_MARGIN: Duration = Duration::from_secs(3);

/// One test's sandbox: a working directory for the plugin (to find leftover processes by) and a
/// private-directory base for the host's private per-launch directories (to find leftovers in).
struct Sandbox {
    work: tempfile::TempDir,
    runtime: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        Self {
            work: tempfile::tempdir().unwrap(),
            // Short, so socket paths fit in sun_path.
            runtime: tempfile::Builder::new()
                .prefix("tt")
                .tempdir_in("/tmp")
                .unwrap(),
        }
    }

    fn builder(&self, program: &str) -> PluginClientBuilder<HandshakeConfig> {
        PluginClient::builder(program)
            .current_dir(self.work.path())
            .private_dir_base(self.runtime.path())
            .timeouts(
                Timeouts::default()
                    .start(TEST_START_TIMEOUT)
                    .terminate_grace(Duration::from_millis(500)),
            )
            .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
    }

    /// Nothing may remain: no live process working in the plugin's directory, nothing in the
    /// private-directory base.
    fn assert_nothing_left(&self) {
        let procs = procs::in_dir(self.work.path());
        assert!(procs.is_empty(), "processes left behind: {procs:?}");
        let left: Vec<_> = std::fs::read_dir(self.runtime.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(left.is_empty(), "files left behind: {left:?}");
    }
}

async fn start_err(builder: PluginClientBuilder<HandshakeConfig>) -> StartError {
    match builder.start().await {
        Ok(plugin) => panic!("the plugin started although it misbehaves: {plugin:?}"),
        Err(e) => e,
    }
}

fn assert_no_process_runs(pid_dir: &Path) {
    let procs = procs::in_dir(pid_dir);
    assert!(procs.is_empty(), "processes left behind: {procs:?}");
}

#[tokio::test]
async fn a_plugin_started_with_the_wrong_cookie_is_a_refused_cookie_naming_the_key_and_its_message_is_quoted()
 {
    let sb = Sandbox::new();
    let builder = PluginClient::builder(bins::KV_PLUGIN.path())
        .current_dir(sb.work.path())
        .private_dir_base(sb.runtime.path())
        .start_timeout(TEST_START_TIMEOUT)
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "goodbye").app_versions([1]));
    let err = start_err(builder).await;
    let (StartErrorKind::CookieRefused { status, cookie_key }, phase) = (err.kind(), err.phase())
    else {
        panic!("expected CookieRefused, got {err:?}");
    };
    assert_eq!(status.code(), Some(1));
    assert_eq!(cookie_key, "BASIC_PLUGIN");
    assert!(
        !err.to_string().contains("goodbye"),
        "the value is echoed: {err}"
    );
    assert_eq!(phase, Phase::Handshake);
    let stderr = &err.output().unwrap().stderr_tail;
    assert!(stderr.contains("This binary is a plugin"), "{stderr}");
    assert_eq!(
        err.output().unwrap().stdout,
        "",
        "nothing may be printed on stdout"
    );
    assert!(err.to_string().contains("kv-plugin"), "{err}");
    sb.assert_nothing_left();
}

#[tokio::test]
async fn a_plugin_that_never_answers_times_out_and_its_whole_process_group_is_stopped() {
    let sb = Sandbox::new();
    let began = Instant::now();
    let err = start_err(sb.builder(env!("CARGO_BIN_EXE_hang-before-handshake"))).await;
    let took = began.elapsed();
    let StartErrorKind::Timeout { timeout, .. } = err.kind() else {
        panic!("expected Timeout, got {err:?}");
    };
    assert_eq!(*timeout, TEST_START_TIMEOUT);
    assert!(took >= TEST_START_TIMEOUT, "returned after {took:?}");
    assert!(
        took < TEST_START_TIMEOUT + TIMEOUT_MARGIN,
        "returned after {took:?}"
    );
    assert_eq!(err.phase(), Phase::Handshake);
    assert_eq!(
        err.output().unwrap().stderr_tail.trim(),
        "warming up a very slow cache"
    );
    // The plugin's `sleep 3600` grandchild is in its process group and must be gone too.
    sb.assert_nothing_left();
}

#[tokio::test]
async fn a_plugin_that_exits_before_its_handshake_reports_status_and_stderr_tail() {
    let sb = Sandbox::new();
    let err = start_err(sb.builder(env!("CARGO_BIN_EXE_exit-before-handshake"))).await;
    let StartErrorKind::Exited { status } = err.kind() else {
        panic!("expected Exited, got {err:?}");
    };
    assert_eq!(status.code(), Some(3));
    let text = err.to_string();
    assert!(
        text.contains("cannot open the plugin database at /nonexistent/db"),
        "{text}"
    );
    assert!(text.contains("exit-before-handshake"), "{text}");
    sb.assert_nothing_left();
}

#[tokio::test]
async fn a_malformed_handshake_line_is_quoted_in_the_error() {
    let sb = Sandbox::new();
    let err = start_err(
        sb.builder(env!("CARGO_BIN_EXE_bad-handshake"))
            .arg("malformed"),
    )
    .await;
    let StartErrorKind::Malformed { line, error, .. } = err.kind() else {
        panic!("expected Malformed, got {err:?}");
    };
    assert_eq!(line, "1|1|carrier-pigeon|/coop/7|grpc|");
    assert_eq!(
        *error,
        tether_proto::handshake::HandshakeError::UnsupportedNetwork("carrier-pigeon".into())
    );
    assert_eq!(err.phase(), Phase::Handshake);
    sb.assert_nothing_left();
}

#[tokio::test]
async fn non_utf8_garbage_shaped_like_a_handshake_is_malformed() {
    let sb = Sandbox::new();
    let err = start_err(
        sb.builder(env!("CARGO_BIN_EXE_bad-handshake"))
            .arg("binary"),
    )
    .await;
    assert!(
        matches!(
            err.kind(),
            StartErrorKind::Malformed {
                error: tether_proto::handshake::HandshakeError::NotUtf8,
                ..
            }
        ),
        "{err:?}"
    );
    sb.assert_nothing_left();
}

#[tokio::test]
async fn a_megabyte_without_a_newline_is_cut_off_at_the_line_limit() {
    let sb = Sandbox::new();
    let err = start_err(
        sb.builder(env!("CARGO_BIN_EXE_bad-handshake"))
            .arg("no-newline"),
    )
    .await;
    assert!(
        matches!(
            err.kind(),
            StartErrorKind::TooMuchOutput {
                limit: OutputLimit::LineLength(tether_proto::handshake::MAX_LINE_LEN),
                ..
            }
        ),
        "{err:?}"
    );
    // What is quoted stays small however much the plugin printed.
    assert!(
        err.to_string().len() < 8 * 1024,
        "{} bytes",
        err.to_string().len()
    );
    sb.assert_nothing_left();
}

#[tokio::test]
async fn a_flood_of_stray_lines_before_the_handshake_is_cut_off() {
    let sb = Sandbox::new();
    let err = start_err(
        sb.builder(env!("CARGO_BIN_EXE_bad-handshake"))
            .arg("stray-flood")
            .output_limits(OutputLimits::default().max_stray_lines(50)),
    )
    .await;
    assert!(
        matches!(
            err.kind(),
            StartErrorKind::TooMuchOutput {
                limit: OutputLimit::Lines(50),
                ..
            }
        ),
        "{err:?}"
    );
    sb.assert_nothing_left();
}

/// Issue 25 item 5: a debug print on stdout and then nothing fails soon after the print, not
/// at the start timeout, quoting it escaped and saying where logs go.
#[tokio::test]
async fn a_stray_line_and_then_silence_fails_soon_after_it_not_at_the_start_timeout() {
    let sb = Sandbox::new();
    let start_timeout = Duration::from_secs(60);
    let began = Instant::now();
    let err = start_err(
        sb.builder(env!("CARGO_BIN_EXE_bad-handshake"))
            .arg("stray-then-silence")
            .timeouts(
                Timeouts::default()
                    .start(start_timeout)
                    .terminate_grace(Duration::from_millis(500)),
            ),
    )
    .await;
    let took = began.elapsed();
    let StartErrorKind::SilentAfterStray {
        first_line,
        lines,
        waited,
    } = err.kind()
    else {
        panic!("expected SilentAfterStray, got {err:?}");
    };
    assert_eq!(first_line, "debug: connecting to \x1b[31mdb\x1b[0m");
    assert_eq!(*lines, 2);
    assert_eq!(*waited, tether_broker::launch::DEFAULT_AFTER_STRAY_TIMEOUT);
    assert_eq!(err.phase(), Phase::Handshake);
    assert!(took < start_timeout, "returned after {took:?}");
    let text = err.to_string();
    assert!(!text.contains('\x1b'), "{text}");
    assert!(
        text.contains("(the first: \"debug: connecting to \\x1b[31mdb\\x1b[0m\")"),
        "{text}"
    );
    assert!(
        text.contains("must be its handshake: write logs, debug output and banners to stderr"),
        "{text}"
    );
    sb.assert_nothing_left();
}

#[tokio::test]
async fn an_app_version_the_host_did_not_offer_is_incompatible_and_no_connection_is_tried() {
    let sb = Sandbox::new();
    let err = start_err(
        sb.builder(env!("CARGO_BIN_EXE_bad-handshake"))
            .arg("app-version"),
    )
    .await;
    let StartErrorKind::Incompatible {
        reason, offered, ..
    } = err.kind()
    else {
        panic!("expected Incompatible, got {err:?}");
    };
    // The announced socket does not exist: reaching Connect would have given another error.
    assert_eq!(*reason, Incompatibility::AppVersion { got: 99 });
    assert_eq!(offered, &[1]);
    assert_eq!(err.phase(), Phase::Handshake);
    sb.assert_nothing_left();
}

#[tokio::test]
async fn an_unknown_core_version_and_net_rpc_are_incompatible() {
    for (mode, want) in [
        ("core-version", Incompatibility::CoreVersion { got: 2 }),
        (
            "netrpc",
            Incompatibility::Protocol {
                got: "netrpc".into(),
            },
        ),
    ] {
        let sb = Sandbox::new();
        let err = start_err(sb.builder(env!("CARGO_BIN_EXE_bad-handshake")).arg(mode)).await;
        let StartErrorKind::Incompatible { reason, .. } = err.kind() else {
            panic!("{mode}: expected Incompatible, got {err:?}");
        };
        assert_eq!(*reason, want, "{mode}");
        sb.assert_nothing_left();
    }
}

#[tokio::test]
async fn a_plugin_presenting_another_certificate_than_it_announced_is_refused_by_tls() {
    let sb = Sandbox::new();
    let err = start_err(sb.builder(env!("CARGO_BIN_EXE_wrong-certificate"))).await;
    assert!(matches!(err.kind(), StartErrorKind::Tls { .. }), "{err:?}");
    assert_eq!(err.phase(), Phase::Connect);
    let text = err.to_string();
    assert!(text.contains("wrong-certificate"), "{text}");
    assert!(text.contains("certificate"), "{text}");
    sb.assert_nothing_left();
}

#[tokio::test]
async fn the_host_keeps_serving_after_a_plugin_failed_to_start() {
    let sb = Sandbox::new();
    let _ = start_err(sb.builder(env!("CARGO_BIN_EXE_exit-before-handshake"))).await;
    let plugin = sb
        .builder(bins::KV_PLUGIN.path())
        .start()
        .await
        .expect("a good plugin starts after a bad one failed");
    let mut kv = tether_examples::kv::kv_client::KvClient::new(plugin.channel());
    kv.put(tether_examples::kv::PutRequest {
        key: "after".into(),
        value: b"failure".to_vec(),
    })
    .await
    .unwrap();
    plugin.shutdown().await.unwrap();
    assert_no_process_runs(sb.work.path());
    sb.assert_nothing_left();
}
