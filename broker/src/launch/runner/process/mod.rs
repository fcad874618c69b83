//! The process runner: the plugin as the host's own child process, confined (stage 3:
//! [`confine`]) and started from the plan ([`spawn`]) without copying the host ([`vfork`]),
//! the confinement applied between its start and exec.

pub(crate) mod spawn;
pub(crate) mod vfork;

use std::sync::Arc;

use crate::confine::WORLD_TMP;
use crate::confine::integrity::VerifiedBinary;
use crate::confine::janitor::Registration;
use crate::confine::network::{NetworkMechanism, NetworkMode};
use crate::confine::pids::{self, PidsGroup, ProcessLimit};
use crate::confine::process::{ExitHook, Leader, ProcessGroup};
use crate::confine::sandbox;
use crate::confine::world::{PluginWorld, WorldMechanism};
use crate::launch::error::{Failure, StartErrorKind};
use crate::launch::launched::{InForce, Launched, Resources, Spawned, cover};
use crate::launch::plan::LaunchPlan;
use crate::launch::runner::view::PluginView;
use crate::launch::settings::Settings;
use crate::launch::world as launch_world;
use crate::telemetry::spans::stage_span;

/// Stages 3–4 of the process runner: confine, then spawn.
pub(crate) fn start(
    settings: &Settings,
    plan: &mut LaunchPlan,
    mut resources: Resources,
    world: Option<PluginWorld>,
    name: &Arc<str>,
) -> Result<Spawned, Failure> {
    let ids = resources.ids;
    let confined = stage_span("confine")
        .in_scope(|| confine(settings, plan, &mut resources.janitor, name, world, ids))?;
    stage_span("spawn").in_scope(|| spawn(settings, plan, resources, confined, name))
}

/// The confinement prepared in the parent, applied in the child.
struct Confined {
    sandbox: sandbox::Prepared,
    pids_group: Option<PidsGroup>,
    process_limit: ProcessLimit,
    network_mechanism: Option<NetworkMechanism>,
    /// The plugin's world, which lives as long as the plugin.
    world: Option<PluginWorld>,
}

/// Stage 3: processes are limited by a pids cgroup of the plugin's own when the host can make
/// one (then `RLIMIT_NPROC`, per user and not applied to root, is left alone), else by
/// `RLIMIT_NPROC`; the janitor is told of the cgroup at once; then the sandbox is prepared, and
/// the way into the plugin's world.
fn confine(
    settings: &Settings,
    plan: &mut LaunchPlan,
    janitor: &mut Option<Registration>,
    plugin: &str,
    world: Option<PluginWorld>,
    ids: Option<(u32, u32)>,
) -> Result<Confined, Failure> {
    let confinement = &settings.confinement;
    let mut limits = confinement.limits;
    let pids_group = PidsGroup::create(
        limits.processes.unwrap_or(pids::DEFAULT_MAX_PROCESSES),
        plugin,
    );
    if let Some(group) = &pids_group {
        cover(
            janitor,
            plugin,
            None,
            Some(group.dir()),
            &plan.janitor_paths(),
            None,
        );
    }
    let process_limit = match &pids_group {
        Some(group) => {
            limits.processes = None;
            group.limit()
        }
        None => ProcessLimit::Rlimit {
            max: limits.processes,
        },
    };
    // In a world, `none` is the world's own network namespace (a loopback of its own) and the
    // plugin's user is the world's; otherwise today's mechanisms apply.
    let network_mechanism = match &world {
        Some(_) => {
            (confinement.network == NetworkMode::None).then_some(NetworkMechanism::Namespace)
        }
        None => NetworkMechanism::for_mode(confinement.network, confinement.network_namespace),
    };
    let layers = sandbox::Layers {
        seccomp: confinement.seccomp,
        run_as: if world.is_some() { None } else { ids },
        network: if world.is_some() {
            None
        } else {
            network_mechanism
        },
        read_search: false,
    };
    let mode = confinement.sandbox;
    let sandbox_error = |e| StartErrorKind::Sandbox {
        mode,
        source: Box::new(e),
    };
    let mut sandbox = match &world {
        Some(w) => sandbox::Prepared::in_world(
            mode,
            &limits,
            &plan.paths,
            launch_world::dirs(&w.world),
            layers,
            plugin,
        ),
        None => sandbox::Prepared::new(mode, &limits, &plan.paths, layers, plugin),
    }
    .map_err(sandbox_error)?;
    if let Some(fd) = pids_group.as_ref().and_then(PidsGroup::procs_fd) {
        sandbox.enter_cgroup(fd);
    }
    if let Some(w) = &world {
        let entry = launch_world::entry(settings, plan, w)?;
        sandbox.enter_world(entry);
    }
    Ok(Confined {
        sandbox,
        pids_group,
        process_limit,
        network_mechanism,
        world,
    })
}

