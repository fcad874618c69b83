//! What is measured: the systems, the measurements each program run makes, the metrics they
//! yield, and how many calls each takes.
//!
//! A new metric is a new [`Measurement`] variant with its arguments and evaluation, plus its
//! [`MetricSpec`] rows. A new callback mode is a new [`CallbackMode`]
//! variant: its host flag in [`CallbackMode::host_args`], its metric ids in
//! [`CallbackMode::ids`], its rows in [`METRICS`] and its entry in [`CallbackMode::ALL`].

use std::path::PathBuf;

use crate::line::{Line, LineError};
use crate::stats::percentile;

/// One system under test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct System {
    /// Short id used in `bench-results.json`: `tether`, `go18`, `go101`, `floor`.
    pub id: &'static str,
    /// Column heading in `BENCHMARKS.md`.
    pub label: String,
    /// How to run it.
    pub kind: SystemKind,
}

/// How a system runs a measurement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SystemKind {
    /// A KV host's `measure` subcommand with `KV_PLUGIN` set to a KV plugin (tether's
    /// `kv-bench`/`kv-plugin` or go-plugin's `kvhost`/`kvplugin`).
    KvHost {
        /// The host program.
        host: PathBuf,
        /// The plugin program.
        plugin: PathBuf,
        /// The counter host and plugin (go-plugin's `examples/bidirectional` contract) for the
        /// callback measurement; `None` leaves it out.
        counter: Option<CounterPrograms>,
        /// Whether the host is tether's, with the measurements only tether has (lazy catalog,
        /// confinement off).
        tether: bool,
    },
    /// The raw two-process unix-socket floor (`pingpong`).
    Floor {
        /// The `pingpong` program.
        pingpong: PathBuf,
    },
}

/// A counter host and plugin: `COUNTER_PLUGIN=<plugin> <host> <args…> measure callback …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterPrograms {
    /// The host program (`counter-bench`, go-plugin's `counterhost`).
    pub host: PathBuf,
    /// The plugin program.
    pub plugin: PathBuf,
    /// Host options before `measure`, e.g. `--plaintext` for go-plugin 1.0.1, whose broker
    /// dial-backs fail under AutoMTLS.
    pub host_args: Vec<String>,
    /// Whether the host takes `--multiplex` (go-plugin's multiplexed broker: tether and
    /// go-plugin ≥ 1.6, not 1.0.1).
    pub multiplex: bool,
}

/// How many calls, launches and rounds each measurement takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Alternating rounds.
    pub rounds: u32,
    /// Launches per round (`launch`).
    pub launches: u64,
    /// Timed sequential calls per round (`unary`).
    pub unary_calls: u64,
    /// Timed calls per concurrency level per round (`rate`).
    pub rate_calls: u64,
    /// Untimed calls before `unary` and `rate`.
    pub warmup: u64,
    /// Timed 1 MiB round trips per round.
    pub rounds_1mib: u64,
    /// Timed 64 MiB round trips per round.
    pub rounds_64mib: u64,
    /// Live plugins for the host-RSS measurement.
    pub live_plugins: u64,
    /// Timed (plain call, callback call) pairs per round.
    pub callback_pairs: u64,
    /// Untimed pairs before them.
    pub callback_warmup: u64,
    /// Manifests in the lazy catalog.
    pub catalog_manifests: u64,
    /// Plugins of the catalog used.
    pub catalog_used: u64,
    /// Catalog loads per round.
    pub catalog_repeat: u64,
}

impl Counts {
    /// The full benchmark: [`DEFAULT_ROUNDS`] rounds.
    pub const FULL: Self = Self {
        rounds: DEFAULT_ROUNDS,
        launches: 40,
        unary_calls: 5_000,
        rate_calls: 10_000,
        warmup: 100,
        rounds_1mib: 50,
        rounds_64mib: 3,
        live_plugins: 100,
        callback_pairs: 1_000,
        callback_warmup: 20,
        catalog_manifests: 1_000,
        catalog_used: 2,
        catalog_repeat: 5,
    };

    /// A smoke run (`--quick`): every measurement runs, with tiny counts; numbers are not
    /// meaningful.
    pub const QUICK: Self = Self {
        rounds: 1,
        launches: 2,
        unary_calls: 50,
        rate_calls: 200,
        warmup: 5,
        rounds_1mib: 2,
        rounds_64mib: 1,
        live_plugins: 3,
        callback_pairs: 5,
        callback_warmup: 1,
        catalog_manifests: 1_000,
        catalog_used: 2,
        catalog_repeat: 1,
    };
}

