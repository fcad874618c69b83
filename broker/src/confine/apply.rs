//! The confinement as the launch child applies it, between its start and `exec`, on the host's
//! memory: only raw, async-signal-safe system calls on values the host prepared
//! (`crate::confine::sandbox::Prepared::child`).

use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

use crate::confine::caps::{CAP_DAC_READ_SEARCH, keep_only_read_search};
use crate::confine::child::Hooks;
use crate::confine::child::{check, check_long};
use crate::confine::seccomp::Filters;
use crate::confine::world::enter::Entry;

/// Highest capability number tried when dropping the capability bounding set (the kernel
/// answers `EINVAL` past its last one; Linux 6.x has 41).
const MAX_CAPABILITY: libc::c_ulong = 63;

/// The confinement as the child applies it (see [`Prepared::child`]).
#[derive(Debug)]
pub(crate) struct ChildConfinement {
    pub(crate) ruleset: Option<RawFd>,
    pub(crate) drop_capabilities: bool,
    pub(crate) no_new_privs: bool,
    pub(crate) filters: Option<Arc<Filters>>,
    pub(crate) run_as: Option<(u32, u32)>,
    pub(crate) read_search: bool,
    pub(crate) network_namespace: Option<Option<RawFd>>,
    pub(crate) rlimits: [(libc::__rlimit_resource_t, Option<u64>); 6],
    pub(crate) parent: libc::pid_t,
    pub(crate) cgroup_procs: Option<RawFd>,
    pub(crate) world: Option<Entry>,
}

impl Hooks for ChildConfinement {
    fn before(&mut self) -> io::Result<()> {
        // SAFETY (whole block): raw system calls with valid arguments; nothing allocates.
        unsafe {
            // Into the plugin's pids cgroup before anything else can fork.
            if let Some(fd) = self.cgroup_procs
                && libc::write(fd, b"0".as_ptr().cast(), 1) != 1
            {
                return Err(io::Error::last_os_error());
            }
            for (resource, value) in self.rlimits {
                if let Some(value) = value {
                    let limit = libc::rlimit {
                        rlim_cur: value,
                        rlim_max: value,
                    };
                    check(libc::setrlimit(resource, &limit))?;
                }
            }
            // Every descriptor above stderr closes at exec (the ruleset's is used before
            // exec). CLOSE_RANGE_CLOEXEC = 1 << 2.
            check_long(libc::syscall(libc::SYS_close_range, 3_u32, u32::MAX, 4_u32))?;
        }
        Ok(())
    }

    fn enters_world(&self) -> bool {
        self.world.is_some()
    }

    fn enter(&mut self) -> io::Result<()> {
        match &mut self.world {
            Some(entry) => entry.enter(),
            None => Ok(()),
        }
    }

    fn confine(&mut self) -> io::Result<()> {
        let in_world = self.world.is_some();
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
            // has changed: give up. (In a world the host is outside the plugin's pid
            // namespace — getppid is 0 — and the world's keeper ends it with the host.)
            check(libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
            ))?;
            if !in_world && libc::getppid() != self.parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            // No network: a namespace of its own with only a loopback that is down
            // (needs CAP_SYS_ADMIN, so before the capabilities and the user go): the one
            // the host made for this launch, or a new one.
            match self.network_namespace {
                Some(Some(fd)) => check(libc::setns(fd, libc::CLONE_NEWNET))?,
                Some(None) => check(libc::unshare(libc::CLONE_NEWNET))?,
                None => {}
            }
            if self.drop_capabilities {
                // No capabilities after exec, even for a root host: a root plugin keeps
                // uid 0 but loses CAP_SYS_PTRACE, CAP_DAC_OVERRIDE & co., which would
                // otherwise let it read other processes' /proc files. Without
                // CAP_SETPCAP (a non-root host) there are none to drop.
                for cap in 0..=MAX_CAPABILITY {
                    if self.read_search && cap == libc::c_ulong::from(CAP_DAC_READ_SEARCH) {
                        continue;
                    }
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
            if let Some((uid, gid)) = self.run_as {
                // Another user, with no supplementary groups: after everything that needs
                // root above, before no_new_privs and Landlock. The raw calls change this
                // (only) thread, the child's only one.
                check_long(libc::syscall(
                    libc::SYS_setgroups,
                    0_usize,
                    std::ptr::null::<libc::gid_t>(),
                ))?;
                check_long(libc::syscall(libc::SYS_setresgid, gid, gid, gid))?;
                if self.read_search {
                    // Keep the permitted set across the change of uid, to keep one of it.
                    check(libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0))?;
                }
                check_long(libc::syscall(libc::SYS_setresuid, uid, uid, uid))?;
                if self.read_search {
                    keep_only_read_search()?;
                }
                // A change of credentials clears the parent-death signal: set it again.
                check(libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                ))?;
                if libc::getppid() != self.parent {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            if self.no_new_privs {
                check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
            }
            if let Some(fd) = self.ruleset {
                check_long(libc::syscall(libc::SYS_landlock_restrict_self, fd, 0_u32))?;
            }
        }
        // Last, so that the calls above are not filtered; exec is allowed.
        if let Some(filters) = &self.filters {
            filters.install()?;
        }
        Ok(())
    }
}
