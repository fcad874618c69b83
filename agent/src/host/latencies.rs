//! Step latencies and their quantiles, in constant memory.
//!
//! An agent runs for days: keeping every step's duration grew the host by ≈ 16 bytes a step
//! (issue 16). A [HdrHistogram](https://hdrhistogram.github.io/HdrHistogram/) keeps counts in
//! logarithmic buckets instead, so its size depends only on [`MAX_RECORDED_LATENCY`] and
//! [`SIGNIFICANT_DIGITS`], never on the number of steps.

use std::time::Duration;

use hdrhistogram::Histogram;

/// The longest step duration recorded as itself; longer steps count as this long. One hour:
/// a step that takes longer is stuck, and its exact duration does not change a percentile.
pub const MAX_RECORDED_LATENCY: Duration = Duration::from_secs(3600);

/// Decimal digits of precision of every recorded duration and quantile: 2 means a quantile is
/// within 1% of the duration actually measured. With [`MAX_RECORDED_LATENCY`] this makes the
/// histogram ≈ 37 KiB, whatever the number of steps.
pub const SIGNIFICANT_DIGITS: u8 = 2;

/// Counts of step durations, in nanoseconds, in constant memory.
#[derive(Debug, Clone)]
pub struct Latencies {
    histogram: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        let highest = u64::try_from(MAX_RECORDED_LATENCY.as_nanos()).unwrap_or(u64::MAX);
        // Invariant: 1 ≤ 2 × 1 ≤ highest and 0 ≤ SIGNIFICANT_DIGITS ≤ 5 are the only conditions
        // under which `new_with_bounds` fails, and both constants satisfy them (a unit test
        // builds one).
        #[allow(clippy::expect_used)]
        let histogram = Histogram::new_with_bounds(1, highest, SIGNIFICANT_DIGITS)
            .expect("the latency histogram's bounds are valid constants");
        Self { histogram }
    }
}

impl Latencies {
    /// Adds one step's duration (durations above [`MAX_RECORDED_LATENCY`] count as it).
    pub fn push(&mut self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.histogram.saturating_record(nanos.max(1));
    }

    /// How many steps were timed.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.histogram.len()
    }

    /// Whether no step was timed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.histogram.is_empty()
    }

    /// The `q` quantile (`0.0..=1.0`), within [`SIGNIFICANT_DIGITS`] of a measured duration;
    /// zero when empty.
    #[must_use]
    pub fn quantile(&self, q: f64) -> Duration {
        if self.histogram.is_empty() {
            return Duration::ZERO;
        }
        let nanos = self.histogram.value_at_quantile(q.clamp(0.0, 1.0));
        Duration::from_nanos(nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn within_one_percent(actual: Duration, expected: Duration) -> bool {
        actual.abs_diff(expected).as_secs_f64() <= expected.as_secs_f64() * 0.01
    }

    #[test]
    fn quantiles_are_within_one_percent_of_the_measured_durations() {
        let mut l = Latencies::default();
        for ms in (1..=100).rev() {
            l.push(Duration::from_millis(ms));
        }
        assert_eq!(l.len(), 100);
        for (q, ms) in [(0.5, 50), (0.99, 99), (1.0, 100)] {
            let got = l.quantile(q);
            assert!(
                within_one_percent(got, Duration::from_millis(ms)),
                "{q}: {got:?}"
            );
        }
        assert_eq!(Latencies::default().quantile(0.5), Duration::ZERO);
        assert!(Latencies::default().is_empty());
    }

    #[test]
    fn the_histogram_does_not_grow_with_the_number_of_steps() {
        let mut l = Latencies::default();
        let size = |l: &Latencies| l.histogram.distinct_values();
        let before = size(&l);
        for micros in 0..200_000u64 {
            l.push(Duration::from_micros(micros % 5_000 + 100));
        }
        l.push(MAX_RECORDED_LATENCY * 10);
        assert_eq!(size(&l), before);
        assert_eq!(l.len(), 200_001);
        assert!(within_one_percent(l.quantile(1.0), MAX_RECORDED_LATENCY));
    }
}
