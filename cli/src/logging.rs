//! Log output on stderr.

use tracing_subscriber::EnvFilter;

use crate::args::LogFormat;

/// Installs the global subscriber: `RUST_LOG` if set, else a level from the `-v` count.
pub(crate) fn init(format: LogFormat, verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second initialisation (impossible in this binary) would only be ignored.
    let _ = match format {
        LogFormat::Pretty => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
