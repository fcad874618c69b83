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

use tether_proto::text::escape_lines;
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
    let colour = std::io::stderr().is_terminal() && !no_color;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour);
    // A second initialisation (impossible in this binary) would only be ignored.
    let _ = match format {
        LogFormat::Pretty => builder
            .with_writer(move || TerminalSafe {
                colour,
                stderr: std::io::stderr(),
            })
            .try_init(),
        // JSON escapes every control character in its strings, and what the host library
        // logs of a plugin is escaped already.
        LogFormat::Json => builder.with_writer(std::io::stderr).json().try_init(),
    };
}

/// stderr for human-readable log lines: everything a terminal would act on is
/// [escaped](tether_proto::text) — whichever event quoted it — but the colours the formatter
/// adds itself (`ESC [ … m`, when `colour`).
struct TerminalSafe {
    colour: bool,
    stderr: std::io::Stderr,
}

impl std::io::Write for TerminalSafe {
    /// `buf` is one whole formatted event (the formatter writes each event at once).
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let mut safe = String::with_capacity(text.len());
        let mut rest = &*text;
        while let Some(at) = rest.find('\u{1b}') {
            safe.push_str(&escape_lines(&rest[..at]).to_cow());
            rest = &rest[at..];
            let colour_len = self.colour.then(|| sgr_len(rest)).flatten();
            let taken = colour_len.unwrap_or(1);
            match colour_len {
                Some(_) => safe.push_str(&rest[..taken]),
                None => safe.push_str(&escape_lines(&rest[..taken]).to_cow()),
            }
            rest = &rest[taken..];
        }
        safe.push_str(&escape_lines(rest).to_cow());
        self.stderr.write_all(safe.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.stderr.flush()
    }
}

/// The length of the colour sequence (`ESC [ digits-and-semicolons m`) `text` starts with.
fn sgr_len(text: &str) -> Option<usize> {
    let params = text.strip_prefix("\u{1b}[")?;
    let end = params.find(|c: char| !(c.is_ascii_digit() || c == ';'))?;
    (params.as_bytes()[end] == b'm').then_some(2 + end + 1)
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
    fn only_the_formatters_colours_pass_to_the_terminal() {
        assert_eq!(sgr_len("\u{1b}[2mrest"), Some(4));
        assert_eq!(sgr_len("\u{1b}[1;33mrest"), Some(7));
        for not_a_colour in ["\u{1b}[2J", "\u{1b}]0;t\u{7}", "\u{1b}[", "\u{1b}[6n", "x"] {
            assert_eq!(sgr_len(not_a_colour), None, "{not_a_colour:?}");
        }
    }

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