/// Rounds of the full benchmark. Each round runs every measurement on every system, the
/// systems' order rotating from round to round; the report gives the median round.
pub const DEFAULT_ROUNDS: u32 = 3;

/// 1 MiB.
pub const MIB: u64 = 1024 * 1024;

/// Concurrency levels of the calls/s measurement.
pub const CONCURRENCY_LEVELS: [u64; 3] = [1, 16, 64];

/// One program run, yielding one or more metric values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measurement {
    /// Spawn → first call done, repeatedly.
    Launch,
    /// Sequential 64-byte calls.
    Unary,
    /// 64-byte calls over this many concurrent callers.
    Rate {
        /// Concurrent callers.
        concurrency: u64,
    },
    /// Request/response round trips carrying this many bytes each way.
    Payload {
        /// Bytes per message.
        size: u64,
    },
    /// The plugin's resident memory after one call.
    PluginRss,
    /// The host's memory growth per live plugin.
    HostRss,
    /// Plain calls interleaved with calls carrying one callback through the broker.
    Callback {
        /// The broker mode.
        mode: CallbackMode,
    },
    /// Spawn → first call done with confinement off (tether only; [`Launch`](Self::Launch)
    /// is confinement `enforce`, tether's default).
    LaunchConfinementOff,
    /// A lazy catalog: load many manifests, use a few (tether only).
    Catalog,
}

/// How the host's broker carries callbacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackMode {
    /// go-plugin's default: a listener and a connection per brokered service.
    Default,
    /// go-plugin's multiplexed broker (`PLUGIN_MULTIPLEX_GRPC`): every callback is a yamux
    /// stream on the one connection to the plugin.
    Multiplexed,
}

impl CallbackMode {
    /// Every mode, in report order.
    pub const ALL: &[Self] = &[Self::Default, Self::Multiplexed];

    /// Host options selecting the mode (before `measure`).
    #[must_use]
    pub fn host_args(self) -> &'static [&'static str] {
        match self {
            Self::Default => &[],
            Self::Multiplexed => &["--multiplex"],
        }
    }

    /// Metric ids: (plain call p50, callback p50, callback p99, callback ÷ plain call).
    #[must_use]
    pub fn ids(self) -> [&'static str; 4] {
        match self {
            Self::Default => [
                "callback_plain_p50",
                "callback_p50",
                "callback_p99",
                "callback_over_plain",
            ],
            Self::Multiplexed => [
                "callback_mux_plain_p50",
                "callback_mux_p50",
                "callback_mux_p99",
                "callback_mux_over_plain",
            ],
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Multiplexed => "multiplexed",
        }
    }
}

/// A metric value from one round.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A number in the metric's unit.
    Number(f64),
    /// The system could not do it; the gRPC code name (e.g. `ResourceExhausted`).
    Failed(String),
}

impl Measurement {
    /// Every measurement, in the order a round runs them.
    #[must_use]
    pub fn all() -> Vec<Self> {
        let mut all = vec![Self::Launch, Self::Unary];
        all.extend(
            CONCURRENCY_LEVELS
                .iter()
                .map(|&concurrency| Self::Rate { concurrency }),
        );
        all.extend([
            Self::Payload { size: MIB },
            Self::Payload { size: 64 * MIB },
            Self::PluginRss,
            Self::HostRss,
        ]);
        all.extend(
            CallbackMode::ALL
                .iter()
                .map(|&mode| Self::Callback { mode }),
        );
        all.extend([Self::LaunchConfinementOff, Self::Catalog]);
        all
    }

    /// A short name for progress messages.
    #[must_use]
    pub fn name(&self) -> String {
        match self {
            Self::Launch => "launch".into(),
            Self::Unary => "unary".into(),
            Self::Rate { concurrency } => format!("rate c={concurrency}"),
            Self::Payload { size } => format!("payload {} MiB", size / MIB),
            Self::PluginRss => "plugin-rss".into(),
            Self::HostRss => "host-rss".into(),
            Self::Callback { mode } => format!("callback {}", mode.name()),
            Self::LaunchConfinementOff => "launch sandbox=off".into(),
            Self::Catalog => "catalog".into(),
        }
    }

    /// Whether `kind` can run this measurement (the floor has no concurrency, hosting or
    /// callbacks; the catalog and confinement are tether's).
    #[must_use]
    pub fn applies_to(&self, kind: &SystemKind) -> bool {
        match kind {
            SystemKind::KvHost {
                counter, tether, ..
            } => match self {
                Self::Callback { mode } => counter
                    .as_ref()
                    .is_some_and(|c| *mode == CallbackMode::Default || c.multiplex),
                Self::LaunchConfinementOff | Self::Catalog => *tether,
                _ => true,
            },
            SystemKind::Floor { .. } => !matches!(
                self,
                Self::Rate { .. }
                    | Self::HostRss
                    | Self::Callback { .. }
                    | Self::LaunchConfinementOff
                    | Self::Catalog
            ),
        }
    }

