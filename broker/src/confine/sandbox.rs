//! Confinement applied by the broker between fork and exec, so it works for plugins in any
//! language: a session of its own (no controlling terminal), parent-death signal, resource limits, no core dumps, every inherited descriptor
//! above 2 closed at exec, an empty capability bounding set (so a plugin of a root host has no
//! capabilities), `no_new_privs` and a Landlock file-system domain.
//!
//! When the host made the plugin a pids cgroup (`crate::confine::pids`), the child enters it first.
//! Last, the system-call filter (`crate::confine::seccomp`) is loaded.
//!
//! The Landlock ruleset and the seccomp programs are built in the parent ([`Prepared::new`]);
//! the child only makes raw, async-signal-safe system calls ([`Prepared::pre_exec`]).

use std::io;
use std::os::fd::{AsRawFd as _, BorrowedFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};
use serde::Deserialize;

pub(crate) use crate::confine::apply::ChildConfinement;
use crate::confine::caps::{CAP_SYS_ADMIN, has_capability};
use crate::confine::child::Hooks;
use crate::confine::netns::{self, NewNamespace};
use crate::confine::network::NetworkMechanism;
pub(crate) use crate::confine::reachable::Paths;
pub use crate::confine::reachable::{DEVICE_RW_PATHS, SYSTEM_EXEC_PATHS, SYSTEM_READ_PATHS};
use crate::confine::seccomp::{self, Filters, SeccompError, SeccompMode};
use crate::confine::world::enter::Entry;

/// The newest Landlock ABI whose access rights tether has vetted; rights of newer ABIs are not
/// requested (the kernel's own ABI may be newer). ABIs 7 and 8 added flags only (audit logs,
/// all threads), no right; 9 added `LANDLOCK_ACCESS_FS_RESOLVE_UNIX` ([`RESOLVE_UNIX_ABI`]).
pub const TARGET_LANDLOCK_ABI: u32 = 9;

/// The Landlock ABI from which `connect(2)` and `sendmsg(2)` to a pathname unix socket are
/// rights of their own (`LANDLOCK_ACCESS_FS_RESOLVE_UNIX`): tether grants them only where the
/// plugin may write (its private and socket directory, a working directory, a world's `/tmp`
/// and `/dev/shm`), so that a daemon's socket in what it may only read or execute is refused
/// whoever owns it. Older kernels leave it to the socket file's permissions.
pub const RESOLVE_UNIX_ABI: u32 = 9;

/// The default size of a plugin's own tmpfs ([`Limits::disk_mib`]): its private directory,
/// `/tmp`, `/dev/shm` and delivered files together. A tmpfs takes memory only for what is
/// written to it; this bounds how much a plugin can write.
pub const DEFAULT_DISK_MIB: u64 = 256;

/// How strictly a plugin is confined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SandboxMode {
    /// Landlock is required: on a kernel without it the plugin does not start.
    #[default]
    Enforce,
    /// Landlock when the kernel has it; without, a warning is logged and the plugin starts
    /// with the other protections only.
    BestEffort,
    /// No Landlock, no `no_new_privs`, capabilities kept (descriptors, limits, core dumps and
    /// the parent-death signal still apply). An explicit opt-out for plugins that cannot run confined.
    Off,
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Enforce => "enforce",
            Self::BestEffort => "best-effort",
            Self::Off => "off",
        })
    }
}

