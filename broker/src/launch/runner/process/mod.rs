//! The process runner: the plugin as the host's own child process, confined (stage 3:
//! [`confine`]) and started from the plan ([`spawn`]) without copying the host ([`vfork`]),
//! the confinement applied between its start and exec.

pub(crate) mod spawn;
pub(crate) mod vfork;

use std::sync::Arc;

use crate::confine::confinement::Confinement;
use crate::confine::integrity::VerifiedBinary;
use crate::confine::janitor::Registration;
use crate::confine::network::NetworkMechanism;
use crate::confine::pids::{self, PidsGroup, ProcessLimit};
use crate::confine::process::{ExitHook, Leader, ProcessGroup};
use crate::confine::sandbox;
use crate::launch::error::{Failure, StartErrorKind};
use crate::launch::launched::{InForce, Launched, Resources, Spawned, cover};
use crate::launch::plan::LaunchPlan;
use crate::launch::runner::view::PluginView;
use crate::launch::settings::Settings;
use crate::telemetry::spans::stage_span;

/// Stages 3–4 of the process runner: confine, then spawn.
pub(crate) fn start(
    settings: &Settings,
    plan: &mut LaunchPlan,
    mut resources: Resources,
    name: &Arc<str>,
) -> Result<Spawned, Failure> {
    let confined = stage_span("confine")
        .in_scope(|| confine(&settings.confinement, plan, &mut resources.janitor, name))?;
    stage_span("spawn").in_scope(|| spawn(settings, plan, resources, confined, name))
}

/// The confinement prepared in the parent, applied in the child.
struct Confined {
    sandbox: sandbox::Prepared,
    pids_group: Option<PidsGroup>,
    process_limit: ProcessLimit,
    network_mechanism: Option<NetworkMechanism>,
}

/// Stage 3: processes are limited by a pids cgroup of the plugin's own when the host can make
/// one (then `RLIMIT_NPROC`, per user and not applied to root, is left alone), else by
/// `RLIMIT_NPROC`; the janitor is told of the cgroup at once; then the sandbox is prepared.
fn confine(
    confinement: &Confinement,
    plan: &mut LaunchPlan,
    janitor: &mut Option<Registration>,
    plugin: &str,
) -> Result<Confined, Failure> {
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
    let network_mechanism =
        NetworkMechanism::for_mode(confinement.network, confinement.network_namespace);
    let layers = sandbox::Layers {
        seccomp: confinement.seccomp,
        run_as: confinement.run_as,
        network: network_mechanism,
    };
    let mode = confinement.sandbox;
    let mut sandbox =
        sandbox::Prepared::new(mode, &limits, &plan.paths, layers, plugin).map_err(|e| {
            StartErrorKind::Sandbox {
                mode,
                source: Box::new(e),
            }
        })?;
    if let Some(fd) = pids_group.as_ref().and_then(PidsGroup::procs_fd) {
        sandbox.enter_cgroup(fd);
    }
    Ok(Confined {
        sandbox,
        pids_group,
        process_limit,
        network_mechanism,
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
        mut janitor,
    } = resources;
    let Confined {
        sandbox,
        pids_group,
        process_limit,
        network_mechanism,
    } = confined;
    let exec = verified
        .as_ref()
        .map_or_else(|| plan.program.clone(), VerifiedBinary::exec_path);
    let child = spawn::spawn(plan, &exec, sandbox.pre_exec()).map_err(spawn_error)?;
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
    let launched = Launched {
        view: PluginView::same(dir.path()),
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
        },
    })
}
