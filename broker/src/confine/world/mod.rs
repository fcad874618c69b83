//! A plugin's world: the namespaces it runs in, built from nothing for each launch.
//!
//! Instead of denying a plugin parts of the host's world one by one, tether gives each
//! process-runner plugin a world of its own: a user namespace (its ids map to unprivileged ids
//! of the host, `ids.rs`), a mount namespace whose root is an empty tmpfs holding only what its
//! launch plan lists (`plan.rs`), a pid namespace whose pid 1 is the keeper (`keeper.rs`), and
//! IPC, UTS, cgroup and network namespaces. Landlock and the system-call filter stay, as the
//! second wall. Worlds are made ahead of their launch (`reserve.rs`, `make.rs`) and entered by the
//! launch child (`enter.rs`).
//!
//! Where worlds cannot be made (a container runtime that forbids user namespaces, a kernel
//! without the mount API, an architecture without a keeper), plugins run with the other layers
//! only ([`WorldMechanism::Layers`]) unless the operator requires namespaces
//! ([`NamespacesMode::Required`]); the start log, `tether list` and `tether check` say which
//! applied.

pub(crate) mod enter;
pub(crate) mod idmap;
pub(crate) mod ids;
pub(crate) mod keeper;
pub(crate) mod make;
pub(crate) mod maker;
pub(crate) mod plan;
pub(crate) mod reaper;
pub(crate) mod reserve;
pub(crate) mod sys;

use std::collections::HashMap;
use std::sync::{Mutex, Once};

use serde::Deserialize;

use crate::confine::world::ids::{IdError, PluginIds, WorldIds};
use crate::confine::world::make::World;

/// Whether a process-runner plugin runs in a world of its own (namespaces).
///
/// Written in grants and manifests as `namespaces = "preferred" | "required" | "off"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum NamespacesMode {
    /// A world where the host can make one; elsewhere the other layers only, with a warning
    /// (once per host process) saying why.
    #[default]
    Preferred,
    /// A world, or the plugin does not start: the operator's policy for hosts that must not
    /// run plugins without namespaces.
    Required,
    /// No world: the plugin shares the host's mount table, processes, IPC and user, and only
    /// Landlock, the system-call filter and the network policy confine it.
    Off,
}

impl std::fmt::Display for NamespacesMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Preferred => "preferred",
            Self::Required => "required",
            Self::Off => "off",
        })
    }
}

/// How a plugin was isolated from the host's world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WorldMechanism {
    /// A world of its own: user, mount, pid, IPC, UTS, cgroup and network namespaces.
    Namespaces,
    /// The other layers only (Landlock, the system-call filter, the network policy, limits).
    Layers,
    /// A Pod of its own on a Kubernetes cluster (the Pod runner): the node's container runtime
    /// isolates it, under the Pod's security context (non-root, read-only root, no
    /// capabilities, `RuntimeDefault` seccomp, no service-account token) and the cluster's
    /// policies; nothing of it runs on this host.
    Pod,
}

impl std::fmt::Display for WorldMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Namespaces => "namespaces",
            Self::Layers => "layers",
            Self::Pod => "pod",
        })
    }
}

/// Why a plugin gets no world.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorldError {
    /// Its ids cannot be mapped.
    #[error(transparent)]
    Ids(#[from] IdError),
    /// Namespaces are required and this host cannot make a world.
    #[error(
        "namespaces are required (`namespaces = \"required\"`) but this host cannot make a plugin's world: {reason}; allow user namespaces (e.g. `sysctl user.max_user_namespaces`, the container runtime's seccomp profile) or set `namespaces = \"preferred\"`"
    )]
    Unavailable {
        /// What failed.
        reason: String,
    },
    /// A directory or file the operator granted (`sandbox_allow_read`, `sandbox_allow_exec`)
    /// that the plugin's user cannot read (or search). A world binds the operator's grants with
    /// the plugin's own ids, never idmapped: an idmapped grant would make host root's unix
    /// sockets in it (`/run/docker.sock`) the plugin's to connect to.
    #[error(
        "the plugin runs as {uid}:{gid}, which cannot read {} (owner {owner}:{group}, mode {mode:04o}), granted by the operator (`sandbox_allow_read`/`sandbox_allow_exec`): a plugin reads its grants as its own user, so that it cannot use a root daemon's socket there; make it readable by other users (`chmod o+rX`), grant a directory it can read, or give the plugin a user who can read it (`run_as` in the grants file)",
        .path.display()
    )]
    GrantUnreadable {
        /// The granted path.
        path: std::path::PathBuf,
        /// The plugin's uid.
        uid: u32,
        /// The plugin's gid.
        gid: u32,
        /// The path's owner.
        owner: u32,
        /// The path's group.
        group: u32,
        /// Its permission bits.
        mode: u32,
    },
}

