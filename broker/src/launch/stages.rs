//! The start-up sequence behind [`PluginClientBuilder::start`](crate::PluginClientBuilder::start),
//! as stages: prepare → plan → confine → spawn → handshake → connect → health. Each stage is a
//! short function; failures are [`Failure`]s that [`start_stages`] turns into one [`StartError`] with
//! the plugin's name and what it printed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tether_proto::tls::Identity;
use tracing::Instrument as _;

use crate::confine::caps;
use crate::confine::integrity::VerifiedBinary;
use crate::confine::janitor::Janitor;
use crate::confine::user;
use crate::confine::world::PluginWorld;
use crate::confine::{WORLD_DELIVERED, WORLD_TMP};
use crate::launch::client::PluginClient;
use crate::launch::connect;
use crate::launch::delivery::{DeliveredDir, delivery_base};
use crate::launch::error::{Failure, PluginOutput, StartError, StartErrorKind};
use crate::launch::handshake::{self, StrayOutput};
use crate::launch::interpreted;
use crate::launch::interpreted::runtime::ResolvedRuntime;
use crate::launch::launched::{Resources, Spawned};
use crate::launch::output::{self, SharedTail, StderrTail};
use crate::launch::plan::{Delivered, LaunchPlan, PlanInputs};
use crate::launch::private_dir::PrivateDir;
use crate::launch::runner::options::Runner;
use crate::launch::runner::{self, gvisor, process};
use crate::launch::settings::{HandshakeConfig, Settings};
use crate::launch::world;
use crate::telemetry::{context, spans::stage_span};

/// After a failed start, how long to wait for the rest of the plugin's stderr (its group has
/// been ended, so the pipe closes almost at once).
const STDERR_SETTLE_TIMEOUT: Duration = Duration::from_millis(500);

/// The start-up sequence, inside the launch's span ([`traced`](crate::launch::traced)).
pub(crate) async fn start_stages(
    settings: Settings,
    handshake: HandshakeConfig,
) -> Result<PluginClient, StartError> {
    let started = Instant::now();
    let name: Arc<str> = settings.display_name().into();
    let plugin = &*name;
    let before_spawn = |failure: Failure| StartError::new(plugin, failure, None);

    let (spawned, resolved) = launch(&settings, &handshake, &name, true)
        .await
        .map_err(before_spawn)?;
    let Spawned {
        mut launched,
        stdout,
        stderr,
        identity,
        in_force,
    } = spawned;
    let pid = launched.group.pid();
    tracing::debug!(plugin, pid, "plugin spawned");

    let limits = settings.output_limits;
    let tail: SharedTail = Arc::new(Mutex::new(StderrTail::new(limits.stderr_tail_len)));
    let mut stderr_done = output::drain_stderr(
        stderr,
        Arc::clone(&name),
        pid,
        Arc::clone(&tail),
        settings.output_sink.clone(),
    );
    let mut stray = StrayOutput::new(limits.max_stray_lines, limits.max_stray_bytes);
    let result = async {
        let hs = handshake::stage(&settings, &handshake, &launched, stdout, &mut stray)
            .instrument(stage_span("handshake"))
            .await?;
        connect::stage(&settings, &launched, identity.as_ref(), hs)
            .instrument(stage_span("connect"))
            .await
    }
    .await;
    match result {
        Ok(connected) => {
            tracing::info!(
                plugin,
                pid,
                address = %connected.address,
                app_version = connected.app_version,
                tls = connected.peer_fingerprint.is_some(),
                broker = %connected.broker.mode(),
                sandbox = %settings.confinement.sandbox,
                landlock_abi = in_force.landlock_abi,
                process_limit = ?in_force.process_limit,
                seccomp = %settings.confinement.seccomp,
                network = %settings.confinement.network,
                network_mechanism = in_force.network_mechanism.map(|m| m.to_string()),
                world = %in_force.world,
                ids = ?in_force.ids,
                elapsed = ?started.elapsed(),
                "plugin started"
            );
            Ok(PluginClient::new(
                launched,
                connected,
                tail,
                stderr_done,
                in_force,
                &settings,
            ))
        }
        Err(failure) => {
            tracing::debug!(plugin, phase = %failure.phase, "plugin start failed; ending it");
            if let Err(e) = launched.shutdown(None).await {
                tracing::warn!(plugin, error = %e, "cleaning up after the failed start failed");
            }
            let _ = tokio::time::timeout(STDERR_SETTLE_TIMEOUT, stderr_done.wait_for(|done| *done))
                .await;
            let output = PluginOutput {
                stdout: stray.printed(),
                stderr_tail: output::snapshot(&tail),
            };
            let runner = settings.runner.name();
            let failure =
                runner::diagnosed(failure, runner, launched.diagnose, &output.stderr_tail);
            let failure = handshake::cookie_refused(failure, &handshake, &output.stderr_tail);
            let failure =
                interpreted::diagnose(&settings, failure, &output, resolved.as_ref(), &in_force)
                    .await;
            Err(StartError::new(plugin, failure, Some(output)))
        }
    }
}