/// Resource limits (`setrlimit`) applied to the plugin; `None` leaves the host's limit.
///
/// Limits are per process (memory, CPU time, open files) except `processes`, which caps the
/// plugin and everything it starts: through a pids cgroup of the plugin's own when the host
/// can create one (see [`ProcessLimit`](crate::confine::ProcessLimit)), else through `RLIMIT_NPROC`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Limits {
    /// Address space in MiB (`RLIMIT_AS`). Go and Rust runtimes reserve more virtual memory
    /// than they use: allow some headroom.
    pub memory_mib: Option<u64>,
    /// CPU time in seconds (`RLIMIT_CPU`): the plugin gets `SIGXCPU`, then `SIGKILL`.
    pub cpu_seconds: Option<u64>,
    /// Open file descriptors (`RLIMIT_NOFILE`).
    pub open_files: Option<u64>,
    /// Tasks (processes and threads) of the plugin and its descendants: the `pids.max` of its
    /// own pids cgroup (`None`: [`DEFAULT_MAX_PROCESSES`](crate::confine::DEFAULT_MAX_PROCESSES)). On a
    /// host without a writable pids controller, `RLIMIT_NPROC` instead — which counts every
    /// process of the plugin's user, is not applied to root, and is only set when given here.
    pub processes: Option<u64>,
    /// The size in MiB of the plugin's own tmpfs, which holds its private directory (`TMPDIR`,
    /// `/tmp`), `/dev/shm` and its delivered files (`None`:
    /// [`DEFAULT_DISK_MIB`](crate::confine::DEFAULT_DISK_MIB)). Writing past it fails with
    /// `ENOSPC` inside the plugin. Applies where the plugin runs in a world of its own (the
    /// process runner with namespaces) and to the gVisor runner's `TMPDIR`.
    pub disk_mib: Option<u64>,
    /// The largest file the plugin may write, in MiB (`RLIMIT_FSIZE`): a write past it
    /// raises `SIGXFSZ`, which ends a plugin that does not handle it (one that ignores it gets
    /// `EFBIG`).
    pub file_size_mib: Option<u64>,
}

impl Limits {
    /// Sets the address-space limit in MiB.
    #[must_use]
    pub fn memory_mib(mut self, mib: u64) -> Self {
        self.memory_mib = Some(mib);
        self
    }

    /// Sets the CPU-time limit in seconds.
    #[must_use]
    pub fn cpu_seconds(mut self, seconds: u64) -> Self {
        self.cpu_seconds = Some(seconds);
        self
    }

    /// Sets the open-files limit.
    #[must_use]
    pub fn open_files(mut self, files: u64) -> Self {
        self.open_files = Some(files);
        self
    }

    /// Sets the processes limit.
    #[must_use]
    pub fn processes(mut self, processes: u64) -> Self {
        self.processes = Some(processes);
        self
    }

    /// Sets the size of the plugin's own tmpfs in MiB.
    #[must_use]
    pub fn disk_mib(mut self, mib: u64) -> Self {
        self.disk_mib = Some(mib);
        self
    }

    /// Sets the file-size limit in MiB.
    #[must_use]
    pub fn file_size_mib(mut self, mib: u64) -> Self {
        self.file_size_mib = Some(mib);
        self
    }

    /// The size of the plugin's own tmpfs in MiB: [`Self::disk_mib`] or the default.
    #[must_use]
    pub fn disk_mib_or_default(&self) -> u64 {
        self.disk_mib.unwrap_or(DEFAULT_DISK_MIB)
    }

    fn rlimits(&self) -> [(libc::__rlimit_resource_t, Option<u64>); 6] {
        [
            (
                libc::RLIMIT_FSIZE,
                self.file_size_mib.map(|m| m.saturating_mul(1024 * 1024)),
            ),
            (
                libc::RLIMIT_AS,
                self.memory_mib.map(|m| m.saturating_mul(1024 * 1024)),
            ),
            (libc::RLIMIT_CPU, self.cpu_seconds),
            (libc::RLIMIT_NOFILE, self.open_files),
            (libc::RLIMIT_NPROC, self.processes),
            // Core dumps off: a dump would hold the plugin's secrets.
            (libc::RLIMIT_CORE, Some(0)),
        ]
    }
}

/// A world's own directories, which the plugin may use besides [`Paths`]: they are not the
/// host's paths, so the Landlock rules take them as descriptors.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WorldDirs<'a> {
    /// Its `/proc` (read).
    pub(crate) proc: BorrowedFd<'a>,
    /// Its `/tmp`, the private directory (read-write).
    pub(crate) tmp: BorrowedFd<'a>,
    /// Its `/dev/shm` (read-write).
    pub(crate) shm: BorrowedFd<'a>,
    /// Its delivered files (read).
    pub(crate) delivered: BorrowedFd<'a>,
}

