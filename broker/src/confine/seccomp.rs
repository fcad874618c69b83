//! The plugin's system-call filter (seccomp-BPF), for plugins in any language.
//!
//! The filter is compiled to BPF once per host process, in the host (`Filters::new`, with
//! [`seccompiler`]), and loaded between fork and exec with the raw `seccomp(2)` call on the
//! pre-built program (`Filters::install`): nothing is allocated in the child.
//!
//! # The default profile
//! A **deny-list**: every system call is allowed except these, which fail with `EPERM` (the
//! errno a program gets for a missing privilege, which it already handles):
//!
//! | what | calls |
//! |---|---|
//! | other processes: trace, read or change them | `ptrace`, `process_vm_readv`, `process_vm_writev`, `process_madvise`, `kcmp`, `pidfd_getfd`; `prlimit64`, `sched_setaffinity`, `sched_setscheduler`, `sched_setparam`, `sched_setattr`, `migrate_pages`, `move_pages` on any pid but 0 (the caller); `setpriority`, `getpriority`, `ioprio_set` unless `PRIO_PROCESS`/`IOPRIO_WHO_PROCESS` with who 0; `kill(-1, …)` |
//! | kernel-wide state | `mount`, `umount2`, `pivot_root`, `chroot`, the new mount API (`fsopen`, `fsconfig`, `fsmount`, `fspick`, `move_mount`, `open_tree`, `mount_setattr`); `kexec_load`, `kexec_file_load`, `init_module`, `finit_module`, `delete_module`; `swapon`, `swapoff`, `reboot`, `acct`, `quotactl`, `quotactl_fd`; `settimeofday`, `clock_settime`, `adjtimex`, `clock_adjtime`; `sethostname`, `setdomainname`, `syslog`, `vhangup`, `lookup_dcookie`; `iopl`, `ioperm`, `uselib` (x86-64) |
//! | large kernel attack surface | `bpf`, `perf_event_open`, `userfaultfd`, `keyctl`, `add_key`, `request_key`, `fanotify_init`, `open_by_handle_at`, `name_to_handle_at`, `socket(AF_VSOCK)` |
//! | new namespaces | `setns`; `unshare` and `clone` with any `CLONE_NEW*` flag |
//! | execution domain | `personality` except the values Docker allows (`PER_LINUX`, `PER_LINUX32`, `UNAME26` with either, and the query `0xffffffff`): no `ADDR_NO_RANDOMIZE`, no `READ_IMPLIES_EXEC` |
//! | the terminal | `ioctl` `TIOCSTI` (push input) and `TIOCLINUX` (console selection paste) |
//! | set-uid and set-gid files | `chmod`, `fchmod`, `fchmodat`, `fchmodat2`, `open`, `openat`, `creat`, `mknod`, `mknodat` with `S_ISUID` or `S_ISGID` in the mode (a root host's plugin writes its working directory through an idmapped mount, where what it makes is host root's) |
//! | other ABIs | x32 system calls (`__X32_SYSCALL_BIT`) fail with `EPERM`; a call of another architecture (`int 0x80` on x86-64) kills the plugin |
//!
//! and these fail with `ENOSYS`, as on a kernel without them, so that libc and runtimes fall
//! back: `clone3` (glibc ≥ 2.34 then uses `clone`, whose flags the filter can inspect — `clone3`
//! passes them in memory it cannot read), `openat2` (likewise its mode; callers use `openat`) and `io_uring_setup`/`_enter`/`_register` (libuv and
//! others fall back to epoll; io_uring would run socket and file operations without the
//! system calls the filter sees).
//!
//! # Where it differs from Docker's default profile, and why
//! - **Deny-list, not allow-list.** Docker allows ~350 named calls and refuses the rest; a
//!   call newer than the profile fails in every container until the profile catches up (the
//!   reason for `clone3`'s and `faccessat2`'s long trail of container breakage). A plugin
//!   host runs binaries of any language and any age on the operator's kernel, so tether
//!   refuses what reaches beyond the plugin and allows the rest: a new kernel call is allowed
//!   until it is known to be dangerous. The cost: a new dangerous call is allowed until this
//!   list names it (Landlock, no capabilities and `no_new_privs` still apply).
//! - **Per-pid argument filters, the fallback's.** Docker relies on a pid namespace, so
//!   `prlimit64`, `setpriority`, `sched_setaffinity`, `kill` cannot name the host. A plugin in a
//!   world has one too (`crate::confine::world`) and cannot name a host pid; these rules are
//!   for the fallback without namespaces, where it shares the host's pid namespace, so they
//!   are refused for any pid but 0 (they apply in a world too, where they cost nothing). Consequence: a plugin
//!   that passes its own pid or a thread id (`pthread_setaffinity_np`,
//!   `pthread_setschedparam` on another thread) instead of 0 gets `EPERM`.
//! - **The ptrace family is refused** (Docker allows it on kernels ≥ 4.8, inside the pid
//!   namespace): debuggers and sanitizers that trace their own children do not work under it.
//! - **`adjtimex`, `clock_adjtime`, `name_to_handle_at` are refused** (Docker allows them;
//!   the first two to read the clock state with modes 0).
//! - **x86 and x32 system calls are refused** (Docker allows both sub-architectures): a 32-bit
//!   plugin binary needs `seccomp = "off"`.
//! - **No capability-dependent rules**: Docker opens calls to containers given a capability;
//!   tether plugins have none ([`SandboxMode::Off`](crate::confine::SandboxMode::Off) keeps the
//!   host's, and the filter still applies).