/// A world taken for one launch and the ids its plugin runs as.
#[derive(Debug)]
pub(crate) struct PluginWorld {
    pub(crate) world: World,
    pub(crate) plugin: (u32, u32),
    _live: LiveId,
}

/// What a started plugin's world keeps until the plugin exits: its keeper (ended when this is
/// dropped) and the plugin's id, counted as live.
#[derive(Debug)]
pub(crate) struct RunningWorld {
    _keeper: Option<make::Keeper>,
    _live: LiveId,
}

impl RunningWorld {
    /// Ends the world with its plugin: kills its keeper, and with it whatever still runs in
    /// it, and waits until all of it has exited.
    pub(crate) fn end(self) {
        if let Some(keeper) = self._keeper {
            keeper.end();
        }
    }
}

impl PluginWorld {
    /// Once the plugin is started: the world's keeper and the plugin's id only; the world's
    /// namespace and directory descriptors are closed.
    pub(crate) fn into_running(self) -> RunningWorld {
        RunningWorld {
            _keeper: self.world.into_keeper(),
            _live: self._live,
        }
    }
}

/// The world for a launch of `name`, or `None` when it runs with the other layers.
pub(crate) fn for_launch(
    mode: NamespacesMode,
    name: &str,
    run_as: Option<(u32, u32)>,
    root_allowed: bool,
    ids: PluginIds,
) -> Result<Option<PluginWorld>, WorldError> {
    if mode == NamespacesMode::Off {
        return Ok(None);
    }
    let host = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    let world_ids = WorldIds::new(host, run_as, root_allowed, ids)?;
    match reserve::take(world_ids) {
        Ok(world) => {
            let plugin = world_ids.plugin(name, &live_ids());
            Ok(Some(PluginWorld {
                world,
                plugin,
                _live: LiveId::new(plugin.0),
            }))
        }
        Err(reason) if mode == NamespacesMode::Required => Err(WorldError::Unavailable { reason }),
        Err(reason) => {
            static WARNED: Once = Once::new();
            WARNED.call_once(|| {
                tracing::warn!(
                    reason,
                    "plugins run without namespaces on this host (Landlock, seccomp and the network policy only): they share its mount table, processes and IPC"
                );
            });
            Ok(None)
        }
    }
}

/// Whether this host can give plugins a world of its own; `Err` with the reason. The first
/// call makes a world for the host's default ids (and so starts their reserve); later calls
/// answer from that.
pub fn worlds_available() -> Result<(), String> {
    static AVAILABLE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    AVAILABLE
        .get_or_init(|| {
            let host = (
                rustix::process::geteuid().as_raw(),
                rustix::process::getegid().as_raw(),
            );
            let ids = WorldIds::new(host, None, false, ids::DEFAULT_PLUGIN_IDS)
                .map_err(|e| e.to_string())?;
            reserve::take(ids).map(drop)
        })
        .clone()
}

/// Ids of this host's live plugins, and how many run as each.
static LIVE: Mutex<Option<HashMap<u32, usize>>> = Mutex::new(None);

fn live_ids() -> std::collections::HashSet<u32> {
    LIVE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .as_ref()
        .map(|m| m.keys().copied().collect())
        .unwrap_or_default()
}

/// One live plugin's id, counted while it lives.
#[derive(Debug)]
struct LiveId(u32);

impl LiveId {
    fn new(id: u32) -> Self {
        *LIVE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_or_insert_with(HashMap::new)
            .entry(id)
            .or_default() += 1;
        Self(id)
    }
}

impl Drop for LiveId {
    fn drop(&mut self) {
        let mut live = LIVE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(map) = live.as_mut()
            && let Some(count) = map.get_mut(&self.0)
        {
            *count -= 1;
            if *count == 0 {
                map.remove(&self.0);
            }
        }
    }
}
