//! Draining go-plugin's `GRPCStdio` stream.
//!
//! go-plugin (≥ 1.1) plugins redirect their `os.Stdout`/`os.Stderr` after the handshake into
//! `plugin.GRPCStdio/StreamStdio`, through an unbuffered channel: a host that never opens the
//! stream blocks a plugin that prints. The host therefore opens it right after connecting and
//! logs what arrives (stdout at info, stderr at debug, like the pipes).

use std::sync::Arc;

use tether_proto::plugin::grpc_stdio_client::GrpcStdioClient;
use tether_proto::plugin::stdio_data::Channel as StdioChannel;
use tonic::transport::Channel;

/// Opens the stdio stream and drains it in a background task until it ends.
pub(crate) fn drain(channel: Channel, plugin: Arc<str>) {
    tokio::spawn(async move {
        let mut client = GrpcStdioClient::new(channel);
        let mut stream = match client.stream_stdio(()).await {
            Ok(response) => response.into_inner(),
            Err(status) if status.code() == tonic::Code::Unimplemented => {
                tracing::debug!(
                    plugin = &*plugin,
                    "plugin does not serve plugin.GRPCStdio (go-plugin < 1.1 or tether); nothing to drain"
                );
                return;
            }
            // go-plugin sends the response headers with the first output, so a quiet plugin's
            // stream only "fails to open" when the connection closes at shutdown.
            Err(status) => {
                tracing::debug!(plugin = &*plugin, %status, "the plugin's stdio stream ended");
                return;
            }
        };
        loop {
            match stream.message().await {
                Ok(Some(data)) => {
                    let text = String::from_utf8_lossy(&data.data);
                    for line in text.lines() {
                        if data.channel == StdioChannel::Stdout as i32 {
                            tracing::info!(plugin = &*plugin, line, "plugin stdout (grpc stdio)");
                        } else {
                            tracing::debug!(plugin = &*plugin, line, "plugin stderr (grpc stdio)");
                        }
                    }
                }
                Ok(None) => break,
                Err(status) => {
                    tracing::debug!(plugin = &*plugin, %status, "the plugin's stdio stream ended");
                    break;
                }
            }
        }
    });
}
