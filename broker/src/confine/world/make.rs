//! Making a world ahead of its launch: namespaces, the base tree, the scratch tmpfs, `/proc`,
//! a loopback that is up, and the keeper as pid 1 ([`make`]).
//!
//! A host thread starts the maker with `clone(CLONE_VM | CLONE_NEWUSER | CLONE_NEWNS |
//! CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET)`; the maker waits until the host
//! has written its id maps and taken descriptors of its namespaces — its first mount namespace,
//! a copy of the host's tree owned by the world's user namespace, is kept as the **host view**
//! from which each launch clones its own paths — then, on its own stack and with raw system
//! calls only (it runs on the host's memory, concurrently with the host):
//! 1. moves to a second mount namespace (the world's), private;
//! 2. clones every path of the base tree as a detached mount (still with the host's user ids, so
//!    that a root host's paths are reachable), then becomes the keeper's user;
//! 3. builds the root tmpfs: mount points, the clones (read-only, nosuid), the links, the
//!    scratch tmpfs's `tmp/`, `shm/` and `delivered/`, a `/proc` of its pid namespace with
//!    `sys`, `sysrq-trigger`, `irq` and `bus` read-only;
//! 4. attaches it, `pivot_root`s into it and detaches the old root;
//! 5. names its host `tether`, brings its loopback up, sends the host the scratch tmpfs (a
//!    read-write handle: the host writes delivered files through it), and `exec`s the keeper
//!    from its memfd with every signal blocked and `SIGCHLD` ignored.

use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::time::Duration;

use crate::confine::child::{BlockedSignals, Stack, c_string};
use crate::confine::world::ids::WorldIds;
use crate::confine::world::keeper::{self, Control};
use crate::confine::world::maker::{Bind, Context, maker, relative};
use crate::confine::world::plan::{self, Tree};
use crate::confine::world::reaper;

/// How long making one world may take before the host gives up on it.
pub(crate) const MAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Inodes per MiB of a world's scratch tmpfs (one per 4 KiB: ordinary files).
pub(crate) const SCRATCH_INODES_PER_MIB: u64 = 256;

/// A world made ahead, ready for one launch. Dropping it ends its keeper, and with it
/// everything that still runs in it.
#[derive(Debug)]
pub(crate) struct World {
    /// Ends the keeper when dropped; first, so that it ends before the descriptors close.
    guard: Option<Keeper>,
    pub(crate) ids: WorldIds,
    /// The scratch tmpfs's size in MiB as made.
    pub(crate) scratch_mib: u64,
    pub(crate) user: OwnedFd,
    pub(crate) view: OwnedFd,
    pub(crate) mnt: OwnedFd,
    pub(crate) net: OwnedFd,
    pub(crate) ipc: OwnedFd,
    pub(crate) uts: OwnedFd,
    pub(crate) pid: OwnedFd,
    /// The scratch tmpfs, read-write: `tmp/`, `shm/`, `delivered/`; taken by the launch.
    scratch: Option<OwnedFd>,
    /// The world's `/proc`, `/tmp`, `/dev/shm` and delivered files (for the Landlock rules).
    pub(crate) proc: OwnedFd,
    pub(crate) tmp: OwnedFd,
    pub(crate) shm: OwnedFd,
    pub(crate) delivered: OwnedFd,
}

/// What a world keeps once its plugin is started: its keeper and the keeper's control socket.
/// The namespace and directory descriptors the launch entered are closed by then — a live
/// plugin would otherwise hold 12 host descriptors it never uses again (bench/BENCHMARKS.md,
/// Decisions). Dropping it ends the keeper, and with it everything that still runs in the world.
#[derive(Debug)]
pub(crate) struct Keeper {
    pid: u32,
    control: Option<Arc<Control>>,
}

impl Keeper {
    /// Ends the keeper, and with it everything that still runs in its world, and returns
    /// once all of it has exited: for the plugin's exit, which is published only when what
    /// ends with the plugin has ended.
    pub(crate) fn end(mut self) {
        if let Some(control) = self.control.take() {
            control.close();
        }
        // 0: reaped here, not again on drop.
        reaper::kill_and_wait(std::mem::take(&mut self.pid));
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        // The keeper ends when its control socket closes (closed here even while a dialler
        // still holds a handle); SIGKILL makes sure, and the reaper waits for it off this
        // thread (its exit waits for the world's last process).
        if let Some(control) = self.control.take() {
            control.close();
        }
        if self.pid != 0 {
            reaper::reap(self.pid);
        }
    }
}

