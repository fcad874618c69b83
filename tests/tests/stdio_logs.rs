//! A plugin's stdout, stderr and logs in its host: through `plugin.GRPCStdio` (fds 1 and 2,
//! child processes and C output included) and the stderr pipe (hclog JSON, `[LEVEL]` text),
//! with the plugin's name, pid and level. And the same plugin under the newest go-plugin host.
//! (Floods are in `log_flood.rs`, alone in their binary so that memory readings are theirs.)

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::collections::HashMap;
use std::path::Path;
use std::pin::pin;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tether_broker::{
    HandshakeConfig, OutputLine, OutputSink, PluginClient, launch::LogLevel, launch::OutputSource,
};
use tether_examples::counter::PutRequest;
use tether_examples::counter::counter_client::CounterClient;
use tether_tests::peers::{self, GoPlugin};
use tether_tests::procs;
use tokio::sync::Notify;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::{Layer, filter::LevelFilter};

const STDIO_PLUGIN: &str = env!("CARGO_BIN_EXE_stdio-plugin");

/// How long a test waits for expected log events.
const EVENT_DEADLINE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
struct Record {
    level: Level,
    target: String,
    fields: HashMap<String, String>,
}

/// A `tracing` layer that keeps every event and wakes waiters.
#[derive(Clone, Default)]
struct Recorder {
    events: Arc<Mutex<Vec<Record>>>,
    notify: Arc<Notify>,
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: Subscriber> Layer<S> for Recorder {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        self.events.lock().unwrap().push(Record {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            fields,
        });
        self.notify.notify_waiters();
    }
}

impl Recorder {
    /// Waits for an event matching `want`.
    async fn wait_for(&self, what: &str, want: impl Fn(&Record) -> bool) -> Record {
        let deadline = tokio::time::Instant::now() + EVENT_DEADLINE;
        loop {
            let mut notified = pin!(self.notify.notified());
            notified.as_mut().enable();
            if let Some(found) = self.events.lock().unwrap().iter().find(|r| want(r)) {
                return found.clone();
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                let seen: Vec<_> = self.events.lock().unwrap().clone();
                panic!("no event {what} within {EVENT_DEADLINE:?}; seen: {seen:#?}");
            }
        }
    }
}

fn message_is(record: &Record, text: &str) -> bool {
    record.fields.get("message").is_some_and(|m| m == text)
}

fn stdio_plugin(work: &Path, capture: bool) -> tether_broker::PluginClientBuilder<HandshakeConfig> {
    PluginClient::builder(STDIO_PLUGIN)
        .name("chatty")
        .current_dir(work)
        .env("STDIO_PLUGIN_CAPTURE", if capture { "1" } else { "0" })
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
}

#[tokio::test]
async fn stdout_stderr_child_and_c_output_and_logs_reach_the_host_with_name_pid_and_level() {
    let recorder = Recorder::default();
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(recorder.clone().with_filter(LevelFilter::INFO)),
    );
    let work = tempfile::tempdir().unwrap();
    let plugin = stdio_plugin(work.path(), true).start().await.unwrap();
    let pid = plugin.pid().to_string();
    CounterClient::new(plugin.channel())
        .put(PutRequest {
            add_server: 0,
            key: "k".into(),
            value: 1,
        })
        .await
        .unwrap();

    let from_plugin = |r: &Record| {
        r.target == "tether_broker::plugin"
            && r.fields.get("plugin").is_some_and(|p| p == "chatty")
            && r.fields.get("pid") == Some(&pid)
    };
    for line in ["hello from stdout", "child says hi", "C says hi"] {
        let record = recorder
            .wait_for(line, |r| {
                from_plugin(r) && message_is(r, &format!("stdout: {line}"))
            })
            .await;
        assert_eq!(record.level, Level::INFO);
        assert_eq!(record.fields["source"], "grpc-stdio", "{record:?}");
    }
    let raw = recorder
        .wait_for("raw stderr warning", |r| {
            from_plugin(r) && message_is(r, "raw stderr warning")
        })
        .await;
    assert_eq!(raw.level, Level::WARN, "`[WARN] …` text is a warning");
    // stderr stays the host's pipe (it survives crashes), parsed like GRPCStdio output.
    assert_eq!(raw.fields["source"], "stderr");

    let log = recorder
        .wait_for("a warning from tracing", |r| {
            from_plugin(r) && message_is(r, "a warning from tracing")
        })
        .await;
    assert_eq!(
        log.level,
        Level::WARN,
        "the SDK's hclog JSON keeps the level"
    );
    assert_eq!(log.fields["source"], "stderr", "logs use the real stderr");
    assert_eq!(log.fields["fields"], "answer=42");
    assert_eq!(log.fields["module"], "stdio_plugin");

    plugin.shutdown().await.unwrap();
    assert!(procs::in_dir(work.path()).is_empty());
}

