//! Server-, client- and bidirectional streaming, cancellation and deadlines, in both
//! directions: the host calling the plugin, and the plugin calling the host through the
//! GRPCBroker (AutoMTLS both ways).

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::sync::Arc;
use std::time::Duration;

use tether_broker::{HandshakeConfig, PluginClient};
use tether_examples::streams::{self, StreamsService, StreamsState};
use tether_examples::streams_proto::ExerciseRequest;
use tether_examples::streams_proto::exerciser_client::ExerciserClient;
use tether_examples::streams_proto::streams_server::StreamsServer;
use tether_tests::procs;

const STREAMS_PLUGIN: &str = env!("CARGO_BIN_EXE_streams-plugin");

/// The checks `streams::exercise` runs, in order.
const CHECKS: [&str; 5] = [
    "server streaming",
    "client streaming",
    "bidirectional",
    "cancellation",
    "deadline",
];

fn assert_all_ok(results: &[String]) {
    assert_eq!(results.len(), CHECKS.len(), "{results:#?}");
    for (result, check) in results.iter().zip(CHECKS) {
        assert!(
            result.starts_with(&format!("ok: {check}:")),
            "{check}: {result}\nall: {results:#?}"
        );
    }
}

async fn start(work: &std::path::Path) -> PluginClient {
    PluginClient::builder(STREAMS_PLUGIN)
        .current_dir(work)
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
        .start()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_host_streams_to_and_from_the_plugin_with_cancellation_and_deadlines() {
    let work = tempfile::tempdir().unwrap();
    let plugin = start(work.path()).await;
    assert_all_ok(&streams::exercise(plugin.channel()).await);
    plugin.shutdown().await.unwrap();
    assert!(procs::in_dir(work.path()).is_empty());
}

#[tokio::test]
async fn the_plugin_streams_to_and_from_the_host_through_the_broker() {
    let work = tempfile::tempdir().unwrap();
    let plugin = start(work.path()).await;
    let state = Arc::new(StreamsState::default());
    let broker = plugin.broker();
    let id = broker.next_id();
    let served = broker
        .accept_and_serve(
            id,
            StreamsServer::new(StreamsService::new(Arc::clone(&state))),
        )
        .await
        .unwrap();
    let report = ExerciserClient::new(plugin.channel())
        .exercise(ExerciseRequest { streams_id: id })
        .await
        .unwrap()
        .into_inner();
    assert_all_ok(&report.results);
    // The host's own server saw the plugin drop its endless stream.
    assert!(
        state.wait_for_cancelled(1, Duration::from_secs(5)).await >= 1,
        "the host's stream did not end when the plugin dropped it"
    );
    drop(served);
    plugin.shutdown().await.unwrap();
    assert!(procs::in_dir(work.path()).is_empty());
}
