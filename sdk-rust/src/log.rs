//! The default `tracing` subscriber: one line per event on stderr, `[LEVEL]` first.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Filter used when `RUST_LOG` is unset or invalid.
const DEFAULT_FILTER: &str = "info";

/// Installs the subscriber unless one is installed already.
pub(crate) fn install_stderr_logger() {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    // Fails only when a global subscriber exists, which is then the author's choice.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(filter)
        .event_format(BracketedLevel)
        .try_init();
}

/// `[INFO] target: message key=value`: go-plugin hosts read the bracketed prefix as the
/// level of a plugin's non-JSON stderr line.
struct BracketedLevel;

impl<S, N> FormatEvent<S, N> for BracketedLevel
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let level = match *meta.level() {
            Level::TRACE => "TRACE",
            Level::DEBUG => "DEBUG",
            Level::INFO => "INFO",
            Level::WARN => "WARN",
            Level::ERROR => "ERROR",
        };
        write!(writer, "[{level}] {}: ", meta.target())?;
        ctx.format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
