//! The gVisor runner's IO: find `runsc`, make runsc's private state root and the launch's
//! bundle (the plan is [`bundle::plan`]), run `runsc run` in a process group of its own, and
//! leave nothing behind — the container is deleted (`runsc delete --force`) and the bundle
//! removed as soon as `runsc run` has exited, or by the janitor if the host dies.

pub(crate) mod bundle;
pub(crate) mod elf;
pub(crate) mod filter;
pub(crate) mod grants;
pub(crate) mod oci;

use std::collections::BTreeMap;
use std::fs::Permissions;
use std::io;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tether_transport::internal::lock;
use tokio::process::Command;

use crate::confine::NetworkMode;
use crate::confine::container::Container;
use crate::confine::janitor::Registration;
use crate::confine::network::NetworkMechanism;
use crate::confine::pids::ProcessLimit;
use crate::confine::process::{ExitHook, ProcessGroup};
use crate::confine::world::WorldMechanism;
use crate::launch::delivery::DeliveredDir;
use crate::launch::error::{Failure, StartErrorKind};
use crate::launch::launched::{InForce, Launched, Resources, Spawned, cover};
use crate::launch::plan::LaunchPlan;
use crate::launch::private_dir::PrivateDir;
use crate::launch::runner::gvisor::bundle::{BundleInputs, MountPoint, SOCKET_DIR};
use crate::launch::runner::gvisor::elf::Closure;
use crate::launch::runner::gvisor::grants::GrantViews;
use crate::launch::runner::options::{GvisorOptions, RUNSC_INSTALL_HINT};
use crate::launch::runner::process::spawn::PluginPipe;
use crate::launch::runner::view::PluginView;
use crate::launch::settings::Settings;

/// The name of runsc's state root in the private-directory base (with the host's uid).
pub(crate) const STATE_ROOT_PREFIX: &str = "tether-runsc-";

/// The prefix of a bundle directory in the private-directory base.
pub(crate) const BUNDLE_PREFIX: &str = "tether-bundle-";

/// The runner's name in errors.
const RUNNER: &str = "gvisor";

/// Lines by which runsc reports its own failure on stderr (`runsc run` exits with 128).
const RUNSC_FAILURE_PREFIXES: &[&str] = &[
    "running container:",
    "creating container:",
    "starting container:",
    "reading spec:",
    "loading container",
    "creating sandbox",
    "flag provided but not defined",
];

/// A plugin started under gVisor, before its identity and confinement are added.
#[derive(Debug)]
struct Started {
    launched: Launched,
    stdout: PluginPipe,
    stderr: PluginPipe,
}

/// What the launch made before the runner: its directories and their janitor registration.
struct Owned {
    dir: PrivateDir,
    delivered: Option<DeliveredDir>,
    janitor: Option<Registration>,
    /// The uid and gid the plugin runs as in the sandbox, when not gVisor's root.
    ids: Option<(u32, u32)>,
}