/// Stages 1–4: prepare, plan, then the runner seam — the process runner's confinement and
/// spawn, or the gVisor runner's bundle and `runsc run`. Everything after this sees only
/// [`Spawned`]; [`once`](crate::launch::once) runs a program to its exit through the same
/// stages.
/// `connects`: whether a connection follows (a one-shot run makes no TLS identity).
pub(crate) async fn launch(
    settings: &Settings,
    handshake: &HandshakeConfig,
    name: &Arc<str>,
    connects: bool,
) -> Result<(Spawned, Option<ResolvedRuntime>), Failure> {
    let mut world = match &settings.runner {
        Runner::Process => world::take(settings, name)?,
        _ => None,
    };
    let resources =
        stage_span("prepare").in_scope(|| prepare(settings, connects, world.as_mut(), name))?;
    let mut plan = plan(settings, handshake, &resources);
    let resolved = interpreted::interpreter(settings, &mut plan, name).await?;
    interpreted::allow_program(&mut plan);
    let spawned = match &settings.runner {
        Runner::Process => process::start(settings, &mut plan, resources, world, name)?,
        Runner::Gvisor(options) => stage_span("spawn")
            .in_scope(|| gvisor::start(options, settings, &plan, resources, name))?,
        #[cfg(feature = "kubernetes")]
        Runner::Kubernetes(options) => {
            runner::kubernetes::start(options, handshake, &plan, resources, settings, name)
                .instrument(stage_span("spawn"))
                .await?
        }
    };
    Ok((spawned, resolved))
}

