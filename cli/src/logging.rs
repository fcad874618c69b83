//! Log output on stderr.
//!
//! | `-v` count | shown |
//! |---|---|
//! | 0 | warnings and errors (a plugin's too) |
//! | 1 | tether's steps (info) and everything a plugin prints: its plain stderr lines arrive at debug, as go-plugin hosts log them, and are shown from here on |
//! | 2 | debug |
//! | 3 | trace |
//!
//! The libraries under the transport ([`QUIET_DEPENDENCIES`]: TLS, HTTP/2, gRPC frames) log
//! only warnings at any count: their frames would drown the plugin's lines. `RUST_LOG`
//! replaces all of this (`RUST_LOG=trace` shows everything). The host library's warning about
//! each bad manifest is off: the commands print those themselves, once.
//!
//! Colour only when stderr is a terminal and `NO_COLOR` is unset or empty
//! (<https://no-color.org>).

use std::io::IsTerminal as _;

use tracing_subscriber::EnvFilter;

use crate::args::LogFormat;

/// `tracing` targets kept at `warn` unless `RUST_LOG` says otherwise.
pub(crate) const QUIET_DEPENDENCIES: &[&str] = &[
    "h2",
    "hyper",
    "hyper_util",
    "rustls",
    "tokio_rustls",
    "tokio_util",
    "tokio_yamux",
    "tonic",
    "tower",
];

/// The environment variable that turns colour off when set to anything but the empty string.
pub(crate) const NO_COLOR_ENV: &str = "NO_COLOR";

/// Installs the global subscriber: `RUST_LOG` if set, else [`directives`] for the `-v` count.
pub(crate) fn init(format: LogFormat, verbose: u8) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(directives(verbose)));
    let no_color = std::env::var_os(NO_COLOR_ENV).is_some_and(|v| !v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal() && !no_color)
        .with_writer(std::io::stderr);
    // A second initialisation (impossible in this binary) would only be ignored.
    let _ = match format {
        LogFormat::Pretty => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// The filter for `verbose` (the `-v` count), as `RUST_LOG` would spell it.
pub(crate) fn directives(verbose: u8) -> String {
    // Every command that loads a catalog prints its bad manifests itself, once.
    let bad_manifests = format!("{}=off", tether_broker::catalog::BAD_MANIFEST_LOG_TARGET);
    let (level, plugin) = match verbose {
        0 => return format!("warn,{bad_manifests}"),
        1 => ("info", "debug"),
        2 => ("debug", "debug"),
        _ => ("trace", "trace"),
    };
    let mut directives = format!(
        "{level},{}={plugin}",
        tether_broker::launch::PLUGIN_LOG_TARGET
    );
    for target in QUIET_DEPENDENCIES {
        directives.push_str(&format!(",{target}=warn"));
    }
    directives.push_str(&format!(",{bad_manifests}"));
    directives
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_v_shows_plugin_debug_lines_and_no_count_shows_dependency_frames() {
        assert_eq!(
            directives(0),
            "warn,tether_broker::catalog::bad_manifest=off"
        );
        let one = directives(1);
        assert!(
            one.starts_with("info,tether_broker::plugin=debug,"),
            "{one}"
        );
        for v in 1..=5 {
            let d = directives(v);
            for target in ["h2", "rustls", "hyper", "tonic", "tower"] {
                assert!(d.contains(&format!(",{target}=warn")), "{v}: {d}");
            }
            assert!(EnvFilter::try_new(&d).is_ok(), "{d}");
        }
    }
}
