//! The world stage of a process-runner launch: taking the plugin's world ([`take`]), the ids it
//! runs as ([`plugin_ids`]), and the way in its launch child takes ([`entry`]). The world
//! itself is [`crate::confine::world`].

use crate::confine::NetworkMode;
use crate::confine::SeccompMode;
use crate::confine::sandbox::SandboxMode;
use crate::confine::sandbox::WorldDirs;
use crate::confine::world::NamespacesMode;
use crate::confine::world::enter::Entry;
use crate::confine::world::ids::WorldIds;
use crate::confine::world::make::World;
use crate::confine::world::plan::{self, RealFs};
use crate::confine::world::{self as worlds, PluginWorld, WorldError, reserve};
use crate::launch::error::{Failure, StartErrorKind};
use crate::launch::plan::LaunchPlan;
use crate::launch::runner::options::Runner;
use crate::launch::settings::Settings;
use tether_transport::Sockets;

/// The world of this launch, or `None` when it runs with the other layers only.
///
/// `sandbox = "off"` turns the file-system confinement off, and a world's mount namespace is
/// that confinement: such a plugin gets no world unless the operator requires namespaces.
pub(crate) fn take(settings: &Settings, name: &str) -> Result<Option<PluginWorld>, Failure> {
    let mode = match (
        settings.confinement.sandbox,
        settings.confinement.namespaces,
    ) {
        (SandboxMode::Off, NamespacesMode::Preferred) => NamespacesMode::Off,
        (_, mode) => mode,
    };
    worlds::for_launch(
        mode,
        name,
        settings.confinement.run_as,
        settings.confinement.allow_root,
        settings.confinement.plugin_ids,
    )
    .map_err(|e| StartErrorKind::World(e).into())
}

/// The uid and gid the plugin runs as when they are not the host's: its world's, or without a
/// world, `run_as` — and on a root host, never uid 0 unless `allow_root`: the default plugin
/// ids, through the same `setresuid` as `run_as`.
pub(crate) fn plugin_ids(
    settings: &Settings,
    world: Option<&PluginWorld>,
    name: &str,
) -> Result<Option<(u32, u32)>, WorldError> {
    let host = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    // The gVisor runner runs the plugin as its OCI spec says, inside its own kernel.
    if !matches!(settings.runner, Runner::Process) {
        return Ok(settings.confinement.run_as.filter(|ids| *ids != host));
    }
    let ids = match world {
        Some(world) => Some(world.plugin),
        None if host.0 != 0 => None,
        None if settings.confinement.run_as.is_some() => {
            WorldIds::new(
                host,
                settings.confinement.run_as,
                settings.confinement.allow_root,
                settings.confinement.plugin_ids,
            )?;
            settings.confinement.run_as
        }
        None if settings.confinement.allow_root => None,
        None => {
            let ids = WorldIds::new(host, None, false, settings.confinement.plugin_ids)?;
            Some(ids.plugin(name, &std::collections::HashSet::new()))
        }
    };
    Ok(ids.filter(|ids| *ids != host))
}

/// The world's own directories, for the Landlock rules.
pub(crate) fn dirs(world: &World) -> WorldDirs<'_> {
    use std::os::fd::AsFd as _;
    WorldDirs {
        proc: world.proc.as_fd(),
        tmp: world.tmp.as_fd(),
        shm: world.shm.as_fd(),
        delivered: world.delivered.as_fd(),
    }
}

/// The way into `world` for the launch child: the plan's own paths mounted, the plugin's ids,
/// its network and its disk size. A root host's plugin reads the operator's grants with its
/// own ids: one it cannot read is refused here ([`WorldError::GrantUnreadable`]).
pub(crate) fn entry(
    settings: &Settings,
    plan: &LaunchPlan,
    world: &PluginWorld,
) -> Result<Entry, StartErrorKind> {
    // The program at the path it is executed by: a catalog's `bin/NAME` may be a link to a
    // binary elsewhere, whose directory is what the plan grants.
    let mut paths = plan.paths.clone();
    paths.exec.push(plan.program.clone());
    let tree = plan::launch(&paths, reserve::base(), &RealFs);
    // A non-root host's plugin keeps the host's supplementary groups: the mode bits do not
    // tell what it may read, and nothing of its grants is idmapped anyway.
    if world.world.ids.setgroups
        && let Some((path, owner)) = plan::unreadable_grant(&tree, &RealFs, world.plugin)
    {
        return Err(StartErrorKind::World(WorldError::GrantUnreadable {
            path,
            uid: world.plugin.0,
            gid: world.plugin.1,
            owner: owner.uid,
            group: owner.gid,
            mode: owner.mode,
        }));
    }
    Entry::new(
        &world.world,
        &tree,
        world.plugin,
        settings.confinement.network == NetworkMode::Host,
        settings.confinement.limits.disk_mib_or_default(),
        // What a root host's plugin makes in a read-write bind is root's on the host: only
        // where the filter refuses set-uid and set-gid modes, and not in a directory the host
        // gave the plugin's own id.
        settings.confinement.seccomp == SeccompMode::Default && !settings.working_dir_is_hosts,
    )
    .map_err(|e| StartErrorKind::Prepare {
        what: "preparing the plugin's world",
        source: e.into(),
    })
}

/// Sockets in `world`'s network namespace, for dialling a plugin that serves TCP on its own
/// loopback (the keeper makes them).
pub(crate) fn sockets(world: &PluginWorld) -> Option<Sockets> {
    let control = world.world.control()?;
    Some(Sockets::new(move |v6| control.tcp_socket(v6)))
}
