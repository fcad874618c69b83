//! Why a launch failed, as data: [`StartError`] (starting one plugin: plugin, [`Phase`],
//! [`PluginOutput`], [`StartErrorKind`]), the refused announcements it refers to
//! ([`Incompatibility`], [`AddressProblem`]), and [`ShutdownError`] (ending one). Public as
//! [`crate::error`].

mod refusal;
mod shutdown_error;
mod start_error;
mod start_message;

pub use refusal::{AddressProblem, Incompatibility};
pub use shutdown_error::{ShutdownError, ShutdownErrorKind, ShutdownOutcome};
pub(crate) use start_error::Failure;
pub use start_error::{OutputLimit, Phase, PluginOutput, StartError, StartErrorKind};