/// Stages 3–4 of the gVisor runner: the bundle, runsc's state root and `runsc run` instead of
/// the process runner's confinement and spawn.
pub(crate) fn start(
    options: &GvisorOptions,
    settings: &Settings,
    plan: &LaunchPlan,
    resources: Resources,
    name: &Arc<str>,
) -> Result<Spawned, Failure> {
    let Resources {
        verified,
        dir,
        delivered,
        identity,
        janitor,
        ids,
        ..
    } = resources;
    let resolved =
        crate::launch::runner::process::spawn::resolve_program(&settings.program, plan.path_var());
    let program = resolved
        .canonicalize()
        .map_err(|source| StartErrorKind::Spawn {
            program: settings.program.clone(),
            source,
        })?;
    // Its TMPDIR is the socket directory, which runsc binds from the host: a tmpfs of its
    // disk cap, so that the plugin's writes there end with ENOSPC, not on the host's disk.
    let disk_mib = settings.confinement.limits.disk_mib_or_default();
    let dir = dir.capped(disk_mib).map_err(|e| StartErrorKind::Runner {
        runner: RUNNER,
        problem: format!("cannot cap the plugin's socket directory at {disk_mib} MiB: {e}"),
    })?;
    // The tmpfs's root is the host's: give it to the plugin's user, as the directory under it
    // was.
    if let Some(ids) = ids {
        crate::confine::user::give(dir.path(), ids, false).map_err(|e| StartErrorKind::Runner {
            runner: RUNNER,
            problem: format!("cannot give the plugin's socket directory to {ids:?}: {e}"),
        })?;
    }
    let owned = Owned {
        dir,
        delivered,
        janitor,
        ids,
    };
    let started = run(options, settings, plan, &program, owned, name)?;
    // The digest was checked on the file now mounted; kept open until runsc has started.
    drop(verified);
    Ok(Spawned {
        launched: started.launched,
        stdout: started.stdout,
        stderr: started.stderr,
        identity,
        // gVisor's `--network=none`: the sandbox's own network stack with only a loopback.
        in_force: InForce {
            landlock_abi: None,
            process_limit: ProcessLimit::Rlimit {
                max: settings.confinement.limits.processes,
            },
            network_mechanism: (settings.confinement.network == NetworkMode::None)
                .then_some(NetworkMechanism::Namespace),
            world: WorldMechanism::Layers,
            ids: None,
        },
    })
}