    /// Host options before `measure`.
    #[must_use]
    pub fn host_args(&self) -> Vec<String> {
        match self {
            Self::Callback { mode } => mode.host_args().iter().map(|&a| a.to_owned()).collect(),
            Self::LaunchConfinementOff => vec!["--sandbox".into(), "off".into()],
            _ => Vec::new(),
        }
    }

    /// The `measure` arguments (after the program name and, for hosts, `measure`).
    #[must_use]
    pub fn args(&self, counts: &Counts) -> Vec<String> {
        let words: Vec<String> = match self {
            Self::Launch | Self::LaunchConfinementOff => vec![
                "launch".into(),
                "--count".into(),
                counts.launches.to_string(),
            ],
            Self::Unary => vec![
                "unary".into(),
                "--calls".into(),
                counts.unary_calls.to_string(),
                "--warmup".into(),
                counts.warmup.to_string(),
            ],
            Self::Rate { concurrency } => vec![
                "rate".into(),
                "--calls".into(),
                counts.rate_calls.to_string(),
                "--concurrency".into(),
                concurrency.to_string(),
                "--warmup".into(),
                counts.warmup.to_string(),
            ],
            Self::Payload { size } => vec![
                "payload".into(),
                "--size".into(),
                size.to_string(),
                "--rounds".into(),
                if *size >= 64 * MIB {
                    counts.rounds_64mib
                } else {
                    counts.rounds_1mib
                }
                .to_string(),
            ],
            Self::PluginRss => vec!["plugin-rss".into()],
            Self::HostRss => vec![
                "host-rss".into(),
                "--plugins".into(),
                counts.live_plugins.to_string(),
            ],
            Self::Callback { .. } => vec![
                "callback".into(),
                "--calls".into(),
                counts.callback_pairs.to_string(),
                "--warmup".into(),
                counts.callback_warmup.to_string(),
            ],
            Self::Catalog => vec![
                "catalog".into(),
                "--manifests".into(),
                counts.catalog_manifests.to_string(),
                "--use".into(),
                counts.catalog_used.to_string(),
                "--repeat".into(),
                counts.catalog_repeat.to_string(),
            ],
        };
        words
    }

    /// The metric values of one run's output line, keyed by [`MetricSpec::id`].
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
                    ("launch_p99", pct(&s, 0.99, 1e6, "samples_ns")?),
                ]
            }
            Self::Unary => {
                let s = ns("samples_ns")?;
                vec![
                    ("unary_p50", pct(&s, 0.5, 1e3, "samples_ns")?),
                    ("unary_p99", pct(&s, 0.99, 1e3, "samples_ns")?),
                ]
            }
            Self::Rate { concurrency } => {
                let calls = line.number("calls")? as f64;
                vec![(rate_id(*concurrency), Value::Number(per_second(calls)?))]
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
                vec![(
                    "host_rss_per_plugin",
                    Value::Number((last - first) / (plugins - 1) as f64),
                )]
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

/// Whether a smaller or a larger value is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Latency, memory.
    Lower,
    /// Throughput.
    Higher,
}

/// A row of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricSpec {
    /// Key in `bench-results.json`.
    pub id: &'static str,
    /// Row label.
    pub label: &'static str,
    /// Unit of the values.
    pub unit: &'static str,
    /// Direction.
    pub better: Better,
}