/// The Landlock ABI of the running kernel; 0 without Landlock.
#[must_use]
pub fn kernel_landlock_abi() -> u32 {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only returns
    // the ABI version (or an error); it reads no memory.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0_usize,
            1_u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    u32::try_from(version).unwrap_or(0)
}

/// Why a sandbox cannot be prepared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// `enforce` on a kernel without Landlock.
    #[error(
        "the kernel does not support Landlock (or it is disabled at boot), and the sandbox mode is `enforce`; boot a kernel with Landlock (Linux ≥ 5.13, `lsm=landlock,…`) or set `sandbox = \"best-effort\"`"
    )]
    Unsupported,
    /// Building the Landlock ruleset failed.
    #[error("building the Landlock ruleset failed: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    /// The system-call filter cannot be built.
    #[error(transparent)]
    Seccomp(#[from] SeccompError),
    /// A path the plugin must reach cannot be opened.
    #[error("cannot open {} for the Landlock ruleset: {source}", path.display())]
    Path {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: landlock::PathFdError,
    },
}

/// What the parent prepared for one launch; [`Self::pre_exec`] applies it in the child.
#[derive(Debug)]
pub(crate) struct Prepared {
    ruleset: Option<OwnedFd>,
    /// Drop the capability bounding set and the ambient capabilities (sandbox not off).
    drop_capabilities: bool,
    /// Set `no_new_privs`: sandbox not off, or a filter to load without `CAP_SYS_ADMIN`.
    no_new_privs: bool,
    /// The system-call filter, loaded last.
    filters: Option<Arc<Filters>>,
    /// The uid and gid to switch to, after everything that needs root.
    run_as: Option<(u32, u32)>,
    /// Keep `CAP_DAC_READ_SEARCH` (ambient) as `run_as`; see [`Layers::read_search`].
    read_search: bool,
    /// Move into a new, empty network namespace (made ahead by the host, or by the child).
    network_namespace: Option<NewNamespace>,
    rlimits: [(libc::__rlimit_resource_t, Option<u64>); 6],
    parent: libc::pid_t,
    /// A pids cgroup's `cgroup.procs`, open for writing: the child enters the group.
    cgroup_procs: Option<RawFd>,
    /// The world the plugin runs in, if any.
    world: Option<Entry>,
    /// The Landlock ABI enforced (`min(kernel, TARGET_LANDLOCK_ABI)`), `None` when Landlock is
    /// not applied.
    pub(crate) landlock_abi: Option<u32>,
}

/// The layers of one launch besides the sandbox mode and limits.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Layers {
    /// The system-call filter.
    pub(crate) seccomp: SeccompMode,
    /// The uid and gid to switch to (root hosts).
    pub(crate) run_as: Option<(u32, u32)>,
    /// How `NetworkMode::None` is enforced; `None`: the host's network.
    pub(crate) network: Option<NetworkMechanism>,
    /// With `run_as` on a root host: keep `CAP_DAC_READ_SEARCH` as that user (ambient, every
    /// other capability dropped), to read what a world's idmapped mounts would let the
    /// plugin read. Only for the interpreter query (`crate::launch::interpreted::query`).
    pub(crate) read_search: bool,
}

impl Prepared {
    /// Prepares confinement in `mode` with `limits`, allowing `paths`, with `layers`.
    pub(crate) fn new(
        mode: SandboxMode,
        limits: &Limits,
        paths: &Paths,
        layers: Layers,
        plugin: &str,
    ) -> Result<Self, SandboxError> {
        Self::with_kernel_abi(
            kernel_landlock_abi(),
            mode,
            limits,
            (paths, None),
            layers,
            plugin,
        )
    }