/// A host that provides its own sink gets every line as an `OutputLine` (and `tracing` gets
/// none of them).
#[tokio::test]
async fn a_user_sink_gets_stdout_and_parsed_logs_with_source_level_and_plugin_instead_of_tracing() {
    let recorder = Recorder::default();
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(recorder.clone().with_filter(LevelFilter::TRACE)),
    );
    let lines: Arc<Mutex<Vec<OutputLine>>> = Arc::default();
    let arrived = Arc::new(Notify::new());
    let sink = {
        let (lines, arrived) = (Arc::clone(&lines), Arc::clone(&arrived));
        OutputSink::new(move |line| {
            lines.lock().unwrap().push(line);
            arrived.notify_waiters();
        })
    };
    let work = tempfile::tempdir().unwrap();
    let plugin = stdio_plugin(work.path(), true)
        .output_sink(sink)
        .start()
        .await
        .unwrap();
    CounterClient::new(plugin.channel())
        .put(PutRequest {
            add_server: 0,
            key: "k".into(),
            value: 1,
        })
        .await
        .unwrap();
    let wait_for = |what: &'static str, want: fn(&OutputLine) -> bool| {
        let (lines, arrived) = (Arc::clone(&lines), Arc::clone(&arrived));
        async move {
            let deadline = tokio::time::Instant::now() + EVENT_DEADLINE;
            loop {
                let mut notified = pin!(arrived.notified());
                notified.as_mut().enable();
                if let Some(found) = lines.lock().unwrap().iter().find(|l| want(l)) {
                    return found.clone();
                }
                if tokio::time::timeout_at(deadline, notified).await.is_err() {
                    panic!("no {what} in {:#?}", lines.lock().unwrap());
                }
            }
        }
    };
    let stdout = wait_for("stdout line", |l| l.message == "hello from stdout").await;
    assert_eq!(stdout.source, OutputSource::GrpcStdioStdout);
    assert_eq!(stdout.level, LogLevel::Info);
    assert_eq!(&*stdout.plugin, "chatty");
    assert_eq!(stdout.pid, plugin.pid());
    let warning = wait_for("tracing warning", |l| l.message == "a warning from tracing").await;
    assert_eq!(warning.source, OutputSource::Stderr);
    assert_eq!(warning.level, LogLevel::Warn);
    assert_eq!(warning.fields, "answer=42");
    assert_eq!(warning.module.as_deref(), Some("stdio_plugin"));

    plugin.shutdown().await.unwrap();
    let to_tracing = recorder
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.target == "tether_broker::plugin")
        .count();
    assert_eq!(to_tracing, 0, "the sink replaces tracing for plugin output");
    assert!(procs::in_dir(work.path()).is_empty());
}

/// A plugin that prints a lot and is shut down right after: its last line still arrives
/// through GRPCStdio (the SDK drains its capture pipe before ending the stream).
#[tokio::test]
async fn the_last_stdout_line_before_a_fast_shutdown_arrives_through_grpc_stdio() {
    let lines: Arc<Mutex<Vec<OutputLine>>> = Arc::default();
    let arrived = Arc::new(Notify::new());
    let sink = {
        let (lines, arrived) = (Arc::clone(&lines), Arc::clone(&arrived));
        OutputSink::new(move |line| {
            if line.message == "the last line" {
                lines.lock().unwrap().push(line);
                arrived.notify_one();
            }
        })
    };
    let work = tempfile::tempdir().unwrap();
    let plugin = stdio_plugin(work.path(), true)
        .output_sink(sink)
        .start()
        .await
        .unwrap();
    CounterClient::new(plugin.channel())
        .put(PutRequest {
            add_server: 0,
            key: "burst".into(),
            value: 1,
        })
        .await
        .unwrap();
    plugin.shutdown().await.unwrap();
    // The host's stdio task may still be handing out the stream's last lines (notify_one keeps
    // a permit if the line came first).
    let _ = tokio::time::timeout(EVENT_DEADLINE, arrived.notified()).await;
    let got = lines.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "the last line arrived once: {got:?}");
    assert_eq!(got[0].source, OutputSource::GrpcStdioStdout);
    assert!(procs::in_dir(work.path()).is_empty());
}

/// The newest go-plugin host receives a tether plugin's stdout through GRPCStdio and shows its
/// `tracing::warn!` as a warning.
#[test]
fn a_go_plugin_v1_8_host_gets_stdout_over_grpc_stdio_and_shows_warnings_as_warnings() {
    let Some(go) = peers::go_or_skip(
        GoPlugin::V18,
        "a_go_plugin_v1_8_host_gets_stdout_over_grpc_stdio_and_shows_warnings_as_warnings",
    ) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let out = Command::new(&go.counter_host)
        .args(["put", "c", "1"])
        .env("COUNTER_PLUGIN", STDIO_PLUGIN)
        .env("COUNTERHOST_LOG_LEVEL", "info")
        .current_dir(work.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l == "plugin stdout: hello from stdout"),
        "stdout arrives through GRPCStdio (the Go host's SyncStdout): {stderr}"
    );
    assert!(
        stderr.lines().any(|l| l.contains("[WARN]")
            && l.contains("a warning from tracing")
            && l.contains("answer=42")),
        "the warning is logged at WARN with its field: {stderr}"
    );
    assert!(procs::in_dir(work.path()).is_empty());
}

#[test]
fn a_go_plugin_v1_8_host_gets_the_plugins_last_output_before_the_shutdown_answer() {
    let Some(go) = peers::go_or_skip(
        GoPlugin::V18,
        "a_go_plugin_v1_8_host_gets_the_plugins_last_output_before_the_shutdown_answer",
    ) else {
        return;
    };
    // go-plugin closes its connection as soon as `GRPCController.Shutdown` answers; output
    // the plugin flushes while stopping must be on the stream before that answer.
    let work = tempfile::tempdir().unwrap();
    let out = Command::new(&go.counter_host)
        .args(["put", "partial", "1"])
        .env("COUNTER_PLUGIN", STDIO_PLUGIN)
        .current_dir(work.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.lines().any(|l| l == "plugin stdout: the last words"),
        "the unterminated last line arrives through GRPCStdio: {stderr}"
    );
    assert!(procs::in_dir(work.path()).is_empty());
}