use std::io;
use std::sync::{Arc, OnceLock};

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};
use serde::Deserialize;

/// Whether a seccomp filter confines the plugin's system calls.
///
/// Written in manifests as `seccomp = "default" | "off"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SeccompMode {
    /// tether's default profile (see the [module docs](self)): calls that reach beyond the
    /// plugin's own process tree (`ptrace`, `prlimit64` on other pids, …), kernel-wide state
    /// (`mount`, `bpf`, `kexec_*`, modules, clocks, keyrings, …), new namespaces and terminal
    /// input injection are refused.
    #[default]
    Default,
    /// No system-call filter. An explicit opt-out for plugins that need a refused call.
    Off,
}

impl std::fmt::Display for SeccompMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Default => "default",
            Self::Off => "off",
        })
    }
}

/// Why the system-call filter cannot be built.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SeccompError {
    /// The host's architecture has no filter (tether builds them for x86-64, AArch64 and
    /// RISC-V 64).
    #[error(
        "tether has no seccomp filter for this architecture ({arch}); set `seccomp = \"off\"` (builder: `.seccomp(SeccompMode::Off)`) to run plugins here"
    )]
    UnsupportedArch {
        /// `std::env::consts::ARCH`.
        arch: &'static str,
    },
    /// Compiling the filter failed: a bug in tether.
    #[error(
        "compiling the seccomp filter failed ({reason}); this is a bug in tether: please report it, and set `seccomp = \"off\"` meanwhile"
    )]
    Compile {
        /// seccompiler's error.
        reason: String,
    },
}

/// What the filters of one launch must refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Policy {
    /// The default profile.
    pub(crate) mode: SeccompMode,
    /// Every socket family but `AF_UNIX` (the network policy's fallback mechanism).
    pub(crate) inet: bool,
}

/// The compiled programs of one [`Policy`], loaded in order between fork and exec.
#[derive(Debug)]
pub(crate) struct Filters {
    programs: Vec<BpfProgram>,
}

/// `SECCOMP_SET_MODE_FILTER` (`linux/seccomp.h`).
const SECCOMP_SET_MODE_FILTER: libc::c_ulong = 1;
/// The most instructions the kernel accepts in one program (`BPF_MAXINSNS`).
const BPF_MAXINSNS: usize = 4096;
/// `CLONE_NEWTIME`, valid for `unshare` only (in `clone`'s flags the bit is part of the exit
/// signal).
const CLONE_NEWTIME: u64 = 0x80;
/// `IOPRIO_WHO_PROCESS` (`linux/ioprio.h`).
const IOPRIO_WHO_PROCESS: u64 = 1;