/// Runs the plugin `name` (binary `program`, already resolved) under runsc: bundle, state
/// root, `runsc run`, janitor registration.
fn run(
    options: &GvisorOptions,
    settings: &Settings,
    plan: &LaunchPlan,
    program: &Path,
    owned: Owned,
    name: &Arc<str>,
) -> Result<Started, Failure> {
    let Owned {
        dir,
        delivered,
        mut janitor,
        ids,
    } = owned;
    let runner_error = |problem: String| StartErrorKind::Runner {
        runner: RUNNER,
        problem,
    };
    let runsc = options
        .installed_runsc()
        .ok_or_else(|| StartErrorKind::RunnerMissing {
            runner: RUNNER,
            program: options.runsc.clone(),
            hint: RUNSC_INSTALL_HINT,
        })?;
    let base = settings
        .private_dir_base
        .clone()
        .unwrap_or_else(std::env::temp_dir);
    let root = match &options.state_root {
        Some(root) => root.clone(),
        // SAFETY: geteuid has no preconditions.
        None => base.join(format!("{STATE_ROOT_PREFIX}{}", unsafe { libc::geteuid() })),
    };
    private_state_root(&root)
        .map_err(|e| runner_error(format!("runsc's state root {}: {e}", root.display())))?;
    let suffix = dir
        .path()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let container = Container {
        runsc: runsc.clone(),
        root: root.clone(),
        id: format!("{suffix}-{}", std::process::id()),
    };
    let bundle_dir = tempfile::Builder::new()
        .prefix(BUNDLE_PREFIX)
        .permissions(Permissions::from_mode(0o700))
        .tempdir_in(&base)
        .map_err(|e| {
            runner_error(format!(
                "cannot make the bundle directory in {}: {e}",
                base.display()
            ))
        })?;
    // The janitor removes the bundle and deletes the container (once runsc has made it) if
    // the host dies from here on.
    let mut janitor_dirs = plan.janitor_paths();
    janitor_dirs.push(bundle_dir.path());
    cover(
        &mut janitor,
        name,
        None,
        None,
        &janitor_dirs,
        Some(&container),
    );
    let libraries = match &options.rootfs {
        Some(_) => Closure::default(),
        None => libraries_of(program, &settings.confinement.sandbox_allow_exec).map_err(|e| {
            runner_error(format!(
                "cannot assemble the root file system of {}: {e}",
                program.display()
            ))
        })?,
    };
    let assembled = bundle_dir.path().join("rootfs");
    let mut read_only = settings.confinement.sandbox_allow_exec.clone();
    read_only.extend(settings.confinement.sandbox_allow_read.iter().cloned());
    let (views, read_only_sources) = GrantViews::new(bundle_dir.path(), &read_only)
        .map_err(|e| runner_error(format!("cannot prepare the read-only grants' views: {e}")))?;
    let planned = bundle::plan(&BundleInputs {
        program,
        args: &settings.args,
        env: &plan.env.vars,
        private_dir: dir.path(),
        delivered: delivered.as_ref().map(DeliveredDir::path),
        state_dir: settings.current_dir.as_deref(),
        read_only: &read_only,
        read_only_sources: &read_only_sources,
        libraries: &libraries,
        rootfs: options.rootfs.as_deref().unwrap_or(&assembled),
        limits: &settings.confinement.limits,
        options,
        host_network: settings.confinement.network == NetworkMode::Host,
        user: ids.unwrap_or((0, 0)),
    })
    .map_err(|e| runner_error(e.to_string()))?;
    write_bundle(bundle_dir.path(), &planned, options.rootfs.is_none()).map_err(|e| {
        runner_error(format!(
            "cannot write the bundle in {}: {e}",
            bundle_dir.path().display()
        ))
    })?;

    let spawn_error = |source| StartErrorKind::Spawn {
        program: runsc.clone(),
        source,
    };
    let mut child = run_command(
        &container,
        options,
        settings.confinement.network,
        bundle_dir.path(),
        views,
    )
    .spawn()
    .map_err(spawn_error)?;
    let pipes = child.stdout.take().zip(child.stderr.take());
    let group = ProcessGroup::new(child, Arc::clone(name)).map_err(spawn_error)?;
    cover(
        &mut janitor,
        name,
        Some(group.pid()),
        None,
        &janitor_dirs,
        Some(&container),
    );
    tracing::debug!(
        plugin = &**name,
        container = container.id,
        pid = group.pid(),
        "runsc started"
    );
    // As soon as `runsc run` has exited: the container's state goes, then the bundle and the
    // plugin's delivered files.
    group.on_exit(ExitHook(Box::new(move || {
        container.delete();
        drop(bundle_dir);
        drop(delivered);
    })));
    let launched = Launched {
        view: PluginView::new(dir.path(), SOCKET_DIR),
        sockets: None,
        diagnose: Some(diagnose),
        group,
        dir: Some(dir),
        plugin: Arc::clone(name),
        terminate_grace: settings.timeouts.terminate_grace,
        janitor,
    };
    let Some((stdout, stderr)) = pipes else {
        return Err(spawn_error(io::Error::other("stdout or stderr was not piped")).into());
    };
    // Dropping `launched` on an error ends the plugin.
    let stdout = stdout
        .into_owned_fd()
        .and_then(PluginPipe::from_owned_fd)
        .map_err(spawn_error)?;
    let stderr = stderr
        .into_owned_fd()
        .and_then(PluginPipe::from_owned_fd)
        .map_err(spawn_error)?;
    Ok(Started {
        launched,
        stdout,
        stderr,
    })
}

/// The ELF closure of `program` and of the shared objects below `scan`, remembered per
/// program (and its modification time) and scan list: walking an interpreter's prefix takes
/// longer than starting the sandbox.
fn libraries_of(program: &Path, scan: &[PathBuf]) -> io::Result<Closure> {
    type Key = (PathBuf, Option<std::time::SystemTime>, Vec<PathBuf>);
    static KNOWN: Mutex<BTreeMap<Key, Closure>> = Mutex::new(BTreeMap::new());
    let modified = std::fs::metadata(program).and_then(|m| m.modified()).ok();
    let key = (program.to_owned(), modified, scan.to_vec());
    if let Some(known) = lock(&KNOWN).get(&key) {
        return Ok(known.clone());
    }
    let closure = elf::closure(program, scan, &elf::system_dirs())?;
    lock(&KNOWN).insert(key, closure.clone());
    Ok(closure)
}

