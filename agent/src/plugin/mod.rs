//! The plugin side: serving a step function as a `tether.agent.v1.Executor` plugin, and the
//! step's calls back into the host's `tether.agent.v1.Host` service.

mod executor;
mod host_calls;
mod step_error;

pub use executor::text;
pub use executor::{HostStepFn, Step, StepFn, StepFuture, serve_step};
pub use host_calls::{HostCalls, MAX_ARTIFACT_LEN};
pub use step_error::StepError;