/// The `CLONE_NEW*` flags `clone` can take.
const CLONE_NAMESPACES: [libc::c_int; 7] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// The `personality` values allowed (Docker's): `PER_LINUX`, `PER_LINUX32`, `UNAME26`,
/// `UNAME26 | PER_LINUX32`, and the query.
const PERSONALITIES: [u64; 5] = [0, 8, 0x20000, 0x20008, 0xffff_ffff];

impl Filters {
    /// The filters for `policy`, compiled once per host process; `None` when nothing is
    /// filtered.
    pub(crate) fn new(policy: Policy) -> Result<Option<Arc<Self>>, SeccompError> {
        static CACHE: [OnceLock<Result<Arc<Filters>, SeccompError>>; 3] =
            [OnceLock::new(), OnceLock::new(), OnceLock::new()];
        let slot = match (policy.mode, policy.inet) {
            (SeccompMode::Off, false) => return Ok(None),
            (SeccompMode::Default, false) => 0,
            (SeccompMode::Default, true) => 1,
            (SeccompMode::Off, true) => 2,
        };
        CACHE[slot]
            .get_or_init(|| Self::compile(policy).map(Arc::new))
            .clone()
            .map(Some)
    }

    fn compile(policy: Policy) -> Result<Self, SeccompError> {
        let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|_| {
            SeccompError::UnsupportedArch {
                arch: std::env::consts::ARCH,
            }
        })?;
        let compile = |rules: Rules, errno: i32| -> Result<BpfProgram, SeccompError> {
            let filter = SeccompFilter::new(
                rules.into_iter().collect(),
                SeccompAction::Allow,
                SeccompAction::Errno(errno.unsigned_abs()),
                arch,
            )
            .map_err(compile_error)?;
            filter.try_into().map_err(compile_error)
        };
        let mut programs = Vec::new();
        if policy.mode == SeccompMode::Default {
            programs.push(compile(refused()?, libc::EPERM)?);
            programs.push(compile(absent(), libc::ENOSYS)?);
        }
        if policy.inet {
            let mut rules = vec![(
                libc::SYS_socket,
                vec![rule(vec![cond(
                    0,
                    SeccompCmpOp::Ne,
                    libc::AF_UNIX as u64,
                )?])?],
            )];
            if policy.mode == SeccompMode::Off {
                // io_uring creates sockets without socket(2).
                rules.extend(absent());
            }
            programs.push(compile(rules, libc::EPERM)?);
        }
        if let Some(guard) = x32_guard() {
            programs.push(guard);
        }
        if let Some(long) = programs.iter().find(|p| p.len() > BPF_MAXINSNS) {
            return Err(SeccompError::Compile {
                reason: format!("a program of {} instructions", long.len()),
            });
        }
        Ok(Self { programs })
    }

    /// Loads the filters into the calling process. Only raw system calls on the pre-built
    /// programs: async-signal-safe, for between fork and exec. Needs `no_new_privs` (or
    /// `CAP_SYS_ADMIN`).
    pub(crate) fn install(&self) -> io::Result<()> {
        #[repr(C)]
        struct SockFprog {
            len: libc::c_ushort,
            filter: *const sock_filter,
        }
        for program in &self.programs {
            let fprog = SockFprog {
                // Checked in `compile`: at most BPF_MAXINSNS (4096) instructions.
                len: program.len() as libc::c_ushort,
                filter: program.as_ptr(),
            };
            // SAFETY: the kernel copies the program from valid memory the host owns and that
            // lives as long as this call.
            let ret = unsafe {
                libc::syscall(
                    libc::SYS_seccomp,
                    SECCOMP_SET_MODE_FILTER,
                    0_u64,
                    std::ptr::from_ref(&fprog),
                )
            };
            if ret != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

type Rules = Vec<(i64, Vec<SeccompRule>)>;

fn compile_error(e: impl std::fmt::Display) -> SeccompError {
    SeccompError::Compile {
        reason: e.to_string(),
    }
}

/// A condition on the low 32 bits of argument `arg` (the kernel reads these arguments as
/// `int`/`unsigned int`, so the high bits must not let a call slip through).
fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SeccompError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(compile_error)
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SeccompError> {
    SeccompRule::new(conditions).map_err(compile_error)
}

/// Matches when argument `arg` is not 0 (a pid other than the caller's).
fn not_self(arg: u8) -> Result<Vec<SeccompRule>, SeccompError> {
    Ok(vec![rule(vec![cond(arg, SeccompCmpOp::Ne, 0)?])?])
}

/// Matches when `which` (argument 0) is not `self_which` or `who` (argument 1) is not 0.
fn not_self_who(self_which: u64) -> Result<Vec<SeccompRule>, SeccompError> {
    Ok(vec![
        rule(vec![cond(0, SeccompCmpOp::Ne, self_which)?])?,
        rule(vec![cond(1, SeccompCmpOp::Ne, 0)?])?,
    ])
}

/// Matches when argument `arg` has any of `flags` set.
fn any_flag(
    arg: u8,
    flags: impl IntoIterator<Item = u64>,
) -> Result<Vec<SeccompRule>, SeccompError> {
    flags
        .into_iter()
        .map(|flag| rule(vec![cond(arg, SeccompCmpOp::MaskedEq(flag), flag)?]))
        .collect()
}

/// The calls of the default profile refused with `EPERM` (see the module docs).
fn refused() -> Result<Rules, SeccompError> {
    let always: &[i64] = &[
        // Other processes.
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_process_madvise,
        libc::SYS_kcmp,
        libc::SYS_pidfd_getfd,
        // Kernel-wide state.
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_mount_setattr,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_reboot,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_quotactl_fd,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
        libc::SYS_adjtimex,
        libc::SYS_clock_adjtime,
        libc::SYS_sethostname,
        libc::SYS_setdomainname,
        libc::SYS_syslog,
        libc::SYS_vhangup,
        libc::SYS_lookup_dcookie,
        // Large kernel attack surface.
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_fanotify_init,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        // Namespaces.
        libc::SYS_setns,
    ];
    let mut rules: Rules = always.iter().map(|nr| (*nr, Vec::new())).collect();
    #[cfg(target_arch = "x86_64")]
    rules.extend([libc::SYS_iopl, libc::SYS_ioperm, libc::SYS_uselib].map(|nr| (nr, Vec::new())));
    for nr in [
        libc::SYS_prlimit64,
        libc::SYS_sched_setaffinity,
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setattr,
        libc::SYS_migrate_pages,
        libc::SYS_move_pages,
    ] {
        rules.push((nr, not_self(0)?));
    }
    let prio_process = libc::PRIO_PROCESS as u64;
    rules.push((libc::SYS_setpriority, not_self_who(prio_process)?));
    rules.push((libc::SYS_getpriority, not_self_who(prio_process)?));
    rules.push((libc::SYS_ioprio_set, not_self_who(IOPRIO_WHO_PROCESS)?));
    // kill(-1, …): every process the plugin's user may signal.
    rules.push((
        libc::SYS_kill,
        vec![rule(vec![cond(0, SeccompCmpOp::Eq, u64::from(u32::MAX))?])?],
    ));
    let clone_flags = CLONE_NAMESPACES.map(|f| u64::from(f.unsigned_abs()));
    rules.push((libc::SYS_clone, any_flag(0, clone_flags)?));
    rules.push((
        libc::SYS_unshare,
        any_flag(0, clone_flags.into_iter().chain([CLONE_NEWTIME]))?,
    ));
    // Set-uid and set-gid files: a root host's plugin writes its granted working directory
    // through an idmapped mount, where what it makes is root's on the host
    // (`crate::confine::world::idmap`); a set-uid file made there would be host root's.
    let special = [u64::from(libc::S_ISUID), u64::from(libc::S_ISGID)];
    let mut modes: Vec<(i64, u8)> = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (libc::SYS_fchmodat2, 2),
        (libc::SYS_openat, 3),
        (libc::SYS_mknodat, 2),
    ];
    #[cfg(target_arch = "x86_64")]
    modes.extend([
        (libc::SYS_chmod, 1),
        (libc::SYS_open, 2),
        (libc::SYS_creat, 1),
        (libc::SYS_mknod, 1),
    ]);
    for (nr, arg) in modes {
        rules.push((nr, any_flag(arg, special)?));
    }
    let personality = PERSONALITIES
        .into_iter()
        .map(|value| cond(0, SeccompCmpOp::Ne, value))
        .collect::<Result<_, _>>()?;
    rules.push((libc::SYS_personality, vec![rule(personality)?]));
    // `Ioctl` is `c_ulong` with glibc and `c_int` with musl.
    #[allow(clippy::unnecessary_cast)]
    rules.push((
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(1, SeccompCmpOp::Eq, libc::TIOCSTI as u64)?])?,
            rule(vec![cond(1, SeccompCmpOp::Eq, libc::TIOCLINUX as u64)?])?,
        ],
    ));
    rules.push((
        libc::SYS_socket,
        vec![rule(vec![cond(
            0,
            SeccompCmpOp::Eq,
            libc::AF_VSOCK as u64,
        )?])?],
    ));
    Ok(rules)
}

