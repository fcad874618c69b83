//! A plugin writing 100 MB without a newline to stderr — through the pipe, then through
//! `plugin.GRPCStdio` — leaves host memory within a few MB of its baseline while other calls
//! keep answering. One test in this binary, so the memory readings are its own.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;
use std::pin::pin;

use tether_broker::{HandshakeConfig, PluginClient};
use tether_examples::counter::GetRequest;
use tether_examples::counter::counter_client::CounterClient;

const STDIO_PLUGIN: &str = env!("CARGO_BIN_EXE_stdio-plugin");

fn stdio_plugin(work: &Path, capture: bool) -> tether_broker::PluginClientBuilder<HandshakeConfig> {
    PluginClient::builder(STDIO_PLUGIN)
        .name("chatty")
        .current_dir(work)
        .env("STDIO_PLUGIN_CAPTURE", if capture { "1" } else { "0" })
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
}

/// The host's resident memory in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap()
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kb * 1024
}

/// Host memory may grow by at most this much during a 100 MB flood.
const FLOOD_RSS_SLACK: u64 = 8 * 1024 * 1024;

/// 100 MB without a newline on stderr (through the pipe, or through GRPCStdio): host memory
/// stays within a few MB of its baseline and other calls keep answering meanwhile.
async fn flood(capture: bool) {
    // A host logging at info (plugin lines without a level are debug, so filtered out).
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_writer(std::io::sink)
            .finish(),
    );
    let work = tempfile::tempdir().unwrap();
    let plugin = stdio_plugin(work.path(), capture).start().await.unwrap();
    let mut counter = CounterClient::new(plugin.channel());
    // Warm up connections and buffers before the baseline.
    for _ in 0..20 {
        counter.get(GetRequest { key: "abc".into() }).await.unwrap();
    }
    let baseline = rss();

    let mut flooder = counter.clone();
    let mut flooding = pin!(flooder.get(GetRequest {
        key: "flood".into()
    }));
    let mut answered = 0_u32;
    let mut peak = baseline;
    loop {
        tokio::select! {
            done = &mut flooding => {
                assert_eq!(done.unwrap().into_inner().value, 0);
                break;
            }
            got = counter.get(GetRequest { key: "abcd".into() }) => {
                assert_eq!(got.unwrap().into_inner().value, 4);
                answered += 1;
                peak = peak.max(rss());
            }
        }
    }
    peak = peak.max(rss());
    eprintln!(
        "flood (capture {capture}): {answered} calls answered, host RSS {baseline} -> peak {peak}"
    );
    assert!(answered > 0, "calls must keep answering during the flood");
    assert!(
        peak.saturating_sub(baseline) < FLOOD_RSS_SLACK,
        "host RSS grew from {baseline} to {peak} bytes during a 100 MB flood"
    );
    plugin.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_100_mb_stderr_flood_keeps_host_memory_flat_and_calls_answering() {
    flood(false).await;
    flood(true).await;
}
