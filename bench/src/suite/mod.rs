//! What is measured: the systems, the measurements each program run makes, the metrics they
//! yield, and how many calls each takes.
//!
//! A new metric is a new [`Measurement`] variant with its arguments and evaluation, plus its
//! [`MetricSpec`] rows. A new callback mode is a new [`CallbackMode`]
//! variant: its host flag in [`CallbackMode::host_args`], its metric ids in
//! [`CallbackMode::ids`], its rows in [`METRICS`] and its entry in [`CallbackMode::ALL`].

mod counts;
mod evaluate;
mod measurement;
mod metrics;
mod placement;
mod runners;
mod systems;
mod telemetry;

pub use counts::{
    CONCURRENCY_LEVELS, Counts, DEFAULT_ROUNDS, MIB, MULTIPLEXED_CONCURRENCY, UNARY_SIZES,
};
pub use measurement::{CallbackMode, Measurement, Value};
pub use metrics::{Better, METRICS, MetricSpec, TETHER_ONLY, metric};
pub use placement::{PINNED_MEASUREMENT, Pinned, Placement};
pub use runners::{
    CONTAINERS, GVISOR_RUNNER, PROCESS_RUNNER, REQUIRE_PEERS_ENV, RunnerCounts, RunnerKind,
    RunnerMeasurement, RunnerPrograms, StepModel, WorkflowSize, gvisor_unavailable, peers_required,
};
pub use systems::{CounterPrograms, System, SystemKind};
pub use telemetry::{
    TELEMETRY_BUDGET, TELEMETRY_MEASUREMENTS, TELEMETRY_PLACEMENT, TELEMETRY_REPEATS,
    TELEMETRY_ROWS, TelemetryMode,
};

#[cfg(test)]
mod tests;
