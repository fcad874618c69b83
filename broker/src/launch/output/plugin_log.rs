//! Parsing a plugin's stderr lines into log records (no IO): hclog JSON (`@level`,
//! `@message`, `@timestamp`, `@module`, other keys as fields), or text with a `[LEVEL]` prefix,
//! else plain text at debug level — as go-plugin hosts do.

use std::fmt::Write as _;

/// The level of a plugin's log line (hclog's levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum LogLevel {
    /// `trace`.
    Trace,
    /// `debug`; also lines that are neither hclog JSON nor `[LEVEL]` text.
    Debug,
    /// `info`; also stdout lines.
    Info,
    /// `warn` / `warning`.
    Warn,
    /// `error` / `err`.
    Error,
}

impl LogLevel {
    fn parse(text: &str) -> Option<Self> {
        Some(match text.trim().to_ascii_lowercase().as_str() {
            "trace" => Self::Trace,
            "debug" => Self::Debug,
            "info" => Self::Info,
            "warn" | "warning" => Self::Warn,
            "error" | "err" => Self::Error,
            _ => return None,
        })
    }
}

/// One parsed stderr line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogRecord {
    pub(crate) level: LogLevel,
    pub(crate) message: String,
    /// hclog's `@module`, if any.
    pub(crate) module: Option<String>,
    /// hclog's `@timestamp`, as sent.
    pub(crate) timestamp: Option<String>,
    /// Other keys, `key=value` separated by spaces (strings in quotes, other JSON values as
    /// JSON), in the line's order; as the plugin wrote them (escaped where they are shown).
    pub(crate) fields: String,
}

/// Parses one line (without its newline).
pub(crate) fn parse(line: &str) -> LogRecord {
    let trimmed = line.trim_end_matches(['\r', '\n']);
    if trimmed.trim_start().starts_with('{')
        && let Some(record) = parse_json(trimmed)
    {
        return record;
    }
    parse_text(trimmed)
}

fn parse_json(line: &str) -> Option<LogRecord> {
    let serde_json::Value::Object(map) = serde_json::from_str(line).ok()? else {
        return None;
    };
    let level = map
        .get("@level")
        .and_then(|v| v.as_str())
        .and_then(LogLevel::parse)
        .unwrap_or(LogLevel::Debug);
    let text = |key: &str| map.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    let mut fields = String::new();
    for (key, value) in &map {
        if key.starts_with('@') {
            continue;
        }
        if !fields.is_empty() {
            fields.push(' ');
        }
        match value {
            serde_json::Value::String(s) => {
                let _ = write!(fields, "{key}=\"{s}\"");
            }
            other => {
                let _ = write!(fields, "{key}={other}");
            }
        }
    }
    Some(LogRecord {
        level,
        message: text("@message").unwrap_or_default(),
        module: text("@module"),
        timestamp: text("@timestamp"),
        fields,
    })
}

/// `[LEVEL] rest` (after optional leading text such as a timestamp, as go-plugin accepts) or
/// plain text at debug.
fn parse_text(line: &str) -> LogRecord {
    let plain = || LogRecord {
        level: LogLevel::Debug,
        message: line.to_owned(),
        module: None,
        timestamp: None,
        fields: String::new(),
    };
    let Some(open) = line.find('[') else {
        return plain();
    };
    let Some(close) = line[open..].find(']').map(|i| open + i) else {
        return plain();
    };
    let Some(level) = LogLevel::parse(&line[open + 1..close]) else {
        return plain();
    };
    LogRecord {
        level,
        message: line[close + 1..].trim_start().to_owned(),
        module: None,
        timestamp: None,
        fields: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hclog_json_line_gives_level_message_module_timestamp_and_fields() {
        let record = parse(
            r#"{"@level":"warn","@message":"disk almost full","@module":"counter","@timestamp":"2026-11-30T22:14:09.123456Z","free_mb":12,"path":"/var"}"#,
        );
        assert_eq!(record.level, LogLevel::Warn);
        assert_eq!(record.message, "disk almost full");
        assert_eq!(record.module.as_deref(), Some("counter"));
        assert_eq!(
            record.timestamp.as_deref(),
            Some("2026-11-30T22:14:09.123456Z")
        );
        assert_eq!(record.fields, r#"free_mb=12 path="/var""#);
    }

    #[test]
    fn bracketed_levels_are_recognised_with_or_without_a_prefix() {
        let record = parse("[ERROR] plugin failed: boom");
        assert_eq!(record.level, LogLevel::Error);
        assert_eq!(record.message, "plugin failed: boom");
        let record = parse("2026/11/30 22:14:09 [INFO] started");
        assert_eq!(record.level, LogLevel::Info);
        assert_eq!(record.message, "started");
        assert_eq!(parse("[WARN] x").level, LogLevel::Warn);
        assert_eq!(parse("[TRACE] x").level, LogLevel::Trace);
    }

    #[test]
    fn anything_else_is_debug_text() {
        for line in [
            "panic: oh no",
            "[not a level] x",
            "{not json",
            "[1, 2]",
            r#"{"@level":"shout","@message":"m"}"#,
        ] {
            let record = parse(line);
            assert_eq!(record.level, LogLevel::Debug, "{line}");
        }
        assert_eq!(parse("panic: oh no").message, "panic: oh no");
    }
}
