//! The default `tracing` subscriber: one hclog-compatible JSON object per event on the
//! plugin's real stderr, so go-plugin hosts (and tether hosts) log it at the right level.
//!
//! ```text
//! {"@level":"warn","@message":"disk almost full","@module":"my_plugin","@timestamp":"2026-11-30T22:14:09.123456Z","free_mb":12}
//! ```

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::sync::OnceLock;

use serde_json::{Map, Value};
use tether_transport::GrpcBroker;
use tether_transport::telemetry::context;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::telemetry;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

/// Filter used when `RUST_LOG` is unset or invalid.
const DEFAULT_FILTER: &str = "info";

/// Where log lines go once fd 2 is captured for `GRPCStdio`: a copy of the original stderr.
static LOG_FILE: OnceLock<File> = OnceLock::new();

/// Sends log lines to `file` (the original stderr) from now on.
pub(crate) fn redirect(file: File) {
    let _ = LOG_FILE.set(file);
}

/// Installs the subscriber unless one is installed already: log lines to stderr, and when the
/// host asked for traces, the OpenTelemetry layer that sends the plugin's spans to the host
/// ([`telemetry`](crate::telemetry)). `RUST_LOG` filters the log lines, not the spans.
pub(crate) fn install_stderr_logger(broker: &GrpcBroker, host_services: bool) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(LogWriter)
        .with_ansi(false)
        .event_format(HclogJson)
        .with_filter(filter);
    let traceparent = std::env::var(context::TRACEPARENT_ENV).ok();
    let spans = telemetry::layer(traceparent.as_deref(), host_services, broker)
        .map(|layer| layer.with_filter(LevelFilter::INFO));
    // Fails only when a global subscriber exists, which is then the author's choice.
    let _ = tracing_subscriber::registry()
        .with(logs)
        .with(spans)
        .try_init();
}

/// The hclog JSON event format as a reusable piece: install it in a subscriber of your own with
/// `tracing_subscriber::fmt().event_format(tether_sdk::HclogJson)` and a stderr writer.
#[derive(Debug, Clone, Copy, Default)]
pub struct HclogJson;

/// Writes to the plugin's real stderr, even after fd 2 has been captured.
#[derive(Debug, Clone, Copy)]
struct LogWriter;

impl<'a> MakeWriter<'a> for LogWriter {
    type Writer = Box<dyn Write + 'a>;

    fn make_writer(&'a self) -> Self::Writer {
        match LOG_FILE.get() {
            Some(file) => Box::new(file),
            None => Box::new(io::stderr()),
        }
    }
}

/// hclog's timestamp: RFC 3339 UTC with exactly six fractional digits (go-plugin hosts parse
/// `2006-01-02T15:04:05.000000Z07:00`).
pub(crate) fn timestamp(now: time::OffsetDateTime) -> String {
    let now = now.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        now.microsecond()
    )
}

/// hclog's level names.
fn level_name(level: Level) -> &'static str {
    match level {
        Level::TRACE => "trace",
        Level::DEBUG => "debug",
        Level::INFO => "info",
        Level::WARN => "warn",
        Level::ERROR => "error",
    }
}

/// Collects an event's fields: `message` becomes `@message`, the rest keep their names.
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(key(field), Value::String(format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(key(field), Value::String(value.to_owned()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(key(field), Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(key(field), Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(key(field), Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(key(field), Value::from(value));
    }
}

fn key(field: &Field) -> String {
    match field.name() {
        "message" => "@message".to_owned(),
        // A user field may not impersonate hclog's own keys.
        name if name.starts_with('@') => format!("_{name}"),
        name => name.to_owned(),
    }
}

/// Renders one event as an hclog JSON line (without the newline).
pub(crate) fn render(
    level: Level,
    module: &str,
    now: time::OffsetDateTime,
    fields: Map<String, Value>,
) -> String {
    let mut object = Map::new();
    object.insert("@level".into(), Value::from(level_name(level)));
    object.insert(
        "@message".into(),
        fields.get("@message").cloned().unwrap_or(Value::from("")),
    );
    object.insert("@module".into(), Value::from(module));
    object.insert("@timestamp".into(), Value::from(timestamp(now)));
    for (k, v) in fields {
        if k != "@message" {
            object.insert(k, v);
        }
    }
    Value::Object(object).to_string()
}

impl<S, N> FormatEvent<S, N> for HclogJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        let line = render(
            *meta.level(),
            meta.target(),
            time::OffsetDateTime::now_utc(),
            fields.0,
        );
        writeln!(writer, "{line}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_have_exactly_six_fractional_digits_in_utc() {
        let t = time::OffsetDateTime::from_unix_timestamp_nanos(1_796_076_849_123_456_789).unwrap();
        assert_eq!(timestamp(t), "2026-11-30T22:14:09.123456Z");
        let whole = time::OffsetDateTime::from_unix_timestamp(1_796_076_849).unwrap();
        assert_eq!(timestamp(whole), "2026-11-30T22:14:09.000000Z");
    }

    #[test]
    fn an_event_renders_as_one_hclog_json_object() {
        let mut fields = Map::new();
        fields.insert("@message".into(), Value::from("disk \"almost\" full\nsoon"));
        fields.insert("free_mb".into(), Value::from(12));
        let t = time::OffsetDateTime::from_unix_timestamp(1_796_076_849).unwrap();
        let line = render(Level::WARN, "my_plugin", t, fields);
        assert!(!line.contains('\n'), "{line}");
        let parsed: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["@level"], "warn");
        assert_eq!(parsed["@message"], "disk \"almost\" full\nsoon");
        assert_eq!(parsed["@module"], "my_plugin");
        assert_eq!(parsed["@timestamp"], "2026-11-30T22:14:09.000000Z");
        assert_eq!(parsed["free_mb"], 12);
    }
}