/// Stage 4: the process, in its own group, which the janitor is told of at once; its pids
/// cgroup and delivered files live exactly as long as it does.
fn spawn(
    settings: &Settings,
    plan: &LaunchPlan,
    resources: Resources,
    confined: Confined,
    name: &Arc<str>,
) -> Result<Spawned, Failure> {
    let plugin = &**name;
    let spawn_error = |source| StartErrorKind::Spawn {
        program: settings.program.clone(),
        source,
    };
    let Resources {
        verified,
        dir,
        delivered,
        identity,
        ids,
        mut janitor,
        ..
    } = resources;
    let Confined {
        mut sandbox,
        pids_group,
        process_limit,
        network_mechanism,
        world,
    } = confined;
    let exec = verified
        .as_ref()
        .map_or_else(|| plan.program.clone(), VerifiedBinary::exec_path);
    let child = spawn::spawn(plan, &exec, &mut sandbox.child()).map_err(spawn_error)?;
    drop(verified);
    let landlock_abi = sandbox.landlock_abi;
    // The host's descriptors of the Landlock ruleset and of the plugin's network namespace:
    // the child has applied them.
    drop(sandbox);
    let spawn::PluginProcess {
        pid,
        stdout,
        stderr,
    } = child;
    let group = ProcessGroup::new(Leader::Spawned(pid), Arc::clone(name)).map_err(spawn_error)?;
    // The janitor kills every process of this cgroup if the host dies: a process that left
    // the plugin's process group or session is still in it.
    let cgroup_dir = pids_group.as_ref().map(|g| g.dir().to_owned());
    if let Some(mut pids_group) = pids_group {
        // Once the plugin has exited, whatever is left in the group is killed and the group
        // removed.
        pids_group.spawned();
        group.on_exit(ExitHook(Box::new(move || drop(pids_group))));
    }
    cover(
        &mut janitor,
        plugin,
        Some(group.pid()),
        cgroup_dir.as_deref(),
        &plan.janitor_paths(),
        None,
    );
    if let Some(delivered) = delivered {
        // Secrets live exactly as long as the plugin.
        group.on_exit(ExitHook(Box::new(move || drop(delivered))));
    }
    let world_mechanism = if world.is_some() {
        WorldMechanism::Namespaces
    } else {
        WorldMechanism::Layers
    };
    let view = match &world {
        Some(_) => PluginView::new(dir.path(), WORLD_TMP),
        None => PluginView::same(dir.path()),
    };
    let sockets = world
        .as_ref()
        .filter(|_| settings.confinement.network == NetworkMode::None)
        .and_then(launch_world::sockets);
    if let Some(world) = world {
        // The world, and whatever still runs in it, ends with the plugin (its exit is
        // published once the world has ended); until then the host keeps only its keeper (the
        // namespaces' descriptors are closed now).
        let running = world.into_running();
        group.on_exit(ExitHook(Box::new(move || running.end())));
    }
    let launched = Launched {
        view,
        sockets,
        diagnose: None,
        group,
        dir: Some(dir),
        plugin: Arc::clone(name),
        terminate_grace: settings.timeouts.terminate_grace,
        janitor,
    };
    Ok(Spawned {
        launched,
        stdout,
        stderr,
        identity,
        in_force: InForce {
            landlock_abi,
            process_limit,
            network_mechanism,
            world: world_mechanism,
            ids,
        },
    })
}
