//! Errors as data, in one place for the host author: each is defined next to its subsystem —
//! [`StartError`] and [`ShutdownError`] in `launch/error/` (starting and ending one plugin),
//! [`UseError`] and [`UpgradeError`] in `supervisor/` (using a catalog plugin through the
//! supervisor, upgrading one),
//! [`CatalogFileError`] and [`NotGranted`] in `catalog/`, [`SandboxError`] and
//! [`IntegrityError`] in `confine/` — and re-exported here.

pub use crate::catalog::{CatalogFileError, NotGranted};
pub use crate::confine::{IntegrityError, SandboxError};
pub use crate::launch::ReattachError;
pub use crate::launch::error::{
    AddressProblem, Incompatibility, OutputLimit, Phase, PluginOutput, ShutdownError,
    ShutdownErrorKind, ShutdownOutcome, StartError, StartErrorKind,
};
pub use crate::supervisor::error::{
    UpgradeError, UpgradeErrorKind, UpgradePhase, UseError, UseErrorKind,
};
pub use tether_transport::{BoxError, GrpcBrokerError};
