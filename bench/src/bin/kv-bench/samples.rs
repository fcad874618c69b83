//! The samples format of every `measure` line: comma-separated values.

use std::fmt::Write as _;
use std::time::Duration;

/// Durations as comma-separated nanoseconds.
pub(crate) fn join_ns(samples: &[Duration]) -> String {
    join(samples.iter().map(Duration::as_nanos))
}

/// Comma-separated values, the samples format of every `measure` line.
pub(crate) fn join<T: std::fmt::Display>(values: impl Iterator<Item = T>) -> String {
    let mut text = String::new();
    for (i, v) in values.enumerate() {
        if i > 0 {
            text.push(',');
        }
        let _ = write!(text, "{v}");
    }
    text
}