impl World {
    /// The scratch tmpfs (read-write, holding `tmp/`, `shm/` and `delivered/`), once.
    pub(crate) fn take_scratch(&mut self) -> Option<OwnedFd> {
        self.scratch.take()
    }

    /// The keeper's control socket (TCP sockets in the world's network namespace). It is
    /// closed and the keeper ends when the world is dropped, whoever still holds this.
    pub(crate) fn control(&self) -> Option<Arc<Control>> {
        self.guard.as_ref().and_then(|k| k.control.clone())
    }

    /// The keeper's process id (the host's view); 0 once handed over.
    #[cfg(test)]
    pub(crate) fn keeper(&self) -> u32 {
        self.guard.as_ref().map_or(0, |k| k.pid)
    }

    /// The keeper alone, the world's descriptors closed: what a started plugin's world keeps.
    pub(crate) fn into_keeper(mut self) -> Option<Keeper> {
        self.guard.take()
    }
}

/// The steps of the maker, for the error message.
const STEPS: &[&str] = &[
    "waiting for the host",
    "making the world's mount namespace",
    "cloning the system paths",
    "becoming the keeper's user",
    "making the root tmpfs",
    "making mount points",
    "mounting the system paths",
    "making links",
    "making the scratch tmpfs",
    "mounting /proc",
    "entering the new root",
    "bringing the loopback up",
    "handing the scratch tmpfs to the host",
    "starting the keeper",
];

/// Makes a world for `ids` with the base tree `base` and a scratch tmpfs of `scratch_mib`.
pub(crate) fn make(ids: WorldIds, base: &Tree, scratch_mib: u64) -> io::Result<World> {
    let program = keeper::program().map_err(io::Error::other)?;
    let binds = base
        .binds
        .iter()
        .map(Bind::new)
        .collect::<io::Result<Vec<_>>>()?;
    let mut trees = vec![-1; binds.len()];
    let links = base
        .links
        .iter()
        .map(|l| {
            Ok((
                c_string(l.target.as_os_str().as_bytes())?,
                relative(&l.link)?,
            ))
        })
        .collect::<io::Result<Vec<_>>>()?;
    let mut dir_paths: Vec<std::path::PathBuf> = Vec::new();
    for path in base
        .binds
        .iter()
        .map(|b| b.path.as_path())
        .chain(base.links.iter().map(|l| l.link.as_path()))
    {
        for dir in plan::ancestors(path) {
            if !dir_paths.contains(&dir) {
                dir_paths.push(dir);
            }
        }
    }
    let dirs = dir_paths
        .iter()
        .map(|d| relative(d))
        .collect::<io::Result<Vec<_>>>()?;
    let size = c_string(format!("{scratch_mib}m").as_bytes())?;
    let inodes = c_string(
        scratch_mib
            .saturating_mul(SCRATCH_INODES_PER_MIB)
            .max(1024)
            .to_string()
            .as_bytes(),
    )?;
    let scratch_options = [
        (c"size", size.as_c_str()),
        (c"nr_inodes", inodes.as_c_str()),
        (c"mode", c"0755"),
    ];
    let (host_end, keeper_end) = keeper::control_pair()?;
    let go = AtomicU32::new(0);
    let mut context = Context {
        go: &go,
        go_timeout: libc::timespec {
            tv_sec: MAKE_TIMEOUT
                .as_secs()
                .try_into()
                .unwrap_or(libc::time_t::MAX),
            tv_nsec: 0,
        },
        failed_step: AtomicU32::new(0),
        errno: AtomicI32::new(0),
        ids,
        binds: &binds,
        trees: &mut trees,
        links: &links,
        dirs: &dirs,
        scratch_options: &scratch_options,
        program: program.as_raw_fd(),
        control: keeper_end.as_raw_fd(),
        argv: [c"tether-keeper".as_ptr(), std::ptr::null()],
        envp: [std::ptr::null()],
    };
    let stack = Stack::new()?;
    let flags = libc::CLONE_VM
        | libc::CLONE_VFORK
        | libc::CLONE_PARENT_SETTID
        | libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWNET
        | libc::SIGCHLD;
    // The maker waits for its id maps, which only another thread can write while this one is
    // suspended (CLONE_VFORK: the maker runs on this thread's memory and thread-local storage,
    // so nothing else may use them until it has exec'd).
    let maker_pid = AtomicI32::new(0);
    let gave_up = AtomicBool::new(false);
    let (pid, namespaces) = std::thread::scope(|scope| {
        let host_side = std::thread::Builder::new()
            .name("tether-world-maps".into())
            .spawn_scoped(scope, || map_and_go(&maker_pid, &gave_up, &go, ids));
        let pid = match &host_side {
            Err(_) => -1,
            Ok(_) => {
                let _blocked = BlockedSignals::new();
                // SAFETY: the maker runs on a stack of its own and reads `context`, which
                // outlives it: with CLONE_VFORK this thread is suspended until it has exec'd
                // or exited. It makes only raw system calls.
                unsafe {
                    libc::clone(
                        maker,
                        stack.top(),
                        flags,
                        std::ptr::from_mut(&mut context).cast(),
                        maker_pid.as_ptr(),
                    )
                }
            }
        };
        if pid == -1 {
            gave_up.store(true, Ordering::Release);
        }
        let namespaces = match host_side {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the world's map thread panicked"))),
            Err(e) => Err(e),
        };
        (pid, namespaces)
    });
    if pid == -1 {
        return Err(io::Error::last_os_error());
    }
    // The keeper's end now lives only in the keeper (or nowhere, if the maker gave up).
    drop(keeper_end);
    let control = Control::new(host_end);
    let result = namespaces.and_then(|ns| finish(pid, ns, &control, ids, scratch_mib));
    match result {
        Ok(mut world) => {
            if let Some(guard) = &mut world.guard {
                guard.control = Some(Arc::new(control));
            }
            Ok(world)
        }
        Err(e) => {
            drop(control);
            reaper::kill_and_wait(pid.unsigned_abs());
            let step = context.failed_step.load(Ordering::Acquire) as usize;
            let errno = context.errno.load(Ordering::Acquire);
            if errno != 0 {
                let what = STEPS.get(step).copied().unwrap_or("making the world");
                return Err(io::Error::new(
                    io::Error::from_raw_os_error(errno).kind(),
                    format!("{what}: {}", io::Error::from_raw_os_error(errno)),
                ));
            }
            Err(e)
        }
    }
}

