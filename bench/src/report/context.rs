//! What the report says besides the numbers.

use crate::suite::{Counts, System};

/// Everything the report says besides the numbers.
#[derive(Debug, Clone)]
pub struct Context {
    /// UTC date and time of the run, `2026-11-30 23:40 UTC`.
    pub date: String,
    /// One-line machine description.
    pub machine: String,
    /// 1/5/15-minute load averages before and after.
    pub load_before: Option<[f64; 3]>,
    /// As above, after the run.
    pub load_after: Option<[f64; 3]>,
    /// Tool and library versions, e.g. `rustc 1.95.0`.
    pub tools: Vec<String>,
    /// Counts used.
    pub counts: Counts,
    /// Whether this was a `--quick` smoke run.
    pub quick: bool,
    /// Systems, in column order.
    pub systems: Vec<System>,
}
