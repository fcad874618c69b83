//! Draining a plugin's stdout and stderr so it can never block on a full pipe, logging what it
//! prints, and keeping the tail of its stderr for error messages.

pub(crate) mod limits;
pub(crate) mod lines;
pub(crate) mod plugin_log;
pub(crate) mod sink;
pub(crate) mod stdio;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tether_proto::text::escape;
use tether_transport::internal::lock;

use tokio::io::AsyncRead;
use tokio::sync::watch;

use crate::launch::output::sink::{OutputLine, OutputSink, OutputSource};
pub(crate) use lines::{Line, LineReader};
use plugin_log::{LogLevel, LogRecord};

/// Output lines after the handshake are logged in pieces of at most this many bytes (go-plugin
/// splits at 64 KiB too), so a plugin that never prints a newline cannot make the host buffer
/// without bound.
pub const MAX_LOG_LINE_LEN: usize = 64 * 1024;

/// The `tracing` target of a plugin's output lines (stderr, stdout after the handshake,
/// GRPCStdio), so hosts can filter them
/// (`RUST_LOG=tether_broker::plugin=warn`).
pub const PLUGIN_LOG_TARGET: &str = "tether_broker::plugin";

/// Emits a plugin's parsed log line as a `tracing` event at its level, with fields `plugin`,
/// `pid`, `module`, `timestamp` (the plugin's), `fields` (its other key/value pairs) and
/// `source` (`stderr` or `grpc-stdio`). Everything the plugin wrote is
/// [escaped](tether_proto::text) for a terminal.
pub(crate) fn emit(plugin: &str, pid: u32, source: &'static str, record: &LogRecord) {
    let module = record.module.as_deref().map(escape);
    let timestamp = record.timestamp.as_deref().map(escape);
    macro_rules! at {
        ($level:expr) => {
            tracing::event!(
                target: PLUGIN_LOG_TARGET,
                $level,
                plugin,
                pid,
                source,
                module = module.as_ref().map(tracing::field::display),
                timestamp = timestamp.as_ref().map(tracing::field::display),
                fields = %escape(&record.fields),
                "{}",
                escape(&record.message)
            )
        };
    }
    match record.level {
        LogLevel::Trace => at!(tracing::Level::TRACE),
        LogLevel::Debug => at!(tracing::Level::DEBUG),
        LogLevel::Info => at!(tracing::Level::INFO),
        LogLevel::Warn => at!(tracing::Level::WARN),
        LogLevel::Error => at!(tracing::Level::ERROR),
    }
}

/// Hands one line of a plugin's output to the user's sink as it was written, or else to
/// `tracing`, escaped: stderr lines through [`emit`], stdout lines at info.
pub(crate) fn deliver(
    sink: Option<&OutputSink>,
    plugin: &Arc<str>,
    pid: u32,
    source: OutputSource,
    record: LogRecord,
) {
    if let Some(sink) = sink {
        sink.send(OutputLine {
            plugin: Arc::clone(plugin),
            pid,
            source,
            level: record.level,
            message: record.message,
            module: record.module,
            timestamp: record.timestamp,
            fields: record.fields,
        });
        return;
    }
    let plugin = &**plugin;
    match source {
        OutputSource::Stdout => {
            tracing::info!(plugin, line = %escape(&record.message), "plugin stdout");
        }
        OutputSource::GrpcStdioStdout => tracing::info!(
            target: PLUGIN_LOG_TARGET,
            plugin,
            pid,
            source = "grpc-stdio",
            "stdout: {}",
            escape(&record.message)
        ),
        OutputSource::Stderr => emit(plugin, pid, "stderr", &record),
        OutputSource::GrpcStdioStderr => emit(plugin, pid, "grpc-stdio", &record),
    }
}

/// A stdout line as a record: info, the text as message.
pub(crate) fn stdout_record(line: &[u8]) -> LogRecord {
    LogRecord {
        level: LogLevel::Info,
        message: String::from_utf8_lossy(line).trim_end().to_owned(),
        module: None,
        timestamp: None,
        fields: String::new(),
    }
}

/// The last bytes a plugin wrote to stderr: a ring buffer of fixed capacity.
#[derive(Debug)]
pub(crate) struct StderrTail {
    buf: VecDeque<u8>,
    capacity: usize,
    dropped: u64,
}