    /// [`Self::new`] for a plugin in a world, whose own directories `world` are allowed too.
    pub(crate) fn in_world(
        mode: SandboxMode,
        limits: &Limits,
        paths: &Paths,
        world: WorldDirs<'_>,
        layers: Layers,
        plugin: &str,
    ) -> Result<Self, SandboxError> {
        let paths = (paths, Some(world));
        Self::with_kernel_abi(kernel_landlock_abi(), mode, limits, paths, layers, plugin)
    }

    /// [`Self::new`] for a kernel whose Landlock ABI is `kernel` (0: none).
    fn with_kernel_abi(
        kernel: u32,
        mode: SandboxMode,
        limits: &Limits,
        (paths, world): (&Paths, Option<WorldDirs<'_>>),
        layers: Layers,
        plugin: &str,
    ) -> Result<Self, SandboxError> {
        let use_landlock = match mode {
            SandboxMode::Off => false,
            SandboxMode::Enforce if kernel == 0 => return Err(SandboxError::Unsupported),
            SandboxMode::BestEffort if kernel == 0 => {
                tracing::warn!(
                    plugin,
                    "the kernel has no Landlock: the plugin runs without file-system confinement"
                );
                false
            }
            SandboxMode::Enforce | SandboxMode::BestEffort => true,
        };
        let (ruleset, landlock_abi) = if use_landlock {
            let abi = kernel.min(TARGET_LANDLOCK_ABI);
            (
                build_ruleset(paths, world, layers.network.is_some())?,
                Some(abi),
            )
        } else {
            (None, None)
        };
        let filters = Filters::new(seccomp::Policy {
            mode: layers.seccomp,
            inet: layers.network == Some(NetworkMechanism::Seccomp),
        })?;
        let confined = mode != SandboxMode::Off;
        // The kernel loads a filter only under no_new_privs or with CAP_SYS_ADMIN, which a
        // plugin with the sandbox off keeps on a root host (unless it runs as another user).
        let filter_needs_nnp =
            filters.is_some() && (layers.run_as.is_some() || !has_capability(CAP_SYS_ADMIN));
        Ok(Self {
            ruleset,
            drop_capabilities: confined,
            no_new_privs: confined || filter_needs_nnp,
            filters,
            run_as: layers.run_as,
            read_search: layers.read_search && layers.run_as.is_some() && confined,
            network_namespace: (layers.network == Some(NetworkMechanism::Namespace))
                .then(netns::take),
            rlimits: limits.rlimits(),
            // SAFETY: getpid has no preconditions.
            parent: unsafe { libc::getpid() },
            cgroup_procs: None,
            world: None,
            landlock_abi,
        })
    }

    /// Makes the child enter a cgroup, first thing, by writing `0` (itself) to `procs`: the
    /// group's `cgroup.procs`, open for writing, which must stay open until the spawn is done.
    pub(crate) fn enter_cgroup(&mut self, procs: RawFd) {
        self.cgroup_procs = Some(procs);
    }

    /// Makes the child enter the world `entry` (after the cgroup and limits, before the rest
    /// of the confinement): the plugin runs in it.
    pub(crate) fn enter_world(&mut self, entry: Entry) {
        self.world = Some(entry);
    }

    /// The confinement as one function for `std::process::Command::pre_exec` (a forked child,
    /// no world): [`Self::child`]'s hooks in order.
    pub(crate) fn pre_exec(&mut self) -> impl FnMut() -> io::Result<()> + Send + Sync + 'static {
        use Hooks as _;
        let mut child = self.child();
        move || {
            child.before()?;
            child.confine()
        }
    }

    /// What the child runs between its start and exec ([`Hooks`]): only raw system
    /// calls on values captured by copy (no allocation, no locks): async-signal-safe.
    pub(crate) fn child(&mut self) -> ChildConfinement {
        ChildConfinement {
            ruleset: self.ruleset.as_ref().map(|fd| fd.as_raw_fd()),
            drop_capabilities: self.drop_capabilities,
            no_new_privs: self.no_new_privs,
            filters: self.filters.clone(),
            run_as: self.run_as,
            read_search: self.read_search,
            network_namespace: self.network_namespace.as_ref().map(NewNamespace::enter_fd),
            rlimits: self.rlimits,
            parent: self.parent,
            cgroup_procs: self.cgroup_procs,
            world: self.world.take(),
        }
    }
}

