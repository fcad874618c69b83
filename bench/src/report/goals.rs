//! The goals and how each fared.

use super::format::{format_ratio, with_unit};
use super::results::{BASELINE, FLOOR, Results, Summary, TETHER};

/// Metrics of the issue that need work still in progress; listed, never given numbers.
pub const PENDING: &[&str] = &[];

/// What a goal compares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// tether's value ≤ this many times go-plugin's.
    AtMostTimesBaseline(f64),
    /// tether's value ≥ this many times go-plugin's.
    AtLeastTimesBaseline(f64),
    /// tether's value ≤ this many times the floor's.
    AtMostTimesFloor(f64),
    /// tether's value ≥ this many times the floor's (a rate: a fraction of the floor's).
    AtLeastTimesFloor(f64),
    /// tether's value ≥ this, in the metric's unit.
    AtLeast(f64),
    /// tether's value ≤ this, in the metric's unit.
    AtMost(f64),
}

/// One of the goals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Goal {
    /// The goal as the issue states it.
    pub text: &'static str,
    /// The metric it judges.
    pub metric: &'static str,
    /// The comparison.
    pub target: Target,
}

/// The goals (issue 14's, then the earlier ones still held) that can be measured now.
pub const GOALS: &[Goal] = &[
    Goal {
        text: "launch → first call p50 ≤ 2.5× the raw floor",
        metric: "launch_p50",
        target: Target::AtMostTimesFloor(2.5),
    },
    Goal {
        text: "unary 64 B p50 ≤ 2.5× the raw floor",
        metric: "unary_p50",
        target: Target::AtMostTimesFloor(2.5),
    },
    Goal {
        text: "64 MiB round trip ≥ 40 % of the raw floor's MB/s",
        metric: "payload_64mib",
        target: Target::AtLeastTimesFloor(0.4),
    },
    Goal {
        text: "64-concurrent calls/s ≥ 2× go-plugin's",
        metric: "rate_c64",
        target: Target::AtLeastTimesBaseline(2.0),
    },
    Goal {
        text: "idle plugin RSS ≤ 0.4× the Go plugin's",
        metric: "plugin_rss",
        target: Target::AtMostTimesBaseline(0.4),
    },
    Goal {
        text: "per-call-id callback ≤ 3× a plain unary call (default broker mode)",
        metric: "callback_over_plain",
        target: Target::AtMost(3.0),
    },
    Goal {
        text: "per-call-id callback ≤ 3× a plain unary call (multiplexed broker mode)",
        metric: "callback_mux_over_plain",
        target: Target::AtMost(3.0),
    },
    Goal {
        text: "host RSS ≤ 1 MB per live plugin (earlier goal)",
        metric: "host_rss_per_plugin",
        target: Target::AtMost(1024.0),
    },
    Goal {
        text: "1,000-manifest catalog loads in ≤ 50 ms (earlier goal)",
        metric: "catalog_load",
        target: Target::AtMost(50.0),
    },
];

/// Goals of the issue that wait for work in progress.
pub const PENDING_GOALS: &[&str] = &[];

/// How a goal fared.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// `Some(true)` met, `Some(false)` not met, `None` not measurable in this run.
    pub met: Option<bool>,
    /// What was measured, as shown (e.g. `0.21×` or `186 MB/s`).
    pub measured: String,
}

impl Goal {
    /// Judges the goal on `results`.
    #[must_use]
    pub fn judge(&self, results: &Results) -> Outcome {
        let unit = crate::suite::metric(self.metric).map_or("", |m| m.unit);
        let ratio_outcome = |other: &str, limit: f64, at_most: bool| match results.ratio(
            TETHER,
            other,
            self.metric,
        ) {
            Some(r) => Outcome {
                met: Some(if at_most { r <= limit } else { r >= limit }),
                measured: format!("{}×", format_ratio(r)),
            },
            None => unmeasured(results, self.metric),
        };
        let absolute = |limit: f64, at_most: bool| match results.summary(TETHER, self.metric) {
            Some(Summary::Median(v)) => Outcome {
                met: Some(if at_most { v <= limit } else { v >= limit }),
                measured: with_unit(v, unit),
            },
            Some(Summary::Failed(code)) => Outcome {
                met: Some(false),
                measured: format!("fails ({code})"),
            },
            None => unmeasured(results, self.metric),
        };
        match self.target {
            Target::AtMostTimesBaseline(l) => ratio_outcome(BASELINE, l, true),
            Target::AtLeastTimesBaseline(l) => ratio_outcome(BASELINE, l, false),
            Target::AtMostTimesFloor(l) => ratio_outcome(FLOOR, l, true),
            Target::AtLeastTimesFloor(l) => ratio_outcome(FLOOR, l, false),
            Target::AtLeast(l) => absolute(l, false),
            Target::AtMost(l) => absolute(l, true),
        }
    }
}

fn unmeasured(results: &Results, metric: &str) -> Outcome {
    let why = match results.summary(TETHER, metric) {
        Some(Summary::Failed(code)) => format!("tether fails ({code})"),
        Some(Summary::Median(_)) => "no baseline value".into(),
        None => "not measured".into(),
    };
    Outcome {
        met: None,
        measured: why,
    }
}