impl StderrTail {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            buf: VecDeque::with_capacity(capacity),
            capacity,
            dropped: 0,
        }
    }

    /// Appends bytes, forgetting the oldest ones beyond the capacity.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        let bytes = if bytes.len() > self.capacity {
            self.dropped += (bytes.len() - self.capacity) as u64;
            &bytes[bytes.len() - self.capacity..]
        } else {
            bytes
        };
        let overflow = (self.buf.len() + bytes.len()).saturating_sub(self.capacity);
        self.buf.drain(..overflow);
        self.dropped += overflow as u64;
        self.buf.extend(bytes);
    }

    /// The kept bytes as text, starting at a line boundary when older output was dropped (the
    /// partial first line is replaced by `…`).
    pub(crate) fn snapshot(&self) -> String {
        let (a, b) = self.buf.as_slices();
        let bytes = [a, b].concat();
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if self.dropped > 0 {
            match text.find('\n') {
                Some(i) if i + 1 < text.len() => text = format!("…{}", &text[i + 1..]),
                _ => text.insert(0, '…'),
            }
        }
        text.trim_end().to_owned()
    }
}

/// A [`StderrTail`] shared between its drain task and the client.
pub(crate) type SharedTail = Arc<Mutex<StderrTail>>;

/// Reads a snapshot of a shared tail (a poisoned lock still holds valid bytes).
pub(crate) fn snapshot(tail: &SharedTail) -> String {
    lock(tail).snapshot()
}

/// Drains `stderr` until it ends: logs each line at its parsed level (see [`plugin_log`]) and
/// keeps the tail. Lines longer than [`MAX_LOG_LINE_LEN`] are logged in pieces, so memory stays
/// bounded whatever the plugin writes. The returned receiver turns `true` when stderr has ended.
pub(crate) fn drain_stderr<R>(
    stderr: R,
    plugin: Arc<str>,
    pid: u32,
    tail: SharedTail,
    sink: Option<OutputSink>,
) -> watch::Receiver<bool>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let (done_tx, done_rx) = watch::channel(false);
    tokio::spawn(async move {
        let mut reader = LineReader::new(stderr, MAX_LOG_LINE_LEN);
        loop {
            match reader.next_line().await {
                Ok(Some(line)) => {
                    {
                        let mut tail = lock(&tail);
                        tail.push(line.bytes());
                        if matches!(line, Line::Complete(_)) {
                            tail.push(b"\n");
                        }
                    }
                    let text = String::from_utf8_lossy(line.bytes());
                    let record = plugin_log::parse(&text);
                    deliver(sink.as_ref(), &plugin, pid, OutputSource::Stderr, record);
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(plugin = &*plugin, error = %e, "reading plugin stderr failed");
                    break;
                }
            }
        }
        done_tx.send_replace(true);
    });
    done_rx
}

/// Drains the rest of `stdout` after the handshake, logging each line at info level.
pub(crate) fn drain_stdout<R>(
    mut reader: LineReader<R>,
    plugin: Arc<str>,
    pid: u32,
    sink: Option<OutputSink>,
) where
    R: AsyncRead + Unpin + Send + 'static,
{
    reader.set_max(MAX_LOG_LINE_LEN);
    tokio::spawn(async move {
        loop {
            match reader.next_line().await {
                Ok(Some(line)) => deliver(
                    sink.as_ref(),
                    &plugin,
                    pid,
                    OutputSource::Stdout,
                    stdout_record(line.bytes()),
                ),
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(plugin = &*plugin, error = %e, "reading plugin stdout failed");
                    break;
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stderr_tail_keeps_everything_below_its_capacity() {
        let mut tail = StderrTail::new(64);
        tail.push(b"first\n");
        tail.push(b"second\n");
        assert_eq!(tail.snapshot(), "first\nsecond");
    }

    #[test]
    fn the_stderr_tail_keeps_only_the_last_bytes_from_a_line_boundary() {
        let mut tail = StderrTail::new(16);
        tail.push(b"aaaaaaaaaa\n");
        tail.push(b"bbbb\n");
        tail.push(b"cccc\n");
        // 21 bytes pushed, 16 kept: "aaaaa\nbbbb\ncccc\n" → starts at the first whole line.
        assert_eq!(tail.snapshot(), "…bbbb\ncccc");
    }

    #[test]
    fn the_stderr_tail_keeps_the_end_of_a_single_huge_write() {
        let mut tail = StderrTail::new(8);
        tail.push(&[b'x'; 1000]);
        tail.push(b"end");
        assert_eq!(tail.buf.len(), 8);
        assert_eq!(tail.snapshot(), "…xxxxxend");
    }

    #[tokio::test]
    async fn draining_stderr_fills_the_tail_and_reports_the_end() {
        let tail: SharedTail = Arc::new(Mutex::new(StderrTail::new(1024)));
        let mut done = drain_stderr(
            &b"warn: x\nerror: y\n"[..],
            "p".into(),
            1,
            tail.clone(),
            None,
        );
        done.wait_for(|d| *d).await.unwrap();
        assert_eq!(snapshot(&tail), "warn: x\nerror: y");
    }
}