/// The report's rows, in order.
pub const METRICS: &[MetricSpec] = &[
    MetricSpec {
        id: "launch_p50",
        label: "launch → first call done (AutoMTLS), p50",
        unit: "ms",
        better: Better::Lower,
    },
    MetricSpec {
        id: "launch_p99",
        label: "launch → first call done (AutoMTLS), p99",
        unit: "ms",
        better: Better::Lower,
    },
    MetricSpec {
        id: "unary_p50",
        label: "unary 64 B round trip, sequential, p50",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "unary_p99",
        label: "unary 64 B round trip, sequential, p99",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "rate_c1",
        label: "calls/s, 1 caller",
        unit: "calls/s",
        better: Better::Higher,
    },
    MetricSpec {
        id: "rate_c16",
        label: "calls/s, 16 concurrent callers",
        unit: "calls/s",
        better: Better::Higher,
    },
    MetricSpec {
        id: "rate_c64",
        label: "calls/s, 64 concurrent callers",
        unit: "calls/s",
        better: Better::Higher,
    },
    MetricSpec {
        id: "payload_1mib",
        label: "1 MiB request + 1 MiB response",
        unit: "MB/s",
        better: Better::Higher,
    },
    MetricSpec {
        id: "payload_64mib",
        label: "64 MiB request + 64 MiB response",
        unit: "MB/s",
        better: Better::Higher,
    },
    MetricSpec {
        id: "plugin_rss",
        label: "idle plugin RSS after one call",
        unit: "MB",
        better: Better::Lower,
    },
    MetricSpec {
        id: "host_rss_per_plugin",
        label: "host RSS growth per extra live plugin",
        unit: "kB",
        better: Better::Lower,
    },
    MetricSpec {
        id: "callback_plain_p50",
        label: "plain call (counter `Get`), interleaved with the callback calls, p50",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "callback_p50",
        label: "call carrying one callback via the broker (default mode), p50",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "callback_p99",
        label: "call carrying one callback via the broker (default mode), p99",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "callback_over_plain",
        label: "callback call ÷ plain call (default mode), p50s",
        unit: "×",
        better: Better::Lower,
    },
    MetricSpec {
        id: "callback_mux_plain_p50",
        label: "plain call (counter `Get`), multiplexed broker, interleaved with its callback calls, p50",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "callback_mux_p50",
        label: "call carrying one callback via the broker (multiplexed mode), p50",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "callback_mux_p99",
        label: "call carrying one callback via the broker (multiplexed mode), p99",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "callback_mux_over_plain",
        label: "callback call ÷ plain call (multiplexed mode), p50s",
        unit: "×",
        better: Better::Lower,
    },
    MetricSpec {
        id: "launch_off_p50",
        label: "launch → first call done, confinement `off`, p50 (the launch rows are `enforce`)",
        unit: "ms",
        better: Better::Lower,
    },
    MetricSpec {
        id: "catalog_load",
        label: "lazy catalog: load 1,000 manifests, p50",
        unit: "ms",
        better: Better::Lower,
    },
    MetricSpec {
        id: "catalog_use",
        label: "lazy catalog: load 1,000 manifests + start and call 2 plugins, p50",
        unit: "ms",
        better: Better::Lower,
    },
    MetricSpec {
        id: "catalog_started",
        label: "lazy catalog: plugin processes started",
        unit: "processes",
        better: Better::Lower,
    },
];

/// Metrics of features go-plugin does not have (confinement, the lazy catalog): `n/a` in its
/// columns.
pub const TETHER_ONLY: &[&str] = &[
    "launch_off_p50",
    "catalog_load",
    "catalog_use",
    "catalog_started",
];