/// The Landlock ruleset allowing `paths` and the system paths; with `no_tcp`, every TCP
/// `bind` and `connect` is refused too (ABI ≥ 4; older kernels skip it).
fn build_ruleset(
    paths: &Paths,
    world: Option<WorldDirs<'_>>,
    no_tcp: bool,
) -> Result<Option<OwnedFd>, SandboxError> {
    let (abi, rules) = rules(paths);
    let (all, read) = (
        AccessFs::from_all(abi),
        AccessFs::ReadFile | AccessFs::ReadDir,
    );

    let mut ruleset = Ruleset::default().handle_access(all)?;
    if no_tcp {
        // Handled, and no rule allows any port.
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    }
    let mut ruleset = ruleset.scope(Scope::from_all(abi))?.create()?;
    for (path, access, required) in rules {
        let fd = match PathFd::new(&path) {
            Ok(fd) => fd,
            // System paths that do not exist on this machine are skipped.
            Err(_) if !required => continue,
            Err(source) => return Err(SandboxError::Path { path, source }),
        };
        ruleset = ruleset.add_rule(PathBeneath::new(fd, access))?;
    }
    if let Some(world) = world {
        for (fd, access) in [
            (world.proc, read),
            (world.tmp, all),
            (world.shm, all),
            (world.delivered, read),
        ] {
            ruleset = ruleset.add_rule(PathBeneath::new(fd, access))?;
        }
    }
    Ok(ruleset.into())
}