/// Descriptors of a world's namespaces, taken before the maker leaves the host view.
struct Namespaces {
    user: OwnedFd,
    view: OwnedFd,
    net: OwnedFd,
    ipc: OwnedFd,
    uts: OwnedFd,
    pid: OwnedFd,
}

/// The host's part while the maker waits: its id maps and its namespaces, then `go`. On
/// failure the maker is killed (which releases the suspended thread).
fn map_and_go(
    maker_pid: &AtomicI32,
    gave_up: &AtomicBool,
    go: &AtomicU32,
    ids: WorldIds,
) -> io::Result<Namespaces> {
    let deadline = std::time::Instant::now() + MAKE_TIMEOUT;
    let pid = loop {
        let pid = maker_pid.load(Ordering::Acquire);
        if pid > 0 {
            break pid;
        }
        if gave_up.load(Ordering::Acquire) || std::time::Instant::now() > deadline {
            return Err(io::Error::other("the world's maker did not start"));
        }
        std::thread::yield_now();
    };
    let taken = take_namespaces(pid, ids);
    match &taken {
        Ok(_) => {
            go.store(1, Ordering::Release);
            // SAFETY: wakes the maker waiting on `go` (a futex word in memory both share).
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    go.as_ptr(),
                    libc::FUTEX_WAKE,
                    1,
                    std::ptr::null::<libc::timespec>(),
                )
            };
        }
        // SAFETY: pid is the host's unreaped child; SIGKILL reaches a pid namespace's init
        // from its parent's namespace.
        Err(_) => unsafe {
            libc::kill(pid, libc::SIGKILL);
        },
    }
    taken
}

