//! Turning a run's output line into metric values.

use super::counts::MIB;
use super::measurement::{Measurement, Value};
use crate::line::{Line, LineError};
use crate::stats::percentile;

impl Measurement {
    /// The metric values of one run's output line, keyed by [`MetricSpec::id`](super::MetricSpec::id).
    ///
    /// # Errors
    /// A [`LineError`] when the line lacks a key or holds a non-number, or a
    /// [`LineError::NotANumber`] for an impossible value (no samples, zero time).
    pub fn evaluate(&self, line: &Line) -> Result<Vec<(&'static str, Value)>, LineError> {
        let ns = |key: &str| -> Result<Vec<f64>, LineError> {
            Ok(line.numbers(key)?.into_iter().map(|n| n as f64).collect())
        };
        let pct = |samples: &[f64], p: f64, scale: f64, key: &str| {
            percentile(samples, p)
                .map(|v| Value::Number(v / scale))
                .ok_or_else(|| LineError::NotANumber {
                    key: key.to_owned(),
                    value: String::new(),
                })
        };
        let per_second = |count: f64| -> Result<f64, LineError> {
            let elapsed = line.number("elapsed_ns")?;
            if elapsed == 0 {
                return Err(LineError::NotANumber {
                    key: "elapsed_ns".into(),
                    value: "0".into(),
                });
            }
            Ok(count / (elapsed as f64 / 1e9))
        };
        Ok(match self {
            Self::Launch => {
                let s = ns("samples_ns")?;
                vec![
                    ("launch_p50", pct(&s, 0.5, 1e6, "samples_ns")?),
                    ("launch_p90", pct(&s, 0.9, 1e6, "samples_ns")?),
                    ("launch_p99", pct(&s, 0.99, 1e6, "samples_ns")?),
                ]
            }
            Self::Unary { size } => {
                let s = ns("samples_ns")?;
                let [p50, p99] = unary_ids(*size);
                vec![
                    (p50, pct(&s, 0.5, 1e3, "samples_ns")?),
                    (p99, pct(&s, 0.99, 1e3, "samples_ns")?),
                ]
            }
            Self::Rate {
                concurrency,
                multiplex,
            } => {
                let calls = line.number("calls")? as f64;
                let id = if *multiplex {
                    "rate_mux_c64"
                } else {
                    rate_id(*concurrency)
                };
                vec![(id, Value::Number(per_second(calls)?))]
            }
            Self::Payload { size } => {
                let value = match line.text("failed") {
                    Some(code) => Value::Failed(code.to_owned()),
                    None => Value::Number(per_second(line.number("bytes")? as f64)? / 1e6),
                };
                vec![(payload_id(*size), value)]
            }
            Self::PluginRss => vec![(
                "plugin_rss",
                Value::Number(line.number("rss_kb")? as f64 / 1024.0),
            )],
            Self::HostRss => {
                let first = line.number("first_kb")? as f64;
                let last = line.number("last_kb")? as f64;
                let plugins = line.number("plugins")?;
                if plugins < 2 {
                    return Err(LineError::NotANumber {
                        key: "plugins".into(),
                        value: plugins.to_string(),
                    });
                }
                let mut values = vec![(
                    "host_rss_per_plugin",
                    Value::Number((last - first) / (plugins - 1) as f64),
                )];
                // Descriptors: printed by tether's host only.
                if let (Ok(first), Ok(last)) = (line.number("first_fds"), line.number("last_fds")) {
                    let per = (last as f64 - first as f64) / (plugins - 1) as f64;
                    values.push(("host_fds_per_plugin", Value::Number(per)));
                }
                values
            }
            Self::LaunchLayers => {
                let s = ns("samples_ns")?;
                vec![
                    ("launch_layers_p50", pct(&s, 0.5, 1e6, "samples_ns")?),
                    ("launch_layers_p90", pct(&s, 0.9, 1e6, "samples_ns")?),
                ]
            }
            Self::LaunchConfinementOff => {
                let s = ns("samples_ns")?;
                vec![("launch_off_p50", pct(&s, 0.5, 1e6, "samples_ns")?)]
            }
            Self::Callback { mode } => {
                let [plain_id, p50_id, p99_id, over_id] = mode.ids();
                let plain = ns("unary_ns")?;
                let callback = ns("callback_ns")?;
                let plain_p50 = percentile(&plain, 0.5);
                let callback_p50 = percentile(&callback, 0.5);
                let over = match (callback_p50, plain_p50) {
                    (Some(c), Some(p)) if p > 0.0 => Value::Number(c / p),
                    _ => {
                        return Err(LineError::NotANumber {
                            key: "unary_ns".into(),
                            value: String::new(),
                        });
                    }
                };
                vec![
                    (plain_id, pct(&plain, 0.5, 1e3, "unary_ns")?),
                    (p50_id, pct(&callback, 0.5, 1e3, "callback_ns")?),
                    (p99_id, pct(&callback, 0.99, 1e3, "callback_ns")?),
                    (over_id, over),
                ]
            }
            Self::Catalog => {
                let load = ns("load_ns")?;
                let used = ns("use_ns")?;
                let started = ns("started")?;
                vec![
                    ("catalog_load", pct(&load, 0.5, 1e6, "load_ns")?),
                    ("catalog_use", pct(&used, 0.5, 1e6, "use_ns")?),
                    // Every repeat must start the same number; the largest shows a stray start.
                    (
                        "catalog_started",
                        Value::Number(started.iter().copied().fold(0.0, f64::max)),
                    ),
                ]
            }
        })
    }
}

/// Metric ids (p50, p99) of a unary size of [`UNARY_SIZES`](super::UNARY_SIZES).
fn unary_ids(size: u64) -> [&'static str; 2] {
    match size {
        1024 => ["unary_1kib_p50", "unary_1kib_p99"],
        65_536 => ["unary_64kib_p50", "unary_64kib_p99"],
        _ => ["unary_p50", "unary_p99"],
    }
}

fn rate_id(concurrency: u64) -> &'static str {
    match concurrency {
        1 => "rate_c1",
        16 => "rate_c16",
        64 => "rate_c64",
        _ => "rate_other",
    }
}

fn payload_id(size: u64) -> &'static str {
    if size >= 64 * MIB {
        "payload_64mib"
    } else {
        "payload_1mib"
    }
}
