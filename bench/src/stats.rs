//! Order statistics: nearest-rank percentiles and medians.

/// The nearest-rank `p`-quantile (`0.0..=1.0`) of `samples`, or `None` when there are none.
///
/// Nearest rank (the smallest sample with at least `p` of the samples at or below it) is what
/// the earlier `bench` subcommands of both hosts used; it never interpolates, so a p99 is
/// always a latency that was actually measured.
///
/// ```
/// assert_eq!(tether_bench::stats::percentile(&[5.0, 1.0, 3.0, 2.0, 4.0], 0.5), Some(3.0));
/// assert_eq!(tether_bench::stats::percentile(&[], 0.5), None);
/// ```
#[must_use]
pub fn percentile(samples: &[f64], p: f64) -> Option<f64> {
    if samples.is_empty() || !(0.0..=1.0).contains(&p) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (p * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The median of `values`: the middle one, or the mean of the two middle ones for an even
/// count. Used across rounds, where there are few values and no reason to prefer either.
///
/// ```
/// assert_eq!(tether_bench::stats::median(&[3.0, 1.0, 2.0]), Some(2.0));
/// assert_eq!(tether_bench::stats::median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
/// ```
#[must_use]
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        f64::midpoint(sorted[mid - 1], sorted[mid])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_p99_of_a_hundred_samples_is_the_ninety_ninth_smallest() {
        let samples: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(percentile(&samples, 0.99), Some(99.0));
        assert_eq!(percentile(&samples, 0.5), Some(50.0));
        assert_eq!(percentile(&samples, 1.0), Some(100.0));
    }

    #[test]
    fn percentile_zero_is_the_smallest_sample_and_out_of_range_is_none() {
        assert_eq!(percentile(&[7.0, 3.0], 0.0), Some(3.0));
        assert_eq!(percentile(&[7.0, 3.0], 1.5), None);
    }

    #[test]
    fn median_of_an_even_count_averages_the_middle_pair() {
        assert_eq!(median(&[10.0, 40.0, 20.0, 30.0]), Some(25.0));
        assert_eq!(median(&[]), None);
    }
}