/// The calls refused with `ENOSYS`, so that callers fall back.
fn absent() -> Rules {
    [
        libc::SYS_clone3,
        // Its mode is in a struct the filter cannot read (see the set-uid rules); callers
        // fall back to openat.
        libc::SYS_openat2,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ]
    .map(|nr| (nr, Vec::new()))
    .into()
}

/// On x86-64, a program refusing x32 system calls (numbers with `__X32_SYSCALL_BIT`) with
/// `EPERM`: they share the x86-64 audit architecture, so seccompiler's architecture check lets
/// them through, and a deny-list keyed on x86-64 numbers would miss every one of them.
fn x32_guard() -> Option<BpfProgram> {
    #[cfg(target_arch = "x86_64")]
    {
        const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
        const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
        const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
        const BPF_RET_K: u16 = 0x06;
        const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
        const X32_SYSCALL_BIT: u32 = 0x4000_0000;
        // struct seccomp_data { int nr; __u32 arch; … }
        const NR: u32 = 0;
        const ARCH: u32 = 4;
        let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
        Some(vec![
            op(BPF_LD_W_ABS, 0, 0, ARCH),
            // Another architecture: the other programs decide (they kill it).
            op(BPF_JMP_JEQ_K, 0, 3, AUDIT_ARCH_X86_64),
            op(BPF_LD_W_ABS, 0, 0, NR),
            op(BPF_JMP_JGE_K, 0, 1, X32_SYSCALL_BIT),
            op(
                BPF_RET_K,
                0,
                0,
                libc::SECCOMP_RET_ERRNO | libc::EPERM.unsigned_abs(),
            ),
            op(BPF_RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        ])
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct T {
        m: SeccompMode,
    }

    #[test]
    fn modes_are_written_as_manifests_spell_them_and_default_to_the_safe_one() {
        for (text, mode) in [("default", SeccompMode::Default), ("off", SeccompMode::Off)] {
            let t: T = toml::from_str(&format!("m = \"{text}\"")).unwrap();
            assert_eq!(t.m, mode);
            assert_eq!(mode.to_string(), text);
        }
        assert_eq!(SeccompMode::default(), SeccompMode::Default);
        assert!(toml::from_str::<T>("m = \"loose\"").is_err());
    }

    #[test]
    fn each_policy_compiles_once_into_programs_the_kernel_accepts() {
        let off = Policy {
            mode: SeccompMode::Off,
            inet: false,
        };
        assert!(Filters::new(off).unwrap().is_none());
        for (mode, inet) in [
            (SeccompMode::Default, false),
            (SeccompMode::Default, true),
            (SeccompMode::Off, true),
        ] {
            let policy = Policy { mode, inet };
            let a = Filters::new(policy).unwrap().unwrap();
            let b = Filters::new(policy).unwrap().unwrap();
            assert!(Arc::ptr_eq(&a, &b), "compiled twice: {policy:?}");
            assert!(!a.programs.is_empty());
            assert!(a.programs.iter().all(|p| p.len() <= BPF_MAXINSNS));
        }
    }
}
