//! The runner seam's types: what a launch owns before a runner starts the plugin
//! ([`Resources`]), and what every runner hands to the stages after it — handshake, connect, the
//! client — whichever runner started it ([`Spawned`]: a [`Launched`] plugin that has to be
//! ended, its pipes and the confinement [`InForce`]). How it ends is in
//! [`shutdown`](crate::launch::shutdown).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tether_proto::tls::Identity;

use crate::confine::container::Container;
use crate::confine::integrity::VerifiedBinary;
use crate::confine::janitor::{Janitor, Registration};
use crate::confine::network::NetworkMechanism;
use crate::confine::pids::ProcessLimit;
use crate::confine::process::ProcessGroup;
use crate::confine::world::WorldMechanism;
use crate::launch::delivery::DeliveredDir;
use crate::launch::private_dir::PrivateDir;
use crate::launch::runner::Diagnose;
use crate::launch::runner::process::spawn::PluginPipe;
use crate::launch::runner::view::PluginView;

/// What a launch owns before anything runs (made by the prepare stage).
pub(crate) struct Resources {
    /// The binary, opened and checked when a digest was configured.
    pub(crate) verified: Option<VerifiedBinary>,
    pub(crate) dir: PrivateDir,
    pub(crate) delivered: Option<DeliveredDir>,
    pub(crate) identity: Option<Identity>,
    /// The uid and gid the plugin runs as when they are not the host's.
    pub(crate) ids: Option<(u32, u32)>,
    /// The delivered files as the plugin sees them, when that is not where the host made
    /// them (in a world).
    pub(crate) delivered_view: Option<std::path::PathBuf>,
    /// Has the janitor remove the directories if the host dies (made before anything was
    /// written into them); the runner adds what it makes ([`cover`]) and hands it to
    /// [`Launched`]. `None` only when the janitor could not be reached and nothing secret is
    /// delivered.
    pub(crate) janitor: Option<Registration>,
}

/// Has the janitor clean up, if the host dies, the process group `pgid` (once the plugin
/// runs), the pids cgroup `cgroup`, the directories `dirs` and the gVisor `container`: through
/// the launch's registration, or a new one if the prepare stage could not make it. A runner
/// calls it before it makes each of them — a cgroup before the plugin enters it, a container
/// before `runsc` makes it — and once the plugin's group exists. A failure is logged: the
/// plugin runs, but what the janitor was not told stays behind if the host is killed.
pub(crate) fn cover(
    janitor: &mut Option<Registration>,
    plugin: &str,
    pgid: Option<u32>,
    cgroup: Option<&Path>,
    dirs: &[&Path],
    container: Option<&Container>,
) {
    let result = match janitor {
        Some(registration) => registration.update(pgid, cgroup, dirs, container),
        None => Janitor::shared()
            .register_dirs(dirs)
            .and_then(|registration| {
                janitor
                    .insert(registration)
                    .update(pgid, cgroup, dirs, container)
            }),
    };
    if let Err(e) = result {
        tracing::warn!(plugin, error = %e, "cannot register the plugin with the janitor: if the host is killed, its processes, cgroup, container or directories may stay behind");
    }
}

/// A spawned plugin and what the later stages need.
pub(crate) struct Spawned {
    pub(crate) launched: Launched,
    pub(crate) stdout: PluginPipe,
    pub(crate) stderr: PluginPipe,
    pub(crate) identity: Option<Identity>,
    pub(crate) in_force: InForce,
}

/// What confines a launched plugin, as known once it is spawned.
#[derive(Debug)]
pub(crate) struct InForce {
    /// The Landlock ABI enforced; `None` without Landlock.
    pub(crate) landlock_abi: Option<u32>,
    /// What limits its processes.
    pub(crate) process_limit: ProcessLimit,
    /// How `NetworkMode::None` is enforced; `None` with `NetworkMode::Host`.
    pub(crate) network_mechanism: Option<NetworkMechanism>,
    /// Whether it runs in a world of its own.
    pub(crate) world: WorldMechanism,
    /// The uid and gid it runs as, when not the host's.
    pub(crate) ids: Option<(u32, u32)>,
}

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
    /// Where TCP sockets to the plugin come from when it serves in a network namespace of its
    /// own (a world); `None`: the host's.
    pub(crate) sockets: Option<tether_transport::Sockets>,
}