/// Stage 1: integrity first (nothing is made for a binary that will be refused), then the
/// private directory (the world's own, for a plugin in a world) and the delivery directory,
/// registered with the janitor before the delivered files are written (a world's vanish with
/// it), and the TLS identity.
fn prepare(
    settings: &Settings,
    connects: bool,
    world: Option<&mut PluginWorld>,
    name: &str,
) -> Result<Resources, Failure> {
    let prepare_error = |what, source| StartErrorKind::Prepare { what, source };
    let host_uid = rustix::process::geteuid().as_raw();
    if let Some((uid, gid)) = settings.confinement.run_as
        && !user::may_run_as(host_uid)
    {
        return Err(StartErrorKind::RunAsNeedsRoot { uid, gid, host_uid }.into());
    }
    let verified = match &settings.sha256 {
        Some(expected) => Some(
            VerifiedBinary::open(&settings.program, expected)
                .map_err(|e| StartErrorKind::Integrity(Box::new(e)))?,
        ),
        None => None,
    };
    let in_world = world.is_some();
    let ids = world::plugin_ids(settings, world.as_deref(), name).map_err(StartErrorKind::World)?;
    let delivery = settings.delivery.as_deref().filter(|d| !d.is_empty());
    // A Pod gets its values in a Secret of its own, never through this host's disk.
    #[cfg(feature = "kubernetes")]
    let delivery = delivery.filter(|_| !matches!(settings.runner, Runner::Kubernetes(_)));
    // Nothing secret is written that the janitor could not remove: without it, a launch that
    // delivers fails.
    let janitor_failed = |e: std::io::Error| -> Result<(), Failure> {
        if delivery.is_some() {
            return Err(prepare_error(
                "registering the secrets directory with the janitor",
                e.into(),
            )
            .into());
        }
        tracing::warn!(plugin = settings.display_name(), error = %e, "cannot register the launch's directories with the janitor: if the host is killed, they stay behind");
        Ok(())
    };
    // The janitor runs (started by a host's first launch) and holds this launch's registration
    // before anything is made, so that telling it of the directories is one message.
    let mut janitor = match Janitor::shared().register_dirs(&[]) {
        Ok(registration) => Some(registration),
        Err(e) => janitor_failed(e).map(|()| None)?,
    };
    let dir = match world.and_then(|w| w.world.take_scratch()) {
        Some(scratch) => PrivateDir::in_world(scratch, "tmp", ids),
        None if in_world => {
            return Err(prepare_error(
                "creating the private directory",
                "the world's tmpfs was taken twice".into(),
            )
            .into());
        }
        None => PrivateDir::create(settings.private_dir_base.as_deref())
            .map_err(|e| prepare_error("creating the private directory", e.into()))?,
    };
    // A world's tmpfs takes only files of ids its user namespace maps: a root host makes them
    // as the plugin's.
    let file_owner = dir.file_owner();
    let mut delivered = match delivery {
        Some(_) => {
            let base = dir
                .sibling("delivered")
                .or_else(|| settings.delivery_dir.clone())
                .unwrap_or_else(delivery_base);
            let create = || DeliveredDir::create(&base);
            let made = match file_owner {
                Some(ids) => caps::as_file_owner(ids, create),
                None => create(),
            };
            Some(made.map_err(|e| {
                prepare_error("creating the secrets and config directory", e.into())
            })?)
        }
        None => None,
    };
    // The janitor knows both directories before a byte is written into them: a host killed
    // from here on (while an interpreter is asked where it lives, say) leaves neither behind.
    // A world's are in its own tmpfs, which ends with it.
    if !in_world {
        let mut dirs = vec![dir.path()];
        dirs.extend(delivered.as_ref().map(DeliveredDir::path));
        if let Some(registration) = &mut janitor
            && let Err(e) = registration.update(None, None, &dirs, None)
        {
            janitor_failed(e)?;
        }
    }
    if let (Some(delivered), Some(delivery)) = (&mut delivered, delivery) {
        let mut write = || delivered.write(delivery);
        let written = match file_owner {
            Some(ids) => caps::as_file_owner(ids, write),
            None => write(),
        };
        written.map_err(|e| prepare_error("writing the secrets and config files", e.into()))?;
    }
    let delivered_view = match (&delivered, in_world) {
        (Some(d), true) => d
            .path()
            .file_name()
            .map(|n| Path::new(WORLD_DELIVERED).join(n)),
        _ => None,
    };
    if let Some(ids) = ids {
        user::give_launch_dirs(
            (!in_world).then(|| dir.path()),
            delivered.as_ref().map(DeliveredDir::path),
            settings.hosts_working_dir(),
            ids,
        )
        .map_err(|e| {
            prepare_error(
                "giving the launch's directories to the plugin's user",
                e.into(),
            )
        })?;
    }
    let identity = if !connects {
        None
    } else if settings.plaintext {
        tracing::warn!(
            plugin = settings.display_name(),
            "AutoMTLS is off: the connection to this plugin is neither encrypted nor authenticated"
        );
        None
    } else {
        Some(
            Identity::generate()
                .map_err(|e| prepare_error("generating the TLS identity", e.into()))?,
        )
    };
    Ok(Resources {
        verified,
        dir,
        delivered,
        identity,
        ids,
        delivered_view,
        janitor,
    })
}

/// Stage 2: the pure plan, then the one lookup it needs (where the binary is).
fn plan(settings: &Settings, handshake: &HandshakeConfig, resources: &Resources) -> LaunchPlan {
    // The plugin's start-up continues the launch's span (the current one), not this stage's.
    let trace = context::to_env(&context::of_span(&tracing::Span::current()));
    let _stage = stage_span("plan").entered();
    let in_world = resources.dir.sibling("tmp").is_some();
    // The delivered files where the plugin finds them: where the host made them, or in a
    // world, under WORLD_DELIVERED.
    let seen = |host: &Path| -> PathBuf {
        match (&resources.delivered_view, resources.delivered.as_ref()) {
            (Some(view), Some(d)) => host
                .strip_prefix(d.path())
                .map_or_else(|_| view.clone(), |rest| view.join(rest)),
            _ => host.to_owned(),
        }
    };
    let delivered_dirs = resources.delivered.as_ref().map(|d| {
        (
            seen(d.path()),
            d.secrets.as_deref().map(seen),
            d.config.as_deref().map(seen),
        )
    });
    let delivered = delivered_dirs
        .as_ref()
        .map(|(dir, secrets, config)| Delivered {
            dir,
            secrets: secrets.as_deref(),
            config: config.as_deref(),
        });
    let private_dir = if in_world {
        Path::new(WORLD_TMP)
    } else {
        resources.dir.path()
    };
    let plan = LaunchPlan::new(
        settings,
        handshake,
        PlanInputs {
            host_env: std::env::vars_os().collect(),
            private_dir,
            delivered,
            client_cert: resources.identity.as_ref().map(|i| i.cert_der().clone()),
            host_cwd: std::env::current_dir().ok(),
            in_world,
            trace,
        },
    );
    for variable in &plan.env.ignored {
        tracing::warn!(
            plugin = settings.display_name(),
            ?variable,
            "ignoring a variable that the protocol sets itself"
        );
    }
    plan
}
