//! The cost of telemetry (issue 24): tether's host with its telemetry off, with per-plugin
//! metrics on, and with call tracing on, alternating in the same rounds, each on the same
//! pinned placement, so each mode's ratio to `off` comes from runs minutes apart on the same
//! CPUs. `kv-bench --telemetry MODE` says what each mode installs.

use super::measurement::Measurement;
use super::placement::Placement;

/// What the host measures and traces (`kv-bench --telemetry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TelemetryMode {
    /// Neither: tether's default.
    Off,
    /// Per-plugin metrics on a real SDK `MeterProvider` whose `ManualReader` is never collected.
    Metrics,
    /// Call spans recorded by an OpenTelemetry layer on an SDK `TracerProvider` with no
    /// exporter.
    Tracing,
}

impl TelemetryMode {
    /// Every mode, `Off` first (the others' ratios are to it).
    pub const ALL: [Self; 3] = [Self::Off, Self::Metrics, Self::Tracing];

    /// The `kv-bench` options selecting it.
    #[must_use]
    pub fn args(self) -> [&'static str; 2] {
        let mode = match self {
            Self::Off => "off",
            Self::Metrics => "metrics",
            Self::Tracing => "tracing",
        };
        ["--telemetry", mode]
    }

    /// The system id of its values.
    #[must_use]
    pub fn id(self) -> &'static str {
        match self {
            Self::Off => "telemetry-off",
            Self::Metrics => "telemetry-metrics",
            Self::Tracing => "telemetry-tracing",
        }
    }

    /// How the report names it.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Metrics => "metrics on",
            Self::Tracing => "tracing on",
        }
    }
}

/// What each mode measures: 64 B sequential calls (p50) and 64 concurrent callers (calls/s).
pub const TELEMETRY_MEASUREMENTS: [Measurement; 2] = [
    Measurement::Unary { size: 64 },
    Measurement::Rate {
        concurrency: 64,
        multiplex: false,
    },
];

/// Where every telemetry run is pinned: host and plugin on two CPUs, as a host and its plugin
/// run when the machine is not short of CPUs.
pub const TELEMETRY_PLACEMENT: Placement = Placement::TwoCpus;

/// How many times each mode runs each measurement per round (the modes alternating, their
/// order rotating): the cost is a few per cent, below one run's noise, so it is judged on the
/// median of many paired ratios rather than on one pair.
pub const TELEMETRY_REPEATS: u32 = 5;

/// The largest cost the issue allows: on ÷ off within 3 %.
pub const TELEMETRY_BUDGET: f64 = 0.03;

/// The `(metric id, label, unit, lower is better)` rows of the telemetry table.
pub const TELEMETRY_ROWS: [(&str, &str, &str, bool); 3] = [
    (
        "unary_p50",
        "unary 64 B round trip, sequential, p50",
        "µs",
        true,
    ),
    (
        "unary_p99",
        "unary 64 B round trip, sequential, p99",
        "µs",
        true,
    ),
    (
        "rate_c64",
        "calls/s, 64 concurrent callers",
        "calls/s",
        false,
    ),
];
