//! Standard output, where a reader that goes away (`tether inspect … | head -1`) ends the
//! command quietly instead of a panic.
//!
//! `println!` panics when stdout is a closed pipe (Rust ignores `SIGPIPE`, so the write fails
//! with `EPIPE`). Restoring `SIGPIPE` would also kill the host when a plugin's socket breaks;
//! so every line goes through [`line()`] (the [`outln!`] macro), whose error the command
//! returns like any other: the plugin is still shut down, then `tether` exits with
//! [`EXIT_BROKEN_PIPE`](crate::error::EXIT_BROKEN_PIPE) and prints nothing.

use std::io::Write as _;

use tether_proto::text::{escape_lines, is_acted_on};

use crate::error::CliError;

/// `println!`, returning [`CliError::Output`] instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}
pub(crate) use outln;

/// Writes one line to stdout (line-buffered, so an error shows at this line),
/// [escaped](tether_proto::text) for a terminal: what the commands print quotes plugins (their
/// reflection names, health messages, conformance findings, step results).
pub(crate) fn line(args: std::fmt::Arguments<'_>) -> Result<(), CliError> {
    let text = args.to_string();
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_fmt(format_args!("{}\n", escape_lines(&text)))
        .and_then(|()| stdout.flush())
        .map_err(CliError::Output)
}

/// Writes one line of JSON made by [`json`] to stdout as it is: it holds nothing a terminal
/// acts on already (a response's line may be megabytes long, so it is not scanned twice).
pub(crate) fn json_line(json: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(json.as_bytes())
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush())
        .map_err(CliError::Output)
}

/// `value` as compact JSON in which every character a terminal acts on is a `\uXXXX` escape
/// (serde_json escapes only C0 controls, `"` and `\`; DEL, C1 controls and bidirectional
/// controls would reach the terminal raw). Still valid JSON, with the same value.
pub(crate) fn json(value: &impl serde::Serialize) -> Result<String, serde_json::Error> {
    let mut out = Vec::new();
    value.serialize(&mut serde_json::Serializer::with_formatter(
        &mut out,
        TerminalSafeJson,
    ))?;
    // serde_json writes UTF-8 only (the lossy conversion never replaces anything).
    Ok(String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// serde_json's compact formatter, with [`is_acted_on`] characters escaped in strings.
struct TerminalSafeJson;

impl serde_json::ser::Formatter for TerminalSafeJson {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        // Printable ASCII (base64 of `bytes` fields, most text) needs no look at its chars.
        if fragment.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return writer.write_all(fragment.as_bytes());
        }
        let mut rest = fragment;
        while let Some((at, c)) = rest.char_indices().find(|&(_, c)| is_acted_on(c)) {
            writer.write_all(&rest.as_bytes()[..at])?;
            write!(writer, "\\u{:04x}", u32::from(c))?;
            rest = &rest[at + c.len_utf8()..];
        }
        writer.write_all(rest.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_what_a_terminal_acts_on_and_stays_the_same_value() {
        let value = serde_json::json!({"m": "a\u{1b}]0;t\u{7}\u{7f}\u{9b}2J\u{202e}é日"});
        let text = json(&value).unwrap();
        assert_eq!(text, r#"{"m":"a\u001b]0;t\u0007\u007f\u009b2J\u202eé日"}"#);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            value
        );
    }
}
