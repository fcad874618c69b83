//! Where a plugin's output goes: `tracing` by default, or a sink the user provides
//! ([`PluginClientBuilder::output_sink`](crate::PluginClientBuilder::output_sink)).

use std::fmt;
use std::sync::Arc;

pub use crate::launch::output::plugin_log::LogLevel;

/// Where a line of a plugin's output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OutputSource {
    /// Its stdout pipe, after the handshake line.
    Stdout,
    /// Its stderr pipe.
    Stderr,
    /// The stdout channel of `plugin.GRPCStdio`.
    GrpcStdioStdout,
    /// The stderr channel of `plugin.GRPCStdio`.
    GrpcStdioStderr,
}

impl fmt::Display for OutputSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
            Self::GrpcStdioStdout => "grpc-stdio stdout",
            Self::GrpcStdioStderr => "grpc-stdio stderr",
        })
    }
}

/// One line a plugin printed or logged, parsed: stderr lines as hclog JSON or `[LEVEL]` text
/// (else debug), stdout lines at info with the text as message. Lines longer than
/// [`MAX_LOG_LINE_LEN`](crate::launch::MAX_LOG_LINE_LEN) arrive in pieces.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutputLine {
    /// The plugin's name.
    pub plugin: Arc<str>,
    /// Its process id.
    pub pid: u32,
    /// Where the line came from.
    pub source: OutputSource,
    /// Its level.
    pub level: LogLevel,
    /// The message (the whole line for stdout and unparsed text).
    pub message: String,
    /// hclog's `@module`, if any.
    pub module: Option<String>,
    /// hclog's `@timestamp`, as sent.
    pub timestamp: Option<String>,
    /// Other hclog keys, `key=value` separated by spaces, in the line's order.
    pub fields: String,
}

/// Receives every line of a plugin's output instead of `tracing`. Called from the host's
/// draining tasks, one line at a time per source: it must return quickly (hand the line to a
/// channel for slow work), or the plugin's output backs up.
#[derive(Clone)]
pub struct OutputSink(Arc<dyn Fn(OutputLine) + Send + Sync>);

impl OutputSink {
    /// A sink calling `f` for every line.
    pub fn new(f: impl Fn(OutputLine) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    pub(crate) fn send(&self, line: OutputLine) {
        (self.0)(line);
    }
}

impl fmt::Debug for OutputSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutputSink").finish_non_exhaustive()
    }
}
