//! go-plugin's multiplexed broker (`PLUGIN_MULTIPLEX_GRPC`, handshake field 7, yamux,
//! knock/ack): a tether host offering it to tether and newest-go-plugin plugins, a newest
//! go-plugin host with it on and a tether plugin, and the fall-back to the default mode.
//!
//! Each multiplexed test proves multiplexing happened: the client reports the mode, the
//! plugin's socket has exactly one connection while callbacks run in both directions, and no
//! broker listener socket appears in the private directory (which the default mode, as a
//! control, does show).

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use tether_broker::{HandshakeConfig, PluginClient, callbacks::BrokerMode, launch::Address};
use tether_examples::adder::Adder;
use tether_examples::counter::add_helper_server::AddHelperServer;
use tether_examples::counter::counter_client::CounterClient;
use tether_examples::counter::{GetRequest, PutRequest};
use tether_examples::streams::{self, StreamsService, StreamsState};
use tether_examples::streams_proto::exerciser_client::ExerciserClient;
use tether_examples::streams_proto::streams_server::StreamsServer;
use tether_examples::streams_proto::{ExerciseRequest, ServeRequest};
use tether_tests::bins;
use tether_tests::peers::{self, GoPlugin};
use tether_tests::procs;

const STREAMS_PLUGIN: &str = env!("CARGO_BIN_EXE_streams-plugin");

/// The unix sockets in `dir`.
fn sockets_in(dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt as _;
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_socket())
        .map(|e| e.path())
        .collect()
}

fn main_socket(plugin: &PluginClient) -> PathBuf {
    match plugin.address() {
        Address::Unix(path) => path.clone(),
        other => panic!("not a unix socket: {other}"),
    }
}

/// Multiplexed: one connection, no socket but the plugin's; default: sockets of their own.
fn assert_transport(plugin: &PluginClient, mode: BrokerMode) {
    let socket = main_socket(plugin);
    let dir = socket.parent().unwrap();
    let sockets = sockets_in(dir);
    assert_eq!(plugin.broker_mode(), mode);
    match mode {
        BrokerMode::Multiplexed => {
            assert_eq!(
                sockets,
                std::slice::from_ref(&socket),
                "only the plugin's socket"
            );
            assert_eq!(
                procs::unix_connections_to(plugin.pid(), &socket),
                1,
                "one connection to the plugin"
            );
        }
        _ => assert!(
            sockets.len() > 1,
            "the default mode listens on sockets of its own: {sockets:?}"
        ),
    }
}

async fn start_streams(work: &Path, multiplex: bool) -> PluginClient {
    PluginClient::builder(STREAMS_PLUGIN)
        .current_dir(work)
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
        .multiplex(multiplex)
        .start()
        .await
        .unwrap()
}

fn assert_all_ok(results: &[String]) {
    assert_eq!(results.len(), 5, "{results:#?}");
    for result in results {
        assert!(result.starts_with("ok: "), "{results:#?}");
    }
}

/// Streams with cancellation and deadlines host → plugin (main connection and a brokered one
/// the plugin serves) and plugin → host (a brokered one the host serves), all at once.
async fn streams_both_ways(multiplex: bool, mode: BrokerMode) {
    let work = tempfile::tempdir().unwrap();
    let plugin = start_streams(work.path(), multiplex).await;
    let private_dir = main_socket(&plugin).parent().unwrap().to_owned();

    // Host → plugin over the main connection.
    assert_all_ok(&streams::exercise(plugin.channel()).await);

    // Plugin → host through the broker: the host serves Streams on an id.
    let broker = plugin.broker();
    let state = Arc::new(StreamsState::default());
    let id = broker.next_id();
    let served = broker
        .accept_and_serve(
            id,
            StreamsServer::new(StreamsService::new(Arc::clone(&state))),
        )
        .await
        .unwrap();
    let mut exerciser = ExerciserClient::new(plugin.channel());
    let report = exerciser
        .exercise(ExerciseRequest { streams_id: id })
        .await
        .unwrap()
        .into_inner();
    assert_all_ok(&report.results);

    // Host → plugin through the broker: the plugin serves Streams on an id of its own.
    let plugin_id = exerciser
        .serve_streams(ServeRequest {})
        .await
        .unwrap()
        .into_inner()
        .streams_id;
    let channel = broker.dial(plugin_id).await.unwrap();
    assert_all_ok(&streams::exercise(channel).await);

    assert_transport(&plugin, mode);
    drop(served);
    plugin.shutdown().await.unwrap();
    assert!(!private_dir.exists(), "the private directory is removed");
    assert!(procs::in_dir(work.path()).is_empty());
}

#[tokio::test]
async fn tether_broker_and_plugin_multiplex_callbacks_both_ways_and_streams_over_one_connection() {
    streams_both_ways(true, BrokerMode::Multiplexed).await;
}

/// The control for the proof above: without multiplexing the same calls listen on sockets of
/// their own.
#[tokio::test]
async fn without_multiplexing_the_same_callbacks_listen_on_sockets_of_their_own() {
    streams_both_ways(false, BrokerMode::Default).await;
}

