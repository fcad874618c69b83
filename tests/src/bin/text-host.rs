//! A host built on the library with `tracing_subscriber`'s default output (colours included)
//! and plugin lines shown, run on a terminal by the terminal-text tests (issue 22, hole 7).
//!
//! `text-host PLUGIN`: starts `PLUGIN` (the hostile plugin), whose stray stdout and stderr
//! lines the library logs; calls `proto.KV/Get`, during which it logs through GRPCStdio;
//! shuts it down; then starts `PLUGIN exit-early` and prints the [`StartError`] with `{}`, as
//! a host that reports errors does.

use std::process::ExitCode;

use tether_broker::{HandshakeConfig, PluginClient, StartError};
use tether_examples::kv::GetRequest;
use tether_examples::kv::kv_client::KvClient;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter("info,tether_broker::plugin=debug")
        .init();
    let Some(plugin) = std::env::args().nth(1) else {
        eprintln!("usage: text-host PLUGIN");
        return ExitCode::from(2);
    };
    let client = match start(&plugin, &[]).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("text-host: {e}");
            return ExitCode::from(3);
        }
    };
    // The hostile plugin logs through GRPCStdio, then fails the call.
    let _ = KvClient::new(client.channel())
        .get(GetRequest { key: "x".into() })
        .await;
    let _ = client.shutdown().await;
    match start(&plugin, &["exit-early"]).await {
        Ok(_) => {
            eprintln!("text-host: `exit-early` started");
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("text-host: {e}");
            ExitCode::SUCCESS
        }
    }
}

async fn start(plugin: &str, args: &[&str]) -> Result<PluginClient, StartError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    PluginClient::builder(plugin)
        .args(args)
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .current_dir(dir.path())
        .start()
        .await
}
