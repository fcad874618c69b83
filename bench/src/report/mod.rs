//! Results across rounds, the goals, and the two outputs: the generated section of
//! `bench/BENCHMARKS.md` and `bench-results.json`.

mod context;
mod format;
mod goals;
mod json;
mod markdown;
pub mod placement;
mod results;
pub mod runners;
mod splice;
pub mod telemetry;

pub use context::Context;
pub use format::{format_ratio, format_value, with_unit};
pub use goals::{GOALS, Goal, Outcome, PENDING, PENDING_GOALS, Target};
pub use json::json;
pub use markdown::markdown;
pub use results::{BASELINE, FLOOR, Paired, Results, Summary, TETHER};
pub use splice::{BEGIN_MARKER, END_MARKER, splice};

#[cfg(test)]
mod tests;
