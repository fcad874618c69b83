//! The host side: workflow files, the `tether.agent.v1.Host` service every plugin gets, and
//! the runner that calls each step's `Executor` through a [`Supervisor`](tether_broker::Supervisor).

mod latencies;
mod observer;
mod report;
mod runner;
mod service;
mod workflow;

pub use latencies::{Latencies, MAX_RECORDED_LATENCY, SIGNIFICANT_DIGITS};
pub use observer::{Observer, ProgressEvent, Silent};
pub use report::{ALL_LINES_UP_TO, RunReport, StepLines, human};
pub use runner::{Outcome, RunError, run, serve_host};
pub use service::{
    ARTIFACT_CHUNK_LEN, AgentHost, ArtifactPolicy, CallbackCounts, MAX_ARTIFACT_LEN,
};
pub use workflow::{Step, Workflow, WorkflowError, artifact_name};
