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
use std::os::fd::{AsRawFd as _, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};
use serde::Deserialize;

use crate::confine::caps::{CAP_SYS_ADMIN, has_capability};
use crate::confine::netns::{self, NewNamespace};
use crate::confine::network::NetworkMechanism;
use crate::confine::seccomp::{self, Filters, SeccompError, SeccompMode};

/// The newest Landlock ABI whose access rights tether has vetted; rights of newer ABIs are not
/// requested (the kernel's own ABI may be newer).
pub const TARGET_LANDLOCK_ABI: u32 = 6;

/// System directories a confined plugin may read and execute from: programs and shared
/// libraries.
pub const SYSTEM_EXEC_PATHS: &[&str] = &[
    "/usr/lib",
    "/usr/lib64",
    "/usr/lib32",
    "/usr/libexec",
    "/usr/local/lib",
    "/lib",
    "/lib64",
    "/lib32",
    "/usr/bin",
    "/bin",
];

/// System files and directories a confined plugin may read: the dynamic loader's cache, time
/// zones, name resolution, CA certificates, CPU and memory information. `/proc` is readable,
/// but the kernel refuses a confined plugin the private files (`environ`, `mem`, `fd/…`) of
/// processes outside its Landlock domain, such as the host.
pub const SYSTEM_READ_PATHS: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/ssl/certs",
    "/usr/share/zoneinfo",
    "/usr/share/ca-certificates",
    "/proc",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
    "/sys/kernel/mm/transparent_hugepage",
    "/dev/urandom",
    "/dev/random",
    "/dev/zero",
];

/// Device files a confined plugin may read and write. Not `/dev/tty`: a plugin runs in a
/// session of its own, without a controlling terminal, so that it cannot read the operator's
/// terminal or push keystrokes into it.
pub const DEVICE_RW_PATHS: &[&str] = &["/dev/null", "/dev/full"];