/// `put c 5`, `put c 7` (the plugin calls back to add), `get c` = 12 in one launch of a
/// counter plugin; the host's `AddHelper` stays served while the transport is checked.
async fn counter_in_one_launch(program: &Path, plaintext: bool, mode: BrokerMode) {
    let work = tempfile::tempdir().unwrap();
    let mut builder = PluginClient::builder(program)
        .current_dir(work.path())
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
        .multiplex(true);
    if plaintext {
        builder = builder.plaintext();
    }
    let plugin = builder.start().await.unwrap();
    let private_dir = main_socket(&plugin).parent().unwrap().to_owned();
    let broker = plugin.broker();
    let mut counter = CounterClient::new(plugin.channel());
    let mut served = Vec::new();
    for n in [5, 7] {
        let id = broker.next_id();
        served.push(
            broker
                .accept_and_serve(id, AddHelperServer::new(Adder))
                .await
                .unwrap(),
        );
        counter
            .put(PutRequest {
                add_server: id,
                key: "c".into(),
                value: n,
            })
            .await
            .unwrap();
    }
    let value = counter
        .get(GetRequest { key: "c".into() })
        .await
        .unwrap()
        .into_inner()
        .value;
    assert_eq!(value, 12);
    assert_transport(&plugin, mode);
    drop(served);
    plugin.shutdown().await.unwrap();
    assert!(!private_dir.exists(), "the private directory is removed");
    assert!(procs::in_dir(work.path()).is_empty());
}

#[tokio::test]
async fn a_tether_broker_multiplexes_callbacks_with_a_go_plugin_v1_8_under_automtls() {
    let Some(go) = peers::go_or_skip(
        GoPlugin::V18,
        "a_tether_broker_multiplexes_callbacks_with_a_go_plugin_v1_8_under_automtls",
    ) else {
        return;
    };
    counter_in_one_launch(&go.counter_plugin, false, BrokerMode::Multiplexed).await;
}

#[tokio::test]
async fn a_tether_broker_multiplexes_callbacks_with_a_tether_counter_plugin() {
    counter_in_one_launch(
        Path::new(bins::COUNTER_PLUGIN.path()),
        false,
        BrokerMode::Multiplexed,
    )
    .await;
}

/// Debian's go-plugin 1.0.1 knows no multiplexing and prints six fields: the offer is ignored
/// and callbacks work in the default mode (plaintext: its broker dials fail under AutoMTLS).
#[tokio::test]
async fn offering_multiplexing_to_a_go_plugin_v1_0_1_falls_back_to_the_default_mode() {
    let Some(go) = peers::go_or_skip(
        GoPlugin::V101,
        "offering_multiplexing_to_a_go_plugin_v1_0_1_falls_back_to_the_default_mode",
    ) else {
        return;
    };
    counter_in_one_launch(&go.counter_plugin, true, BrokerMode::Default).await;
}

/// A go-plugin v1.8 host with `GRPCBrokerMultiplex` refuses plugins that do not answer field 7
/// `true`; the tether plugin logs the mode it sees on each callback.
#[test]
fn a_go_host_v1_8_with_multiplexing_on_calls_back_a_tether_plugin_over_one_connection() {
    let Some(go) = peers::go_or_skip(
        GoPlugin::V18,
        "a_go_host_v1_8_with_multiplexing_on_calls_back_a_tether_plugin_over_one_connection",
    ) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(&go.counter_host)
            .arg("--multiplex")
            .args(args)
            .env("COUNTER_PLUGIN", bins::COUNTER_PLUGIN.path())
            .env("COUNTERHOST_LOG_LEVEL", "info")
            .current_dir(work.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{args:?}: {}\n{stderr}", out.status);
        (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
    };
    for n in ["5", "7"] {
        let (_, stderr) = run(&["put", "c", n]);
        assert!(
            stderr
                .lines()
                .any(|line| line.contains("reaching the host's AddHelper")
                    && line.contains("broker=multiplexed")),
            "the plugin's callback ran multiplexed: {stderr}"
        );
    }
    assert_eq!(run(&["get", "c"]).0, "12\n");
    assert!(procs::in_dir(work.path()).is_empty());
}

/// The first stdout line of the tether counter plugin started with `env` (and the cookie).
fn handshake_line(env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(bins::COUNTER_PLUGIN.path())
        .env_clear()
        .env("BASIC_PLUGIN", "hello")
        .env("PLUGIN_PROTOCOL_VERSIONS", "1")
        .env("PLUGIN_UNIX_SOCKET_DIR", dir.path())
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    line.trim_end().to_owned()
}

/// Hosts before go-plugin 1.6 (Debian's 1.0.1) split the line into at most six fields: a
/// seventh would corrupt the certificate field, so it appears only when offered.
#[test]
fn a_tether_plugin_prints_field_7_only_when_the_host_offers_multiplexing() {
    let plain = handshake_line(&[]);
    assert_eq!(plain.split('|').count(), 6, "{plain}");
    let offered = handshake_line(&[("PLUGIN_MULTIPLEX_GRPC", "true")]);
    assert_eq!(offered.split('|').count(), 7, "{offered}");
    assert!(offered.ends_with("|true"), "{offered}");
    let declined = handshake_line(&[("PLUGIN_MULTIPLEX_GRPC", "false")]);
    assert!(declined.ends_with("|false"), "{declined}");
}
