//! Errors as data, grouped by what was being done: [`StartError`] (starting one plugin),
//! [`UseError`] (using a catalog plugin through the broker), [`ShutdownError`] (ending one).

mod refusal;
mod shutdown;
mod start;
mod usage;

pub use shutdown::{ShutdownError, ShutdownOutcome};
pub(crate) use start::Failure;
pub use start::{
    AddressProblem, Incompatibility, OutputLimit, Phase, PluginOutput, StartError, StartErrorKind,
};
pub use tether_transport::BoxError;
pub use usage::UseError;

pub use crate::catalog::{ManifestError, NotGranted};
pub use crate::confine::{IntegrityError, SandboxError};
pub use crate::launch::ReattachError;
pub use tether_transport::GrpcBrokerError;