/// Highest capability number tried when dropping the capability bounding set (the kernel
/// answers `EINVAL` past its last one; Linux 6.x has 41).
const MAX_CAPABILITY: libc::c_ulong = 63;

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

    fn rlimits(&self) -> [(libc::__rlimit_resource_t, Option<u64>); 5] {
        [
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

/// Where a confined plugin may go, besides the system paths.
#[derive(Debug, Clone, Default)]
pub(crate) struct Paths {
    /// Read + execute: the plugin binary's directory.
    pub(crate) exec: Vec<PathBuf>,
    /// Read only: its secrets and config directory.
    pub(crate) read: Vec<PathBuf>,
    /// Read + write: its private directory and its state (working) directory.
    pub(crate) read_write: Vec<PathBuf>,
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
    /// Move into a new, empty network namespace (made ahead by the host, or by the child).
    network_namespace: Option<NewNamespace>,
    rlimits: [(libc::__rlimit_resource_t, Option<u64>); 5],
    parent: libc::pid_t,
    /// A pids cgroup's `cgroup.procs`, open for writing: the child enters the group.
    cgroup_procs: Option<RawFd>,
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
        Self::with_kernel_abi(kernel_landlock_abi(), mode, limits, paths, layers, plugin)
    }

    /// [`Self::new`] for a kernel whose Landlock ABI is `kernel` (0: none).
    fn with_kernel_abi(
        kernel: u32,
        mode: SandboxMode,
        limits: &Limits,
        paths: &Paths,
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
            (build_ruleset(paths, layers.network.is_some())?, Some(abi))
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
            network_namespace: (layers.network == Some(NetworkMechanism::Namespace))
                .then(netns::take),
            rlimits: limits.rlimits(),
            // SAFETY: getpid has no preconditions.
            parent: unsafe { libc::getpid() },
            cgroup_procs: None,
            landlock_abi,
        })
    }

    /// Makes the child enter a cgroup, first thing, by writing `0` (itself) to `procs`: the
    /// group's `cgroup.procs`, open for writing, which must stay open until the spawn is done.
    pub(crate) fn enter_cgroup(&mut self, procs: RawFd) {
        self.cgroup_procs = Some(procs);
    }

    /// The function to run in the child between fork and exec. It makes only raw system calls
    /// on values captured by copy (no allocation, no locks): it is async-signal-safe.
    pub(crate) fn pre_exec(&self) -> impl FnMut() -> io::Result<()> + Send + Sync + 'static {
        let ruleset = self.ruleset.as_ref().map(|fd| fd.as_raw_fd());
        let drop_capabilities = self.drop_capabilities;
        let no_new_privs = self.no_new_privs;
        let filters = self.filters.clone();
        let run_as = self.run_as;
        let network_namespace = self.network_namespace.as_ref().map(NewNamespace::enter_fd);
        let rlimits = self.rlimits;
        let parent = self.parent;
        let cgroup_procs = self.cgroup_procs;
        move || {
            // SAFETY (whole block): raw system calls with valid arguments; nothing allocates.
            unsafe {
                // A session of its own, without a controlling terminal: the operator's
                // terminal cannot be opened as /dev/tty, read, or fed keystrokes (TIOCSTI).
                // The plugin leads its own process group too (pgid = pid), which the host and
                // the janitor signal as a whole.
                if libc::setsid() == -1 {
                    return Err(io::Error::last_os_error());
                }
                // Die with the host. The signal fires when the spawning *thread* exits, so the
                // janitor's lifeline covers the rest. If the host died before prctl, getppid
                // has changed: give up.
                check(libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                ))?;
                if libc::getppid() != parent {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                // Into the plugin's pids cgroup before anything else can fork.
                if let Some(fd) = cgroup_procs
                    && libc::write(fd, b"0".as_ptr().cast(), 1) != 1
                {
                    return Err(io::Error::last_os_error());
                }
                for (resource, value) in rlimits {
                    if let Some(value) = value {
                        let limit = libc::rlimit {
                            rlim_cur: value,
                            rlim_max: value,
                        };
                        check(libc::setrlimit(resource, &limit))?;
                    }
                }
                // Every descriptor above stderr closes at exec (the ruleset's is used below,
                // before exec). CLOSE_RANGE_CLOEXEC = 1 << 2.
                check_long(libc::syscall(libc::SYS_close_range, 3_u32, u32::MAX, 4_u32))?;
                // No network: a namespace of its own with only a loopback that is down
                // (needs CAP_SYS_ADMIN, so before the capabilities and the user go): the one
                // the host made for this launch, or a new one.
                match network_namespace {
                    Some(Some(fd)) => check(libc::setns(fd, libc::CLONE_NEWNET))?,
                    Some(None) => check(libc::unshare(libc::CLONE_NEWNET))?,
                    None => {}
                }
                if drop_capabilities {
                    // No capabilities after exec, even for a root host: a root plugin keeps
                    // uid 0 but loses CAP_SYS_PTRACE, CAP_DAC_OVERRIDE & co., which would
                    // otherwise let it read other processes' /proc files. Without
                    // CAP_SETPCAP (a non-root host) there are none to drop.
                    for cap in 0..=MAX_CAPABILITY {
                        if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) == -1 {
                            let errno = *libc::__errno_location();
                            if errno == libc::EINVAL || errno == libc::EPERM {
                                break;
                            }
                            return Err(io::Error::from_raw_os_error(errno));
                        }
                    }
                    // Ambient capabilities may be unsupported (EINVAL): nothing to clear then.
                    let _ = libc::prctl(
                        libc::PR_CAP_AMBIENT,
                        libc::PR_CAP_AMBIENT_CLEAR_ALL,
                        0,
                        0,
                        0,
                    );
                }
                if let Some((uid, gid)) = run_as {
                    // Another user, with no supplementary groups: after everything that needs
                    // root above, before no_new_privs and Landlock. The raw calls change this
                    // (only) thread, the child's only one.
                    check_long(libc::syscall(
                        libc::SYS_setgroups,
                        0_usize,
                        std::ptr::null::<libc::gid_t>(),
                    ))?;
                    check_long(libc::syscall(libc::SYS_setresgid, gid, gid, gid))?;
                    check_long(libc::syscall(libc::SYS_setresuid, uid, uid, uid))?;
                    // A change of credentials clears the parent-death signal: set it again.
                    check(libc::prctl(
                        libc::PR_SET_PDEATHSIG,
                        libc::SIGKILL as libc::c_ulong,
                    ))?;
                    if libc::getppid() != parent {
                        return Err(io::Error::from_raw_os_error(libc::ESRCH));
                    }
                }
                if no_new_privs {
                    check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
                }
                if let Some(fd) = ruleset {
                    check_long(libc::syscall(libc::SYS_landlock_restrict_self, fd, 0_u32))?;
                }
            }
            // Last, so that the calls above are not filtered; exec is allowed.
            if let Some(filters) = &filters {
                filters.install()?;
            }
            Ok(())
        }
    }
}

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn check_long(ret: libc::c_long) -> io::Result<()> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The Landlock ruleset allowing `paths` and the system paths; with `no_tcp`, every TCP
/// `bind` and `connect` is refused too (ABI ≥ 4; older kernels skip it).
fn build_ruleset(paths: &Paths, no_tcp: bool) -> Result<Option<OwnedFd>, SandboxError> {
    let abi = ABI::V6;
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
    Ok(ruleset.into())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let err = Prepared::with_kernel_abi(0, SandboxMode::Enforce, &limits, &paths, layers, "p")
            .unwrap_err();
        assert!(matches!(err, SandboxError::Unsupported), "{err}");
        assert!(err.to_string().contains("best-effort"), "{err}");
        let prepared =
            Prepared::with_kernel_abi(0, SandboxMode::BestEffort, &limits, &paths, layers, "p")
                .unwrap();
        assert_eq!(prepared.landlock_abi, None);
        assert!(prepared.no_new_privs);
        let off = Layers {
            seccomp: SeccompMode::Off,
            run_as: None,
            network: None,
        };
        let off =
            Prepared::with_kernel_abi(7, SandboxMode::Off, &limits, &paths, off, "p").unwrap();
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
