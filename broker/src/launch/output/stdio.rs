//! Draining go-plugin's `GRPCStdio` stream.
//!
//! go-plugin (≥ 1.1) plugins redirect their `os.Stdout`/`os.Stderr` after the handshake into
//! `plugin.GRPCStdio/StreamStdio`, and tether plugins their fd 1, through a bounded
//! channel: a host that never opens the stream can block a plugin that prints. The host
//! therefore opens it right after connecting and drains it continuously: stdout lines are
//! logged at info, stderr lines at their parsed level (like the stderr pipe). Plugins without
//! the service (go-plugin 1.0.x) answer `Unimplemented` and the host carries on.

use std::sync::Arc;

use tether_proto::plugin::grpc_stdio_client::GrpcStdioClient;
use tether_proto::plugin::stdio_data::Channel as StdioChannel;
use tonic::transport::Channel;

use crate::launch::output::MAX_LOG_LINE_LEN;
use crate::launch::output::plugin_log;
use crate::launch::output::sink::{OutputSink, OutputSource};
use crate::launch::output::{deliver, stdout_record};

/// Splits a byte stream that arrives in arbitrary chunks into lines of at most `max` bytes.
#[derive(Debug)]
pub(crate) struct LineSplitter {
    partial: Vec<u8>,
    max: usize,
}

impl LineSplitter {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            partial: Vec::new(),
            max: max.max(1),
        }
    }

    /// Adds `bytes`; calls `line` for every complete line (without `\n`) and for every piece of
    /// `max` bytes of an overlong one.
    pub(crate) fn push(&mut self, mut bytes: &[u8], mut line: impl FnMut(&[u8])) {
        while !bytes.is_empty() {
            let room = self.max - self.partial.len();
            let window = &bytes[..bytes.len().min(room + 1)];
            match window.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    self.partial.extend_from_slice(&bytes[..i]);
                    line(&self.partial);
                    self.partial.clear();
                    bytes = &bytes[i + 1..];
                }
                None if bytes.len() >= room => {
                    self.partial.extend_from_slice(&bytes[..room]);
                    line(&self.partial);
                    self.partial.clear();
                    bytes = &bytes[room..];
                }
                None => {
                    self.partial.extend_from_slice(bytes);
                    bytes = &[];
                }
            }
        }
    }

    /// Emits what is left (a last line without newline).
    pub(crate) fn finish(&mut self, mut line: impl FnMut(&[u8])) {
        if !self.partial.is_empty() {
            line(&self.partial);
            self.partial.clear();
        }
    }
}

/// Opens the stdio stream and drains it in a background task until it ends.
pub(crate) fn drain(channel: Channel, plugin: Arc<str>, pid: u32, sink: Option<OutputSink>) {
    tokio::spawn(async move {
        let name = Arc::clone(&plugin);
        let sink = sink.as_ref();
        let log_stdout = |line: &[u8]| {
            deliver(
                sink,
                &name,
                pid,
                OutputSource::GrpcStdioStdout,
                stdout_record(line),
            );
        };
        let log_stderr = |line: &[u8]| {
            let text = String::from_utf8_lossy(line);
            let record = plugin_log::parse(&text);
            deliver(sink, &name, pid, OutputSource::GrpcStdioStderr, record);
        };
        let plugin = &*plugin;
        let mut client = GrpcStdioClient::new(channel);
        let mut stream = match client.stream_stdio(()).await {
            Ok(response) => response.into_inner(),
            Err(status) if status.code() == tonic::Code::Unimplemented => {
                tracing::debug!(
                    plugin,
                    "plugin does not serve plugin.GRPCStdio (go-plugin < 1.1); its output arrives on the pipes"
                );
                return;
            }
            // go-plugin sends the response headers with the first output, so a quiet plugin's
            // stream only "fails to open" when the connection closes at shutdown.
            Err(status) => {
                tracing::debug!(plugin, %status, "the plugin's stdio stream ended");
                return;
            }
        };
        let mut stdout = LineSplitter::new(MAX_LOG_LINE_LEN);
        let mut stderr = LineSplitter::new(MAX_LOG_LINE_LEN);
        loop {
            match stream.message().await {
                Ok(Some(data)) if data.channel == StdioChannel::Stdout as i32 => {
                    stdout.push(&data.data, log_stdout);
                }
                Ok(Some(data)) => stderr.push(&data.data, log_stderr),
                Ok(None) => break,
                Err(status) => {
                    tracing::debug!(plugin, %status, "the plugin's stdio stream ended");
                    break;
                }
            }
        }
        stdout.finish(log_stdout);
        stderr.finish(log_stderr);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]], max: usize) -> Vec<String> {
        let mut splitter = LineSplitter::new(max);
        let mut lines = Vec::new();
        for chunk in chunks {
            splitter.push(chunk, |l| {
                lines.push(String::from_utf8_lossy(l).into_owned())
            });
        }
        splitter.finish(|l| lines.push(String::from_utf8_lossy(l).into_owned()));
        lines
    }

    #[test]
    fn lines_split_across_chunks_are_joined() {
        assert_eq!(
            split(&[b"hel", b"lo\nwor", b"ld\n"], 64),
            ["hello", "world"]
        );
        assert_eq!(split(&[b"a\n\nb"], 64), ["a", "", "b"]);
    }

    #[test]
    fn overlong_lines_come_out_in_pieces_of_the_maximum() {
        assert_eq!(split(&[b"abcdefg", b"h\n"], 3), ["abc", "def", "gh"]);
        assert_eq!(split(&[b"abc\n"], 3), ["abc"]);
    }
}