/// The ABI the ruleset is written for ([`TARGET_LANDLOCK_ABI`]; the crate leaves out what an
/// older kernel lacks) and its path rules: `(path, rights, whether it must exist)`. Only the
/// read-write paths get every right, `ResolveUnix` included.
fn rules(paths: &Paths) -> (ABI, Vec<(PathBuf, BitFlags<AccessFs>, bool)>) {
    let abi = ABI::V9;
    let all = AccessFs::from_all(abi);
    let read: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::ReadDir;
    let exec = AccessFs::from_read(abi);
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;

    let mut rules: Vec<(PathBuf, BitFlags<AccessFs>, bool)> = Vec::new();
    let system = |list: &[&str], access, rules: &mut Vec<_>| {
        for p in list {
            rules.push((PathBuf::from(p), access, false));
        }
    };
    system(SYSTEM_EXEC_PATHS, exec, &mut rules);
    system(SYSTEM_READ_PATHS, read, &mut rules);
    system(DEVICE_RW_PATHS, device, &mut rules);
    for p in &paths.exec {
        rules.push((p.clone(), exec, true));
    }
    for p in &paths.read {
        rules.push((p.clone(), read, true));
    }
    for p in &paths.read_write {
        rules.push((p.clone(), all, true));
    }
    (abi, rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_read_write_paths_may_connect_to_pathname_unix_sockets() {
        let paths = Paths {
            exec: vec!["/opt/p".into()],
            read: vec!["/run".into()],
            read_write: vec!["/srv/state".into()],
            granted: vec![],
        };
        let (abi, rules) = rules(&paths);
        assert_eq!(abi as u32, TARGET_LANDLOCK_ABI);
        assert!(AccessFs::from_all(abi).contains(AccessFs::ResolveUnix));
        for (path, access, _) in rules {
            assert_eq!(
                access.contains(AccessFs::ResolveUnix),
                path.to_str() == Some("/srv/state"),
                "{}: {access:?}",
                path.display()
            );
        }
    }

    #[test]
    fn this_kernel_reports_a_landlock_abi() {
        // The machines tether is developed on run Linux 6.18 (ABI 7); a kernel without
        // Landlock reports 0 and the enforce tests elsewhere would fail loudly.
        assert!(kernel_landlock_abi() >= 1);
    }

    #[test]
    fn enforce_refuses_a_kernel_without_landlock_and_best_effort_goes_on_without() {
        let (limits, paths) = (Limits::default(), Paths::default());
        let layers = Layers::default();
        let err = Prepared::with_kernel_abi(
            0,
            SandboxMode::Enforce,
            &limits,
            (&paths, None),
            layers,
            "p",
        )
        .unwrap_err();
        assert!(matches!(err, SandboxError::Unsupported), "{err}");
        assert!(err.to_string().contains("best-effort"), "{err}");
        let prepared = Prepared::with_kernel_abi(
            0,
            SandboxMode::BestEffort,
            &limits,
            (&paths, None),
            layers,
            "p",
        )
        .unwrap();
        assert_eq!(prepared.landlock_abi, None);
        assert!(prepared.no_new_privs);
        let off = Layers {
            seccomp: SeccompMode::Off,
            ..Layers::default()
        };
        let off = Prepared::with_kernel_abi(7, SandboxMode::Off, &limits, (&paths, None), off, "p")
            .unwrap();
        assert_eq!(off.landlock_abi, None);
        assert!(!off.no_new_privs && !off.drop_capabilities);
        assert!(off.filters.is_none());
    }

    #[test]
    fn the_enforced_abi_is_the_kernels_capped_at_the_vetted_one() {
        let (limits, paths) = (Limits::default(), Paths::default());
        let abi = kernel_landlock_abi();
        let prepared = Prepared::new(
            SandboxMode::Enforce,
            &limits,
            &paths,
            Layers::default(),
            "p",
        )
        .unwrap();
        assert_eq!(prepared.landlock_abi, Some(abi.min(TARGET_LANDLOCK_ABI)));
        assert!(prepared.ruleset.is_some());
    }

    #[test]
    fn a_filter_is_loaded_by_default_and_under_no_new_privs_unless_the_plugin_keeps_cap_sys_admin()
    {
        let (limits, paths) = (Limits::default(), Paths::default());
        let on = Prepared::new(
            SandboxMode::Enforce,
            &limits,
            &paths,
            Layers::default(),
            "p",
        )
        .unwrap();
        assert!(on.filters.is_some() && on.no_new_privs);
        let off_but_filtered =
            Prepared::new(SandboxMode::Off, &limits, &paths, Layers::default(), "p").unwrap();
        assert!(off_but_filtered.filters.is_some() && !off_but_filtered.drop_capabilities);
        assert_eq!(
            off_but_filtered.no_new_privs,
            !has_capability(CAP_SYS_ADMIN)
        );
        let as_nobody = Layers {
            run_as: Some((65534, 65534)),
            ..Layers::default()
        };
        let as_nobody = Prepared::new(SandboxMode::Off, &limits, &paths, as_nobody, "p").unwrap();
        assert!(
            as_nobody.no_new_privs,
            "nobody has no CAP_SYS_ADMIN to load the filter"
        );
    }

    #[test]
    fn limits_turn_into_rlimits_with_core_dumps_off() {
        let limits = Limits::default().memory_mib(2).open_files(7);
        let r = limits.rlimits();
        assert!(r.contains(&(libc::RLIMIT_AS, Some(2 * 1024 * 1024))));
        assert!(r.contains(&(libc::RLIMIT_NOFILE, Some(7))));
        assert!(r.contains(&(libc::RLIMIT_CPU, None)));
        assert!(r.contains(&(libc::RLIMIT_CORE, Some(0))));
    }

    #[test]
    fn modes_are_written_in_kebab_case() {
        #[derive(Deserialize)]
        struct T {
            m: SandboxMode,
        }
        let t: T = toml::from_str("m = \"best-effort\"").unwrap();
        assert_eq!(t.m, SandboxMode::BestEffort);
        assert!(toml::from_str::<T>("m = \"loose\"").is_err());
    }
}