/// `runsc --root R [flags] run --bundle B ID`, with an empty environment, stdin from
/// `/dev/null`, in its own process group, dying with the host (then runsc ends the sandbox it
/// is attached to).
fn run_command(
    container: &Container,
    options: &GvisorOptions,
    network: NetworkMode,
    bundle: &Path,
    views: Option<GrantViews>,
) -> Command {
    let mut cmd = Command::new(&container.runsc);
    cmd.arg("--root").arg(&container.root);
    if !options.cgroups_managed() {
        cmd.arg("--ignore-cgroups");
    }
    // The bundle's `linux.seccomp` (`filter.rs`): runsc ignores it without this flag.
    cmd.arg("--oci-seccomp");
    cmd.arg(match network {
        NetworkMode::Host => "--network=host",
        NetworkMode::None => "--network=none",
    })
    // The plugin creates its socket in the bind-mounted directory, and in the default broker
    // mode connects to the host's sockets there: both need host unix sockets. runsc (Debian
    // 12's 20221219) has one setting for every mount and its gofer connects as host root:
    // the read-only grants are mounted from views in which root's files are not gVisor's
    // root's (`grants.rs`), so gVisor refuses a root daemon's socket there before asking.
    .arg("--host-uds=all")
    .arg("run")
    .arg("--bundle")
    .arg(bundle)
    .arg(&container.id)
    .env_clear()
    .current_dir("/")
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0)
    .kill_on_drop(false);
    // SAFETY: raw, async-signal-safe system calls on values prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            match &views {
                Some(views) => views.attach(),
                None => Ok(()),
            }
        });
    }
    cmd
}

/// Makes `root` (if missing) owned by this user with mode `0700`, refusing a symbolic link or
/// another owner's directory.
fn private_state_root(root: &Path) -> io::Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(root) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(root)?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "not a directory of this user's",
        ));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(root, Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Writes `config.json` and, for the assembled root file system, its mount points.
fn write_bundle(dir: &Path, planned: &bundle::BundlePlan, assembled: bool) -> io::Result<()> {
    if assembled {
        let rootfs = dir.join("rootfs");
        std::fs::create_dir(&rootfs)?;
        std::fs::set_permissions(&rootfs, Permissions::from_mode(0o755))?;
        for point in &planned.mount_points {
            match point {
                MountPoint::Dir(path) => std::fs::create_dir_all(rootfs.join(path))?,
                MountPoint::File(path) => {
                    let path = rootfs.join(path);
                    if let Some(parent) = path.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    std::fs::File::create(path)?;
                }
            }
        }
    }
    let json = serde_json::to_vec_pretty(&planned.spec).map_err(io::Error::other)?;
    std::fs::write(dir.join("config.json"), json)
}

/// runsc's own failure in the plugin's stderr tail, as `runsc failed: …`.
pub(crate) fn diagnose(stderr_tail: &str) -> Option<String> {
    stderr_tail
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| RUNSC_FAILURE_PREFIXES.iter().any(|p| line.starts_with(p)))
        .map(|line| format!("runsc failed: {line}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runscs_own_failure_is_found_in_the_stderr_tail() {
        let tail = "some plugin log\nrunning container: starting container: starting root container: starting sandbox: creating process: failed to load /x: no such file or directory\n";
        assert_eq!(
            diagnose(tail).unwrap(),
            "runsc failed: running container: starting container: starting root container: starting sandbox: creating process: failed to load /x: no such file or directory"
        );
        assert_eq!(diagnose("panic: the plugin's own failure\n"), None);
    }

    #[test]
    fn the_state_root_is_made_private_and_another_users_or_a_link_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("r");
        private_state_root(&root).unwrap();
        assert_eq!(std::fs::metadata(&root).unwrap().mode() & 0o777, 0o700);
        std::fs::set_permissions(&root, Permissions::from_mode(0o755)).unwrap();
        private_state_root(&root).unwrap();
        assert_eq!(std::fs::metadata(&root).unwrap().mode() & 0o777, 0o700);
        let link = base.path().join("l");
        std::os::unix::fs::symlink(&root, &link).unwrap();
        assert!(private_state_root(&link).is_err());
    }
}
