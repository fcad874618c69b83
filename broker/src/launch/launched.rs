//! A started plugin that has to be ended: what every runner hands to the stages after it
//! (handshake, connect, the client), whichever runner started it. How it ends is in
//! [`shutdown`](crate::launch::shutdown).

use std::sync::Arc;
use std::time::Duration;

use crate::confine::janitor::Registration;
use crate::confine::process::ProcessGroup;
use crate::launch::private_dir::PrivateDir;
use crate::launch::runner::Diagnose;
use crate::launch::runner::view::PluginView;

/// A launched plugin that has to be ended: its process group and its private directory.
///
/// Dropping it before it was ended sends `SIGTERM` to the group and removes the private
/// directory at once, and leaves the rest (grace, `SIGKILL`, reaping) to a small detached
/// thread, so dropping never waits for the plugin. Caveat: if the host process exits right after
/// the drop, that thread dies with it: the plugin got `SIGTERM`, but a plugin that ignores it
/// is not killed. Prefer [`Launched::shutdown`] (through `PluginClient::shutdown`).
#[derive(Debug)]
pub(crate) struct Launched {
    pub(crate) group: Arc<ProcessGroup>,
    pub(crate) dir: Option<PrivateDir>,
    pub(crate) plugin: Arc<str>,
    pub(crate) terminate_grace: Duration,
    /// Has the janitor clean up if the host dies; unregistered once the plugin is ended and
    /// `dir` removed.
    pub(crate) janitor: Option<Registration>,
    /// How the plugin sees its private directory (the runner's address translation).
    pub(crate) view: PluginView,
    /// The runner's reading of a failed start's stderr, if it has one.
    pub(crate) diagnose: Option<Diagnose>,
}