/// Looks a metric up by id.
#[must_use]
pub fn metric(id: &str) -> Option<&'static MetricSpec> {
    METRICS.iter().find(|m| m.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(m: Measurement, line: &str) -> Vec<(&'static str, Value)> {
        m.evaluate(&Line::parse(line).unwrap()).unwrap()
    }

    #[test]
    fn launch_samples_become_p50_and_p99_in_milliseconds() {
        let values = eval(Measurement::Launch, "samples_ns=3000000,1000000,2000000");
        assert_eq!(
            values,
            vec![
                ("launch_p50", Value::Number(2.0)),
                ("launch_p99", Value::Number(3.0))
            ]
        );
    }

    #[test]
    fn unary_samples_become_microseconds() {
        let values = eval(Measurement::Unary, "samples_ns=50000");
        assert_eq!(values[0], ("unary_p50", Value::Number(50.0)));
    }

    #[test]
    fn a_rate_is_calls_over_elapsed_seconds() {
        let values = eval(
            Measurement::Rate { concurrency: 64 },
            "calls=1000 elapsed_ns=500000000",
        );
        assert_eq!(values, vec![("rate_c64", Value::Number(2000.0))]);
    }

    #[test]
    fn a_payload_rate_is_megabytes_per_second_and_a_refusal_is_kept() {
        let ok = eval(
            Measurement::Payload { size: MIB },
            "bytes=4000000 elapsed_ns=2000000000",
        );
        assert_eq!(ok, vec![("payload_1mib", Value::Number(2.0))]);
        let refused = eval(
            Measurement::Payload { size: 64 * MIB },
            "failed=ResourceExhausted",
        );
        assert_eq!(
            refused,
            vec![("payload_64mib", Value::Failed("ResourceExhausted".into()))]
        );
    }

    #[test]
    fn host_rss_growth_is_spread_over_the_plugins_after_the_first() {
        let values = eval(
            Measurement::HostRss,
            "first_kb=8000 last_kb=8990 plugins=100",
        );
        assert_eq!(values, vec![("host_rss_per_plugin", Value::Number(10.0))]);
    }

    #[test]
    fn a_callback_run_yields_both_p50s_and_their_ratio() {
        let values = eval(
            Measurement::Callback {
                mode: CallbackMode::Default,
            },
            "unary_ns=100000,200000,300000 callback_ns=600000,500000,400000",
        );
        assert_eq!(
            values,
            vec![
                ("callback_plain_p50", Value::Number(200.0)),
                ("callback_p50", Value::Number(500.0)),
                ("callback_p99", Value::Number(600.0)),
                ("callback_over_plain", Value::Number(2.5)),
            ]
        );
    }

    #[test]
    fn a_catalog_run_yields_milliseconds_and_the_most_processes_any_repeat_started() {
        let values = eval(
            Measurement::Catalog,
            "load_ns=3000000,1000000,2000000 use_ns=9000000,8000000,7000000 started=2,3,2",
        );
        assert_eq!(
            values,
            vec![
                ("catalog_load", Value::Number(2.0)),
                ("catalog_use", Value::Number(8.0)),
                ("catalog_started", Value::Number(3.0)),
            ]
        );
    }

    #[test]
    fn tether_only_measurements_skip_go_plugin_and_callbacks_need_counter_programs() {
        let go = SystemKind::KvHost {
            host: "kvhost".into(),
            plugin: "kvplugin".into(),
            counter: None,
            tether: false,
        };
        assert!(!Measurement::Catalog.applies_to(&go));
        assert!(!Measurement::LaunchConfinementOff.applies_to(&go));
        let callback = Measurement::Callback {
            mode: CallbackMode::Default,
        };
        assert!(!callback.applies_to(&go));
        assert!(Measurement::Launch.applies_to(&go));
    }

    #[test]
    fn the_multiplexed_callback_runs_only_on_hosts_that_take_multiplex() {
        let with = |multiplex| SystemKind::KvHost {
            host: "kvhost".into(),
            plugin: "kvplugin".into(),
            counter: Some(CounterPrograms {
                host: "counterhost".into(),
                plugin: "counterplugin".into(),
                host_args: Vec::new(),
                multiplex,
            }),
            tether: false,
        };
        let muxed = Measurement::Callback {
            mode: CallbackMode::Multiplexed,
        };
        let default = Measurement::Callback {
            mode: CallbackMode::Default,
        };
        assert!(muxed.applies_to(&with(true)));
        assert!(!muxed.applies_to(&with(false)));
        assert!(default.applies_to(&with(false)));
        assert_eq!(muxed.host_args(), ["--multiplex"]);
        assert!(default.host_args().is_empty());
    }

    #[test]
    fn zero_elapsed_time_is_rejected_rather_than_infinite() {
        let line = Line::parse("calls=10 elapsed_ns=0").unwrap();
        assert!(
            Measurement::Rate { concurrency: 1 }
                .evaluate(&line)
                .is_err()
        );
    }

    #[test]
    fn every_measurement_yields_only_metrics_the_report_knows() {
        for m in Measurement::all() {
            let line = match m {
                Measurement::Launch | Measurement::Unary | Measurement::LaunchConfinementOff => {
                    "samples_ns=1,2"
                }
                Measurement::Callback { .. } => "unary_ns=1,2 callback_ns=3,4",
                Measurement::Catalog => "load_ns=1 use_ns=2 started=2",
                _ => "calls=1 elapsed_ns=1 bytes=1 rss_kb=1 first_kb=1 last_kb=2 plugins=2",
            };
            for (id, _) in eval(m, line) {
                assert!(metric(id).is_some(), "{id} from {m:?} has no MetricSpec");
            }
        }
    }

    #[test]
    fn the_floor_skips_measurements_it_cannot_make() {
        let floor = SystemKind::Floor {
            pingpong: "pingpong".into(),
        };
        assert!(Measurement::Unary.applies_to(&floor));
        assert!(!Measurement::Rate { concurrency: 16 }.applies_to(&floor));
        assert!(!Measurement::HostRss.applies_to(&floor));
    }

    #[test]
    fn quick_counts_are_smaller_than_full_ones() {
        let (q, f) = (Counts::QUICK, Counts::FULL);
        assert!(q.rounds < f.rounds && q.unary_calls < f.unary_calls);
        assert!(f.rounds >= 3, "the issue asks for at least three rounds");
    }
}