fn take_namespaces(pid: libc::pid_t, ids: WorldIds) -> io::Result<Namespaces> {
    let proc = format!("/proc/{pid}");
    if !ids.setgroups {
        std::fs::write(format!("{proc}/setgroups"), "deny")?;
    }
    std::fs::write(format!("{proc}/uid_map"), ids.uids.map_line())?;
    std::fs::write(format!("{proc}/gid_map"), ids.gids.map_line())?;
    let ns = |kind: &str| -> io::Result<OwnedFd> {
        Ok(std::fs::File::open(format!("{proc}/ns/{kind}"))?.into())
    };
    Ok(Namespaces {
        user: ns("user")?,
        view: ns("mnt")?,
        net: ns("net")?,
        ipc: ns("ipc")?,
        uts: ns("uts")?,
        pid: ns("pid")?,
    })
}

/// The host's part once the maker has exec'd the keeper: the scratch tmpfs it sent, the keeper's
/// `R`, the world's mount namespace and `/proc`.
fn finish(
    pid: libc::pid_t,
    ns: Namespaces,
    control: &Control,
    ids: WorldIds,
    scratch_mib: u64,
) -> io::Result<World> {
    let scratch = control.receive_scratch(MAKE_TIMEOUT)?;
    if !control.ready(MAKE_TIMEOUT)? {
        return Err(io::Error::other(
            "the world's maker ended before its keeper ran",
        ));
    }
    let proc = format!("/proc/{pid}");
    let mnt: OwnedFd = std::fs::File::open(format!("{proc}/ns/mnt"))?.into();
    let proc_dir = open_path(&format!("{proc}/root/proc"))?;
    let scratch_dir =
        |name: &str| open_path(&format!("/proc/self/fd/{}/{name}", scratch.as_raw_fd()));
    let (tmp, shm, delivered) = (
        scratch_dir("tmp")?,
        scratch_dir("shm")?,
        scratch_dir("delivered")?,
    );
    Ok(World {
        guard: Some(Keeper {
            pid: pid.unsigned_abs(),
            control: None,
        }),
        ids,
        scratch_mib,
        user: ns.user,
        view: ns.view,
        mnt,
        net: ns.net,
        ipc: ns.ipc,
        uts: ns.uts,
        pid: ns.pid,
        scratch: Some(scratch),
        proc: proc_dir,
        tmp,
        shm,
        delivered,
    })
}

fn open_path(path: &str) -> io::Result<OwnedFd> {
    let path = c_string(path.as_bytes())?;
    // SAFETY: a NUL-terminated path; the flags make an O_PATH, close-on-exec descriptor.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just opened, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::confine::world::ids::{DEFAULT_PLUGIN_IDS, WorldIds};
    use crate::confine::world::plan::RealFs;

    fn host_ids() -> (u32, u32) {
        (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
        )
    }

    #[test]
    fn a_world_holds_only_the_system_paths_a_scratch_tmp_and_its_own_proc() {
        let ids = WorldIds::new(host_ids(), None, false, DEFAULT_PLUGIN_IDS).unwrap();
        let base = plan::base(&RealFs);
        let world = make(ids, &base, 16).unwrap();
        let root = format!("/proc/{}/root", world.keeper());
        let mut names: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for expected in ["dev", "etc", "proc", "run", "tmp", "usr"] {
            assert!(names.contains(&expected.to_owned()), "{names:?}");
        }
        for absent in ["home", "root", "var", "work", "srv", "opt", "mnt"] {
            assert!(!names.contains(&absent.to_owned()), "{absent} in {names:?}");
        }
        assert_eq!(std::fs::read_dir(format!("{root}/tmp")).unwrap().count(), 0);
        // Its /proc lists its pid namespace: the keeper alone, as pid 1.
        let pids: Vec<String> = std::fs::read_dir(format!("{root}/proc"))
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            .collect();
        assert_eq!(pids, ["1"]);
        let status = std::fs::read_to_string(format!("/proc/{}/status", world.keeper())).unwrap();
        let nspid = status.lines().find(|l| l.starts_with("NSpid:")).unwrap();
        assert!(nspid.ends_with("\t1"), "{nspid}");
        let keeper = world.keeper();
        drop(world);
        // Ended and reaped by the reaper thread.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::path::Path::new(&format!("/proc/{keeper}")).exists() {
            assert!(std::time::Instant::now() < deadline, "the keeper lives on");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
