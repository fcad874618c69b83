//! Step latencies and their quantiles.

use std::time::Duration;

/// Every step's duration.
#[derive(Debug, Default)]
pub struct Latencies {
    samples: Vec<Duration>,
}

impl Latencies {
    /// Adds one step's duration.
    pub fn push(&mut self, d: Duration) {
        self.samples.push(d);
    }

    /// How many steps were timed.
    #[must_use]
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether no step was timed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The `q` quantile (nearest rank), zero when empty.
    #[must_use]
    pub fn quantile(&self, q: f64) -> Duration {
        if self.samples.is_empty() {
            return Duration::ZERO;
        }
        let mut sorted = self.samples.clone();
        sorted.sort_unstable();
        let rank = (q * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_use_the_nearest_rank() {
        let mut l = Latencies::default();
        for ms in (1..=100).rev() {
            l.push(Duration::from_millis(ms));
        }
        assert_eq!(l.quantile(0.5), Duration::from_millis(50));
        assert_eq!(l.quantile(0.99), Duration::from_millis(99));
        assert_eq!(l.quantile(1.0), Duration::from_millis(100));
        assert_eq!(Latencies::default().quantile(0.5), Duration::ZERO);
    }
}
