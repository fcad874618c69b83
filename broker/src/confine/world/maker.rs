//! The maker of a world, on the host's memory between its `clone` and the keeper's `exec`
//! (see `crate::confine::world::make`): raw system calls only, on what the host prepared in
//! [`Context`].

use std::ffi::{CStr, CString, c_void};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

use crate::confine::child::{c_string, errno};
use crate::confine::world::ids::WorldIds;
use crate::confine::world::keeper::KEEPER_CONTROL_FD;
use crate::confine::world::plan::{self, Access, PROC_READ_ONLY};
use crate::confine::world::sys::{
    self, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY,
};

/// The size of a world's root tmpfs, which holds only mount points and links.
const ROOT_TMPFS_SIZE: &CStr = c"1m";
/// Inodes of a world's root tmpfs.
const ROOT_TMPFS_INODES: &CStr = c"4096";
/// The world's host name.
const HOSTNAME: &[u8] = b"tether";

/// One bind of the base tree, as the maker takes it.
pub(crate) struct Bind {
    /// The host path (absolute).
    pub(crate) source: CString,
    /// The path in the world, relative to its root.
    pub(crate) target: CString,
    pub(crate) dir: bool,
    pub(crate) attrs: u64,
}

impl Bind {
    pub(crate) fn new(bind: &plan::Bind) -> io::Result<Self> {
        let attrs = match bind.access {
            Access::ReadOnly => MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            Access::ReadWrite => MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            Access::Device => MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
        };
        Ok(Self {
            source: c_string(bind.path.as_os_str().as_bytes())?,
            target: relative(&bind.path)?,
            dir: bind.dir,
            attrs,
        })
    }
}

/// `path` without its leading `/`, as a C string.
pub(crate) fn relative(path: &Path) -> io::Result<CString> {
    let bytes = path.as_os_str().as_bytes();
    c_string(bytes.strip_prefix(b"/").unwrap_or(bytes))
}

/// Everything the maker reads (prepared by the host) and writes (how it failed).
pub(crate) struct Context<'a> {
    pub(crate) go: &'a AtomicU32,
    /// How long the maker waits for `go` before it gives up.
    pub(crate) go_timeout: libc::timespec,
    pub(crate) failed_step: AtomicU32,
    pub(crate) errno: AtomicI32,
    pub(crate) ids: WorldIds,
    pub(crate) binds: &'a [Bind],
    /// The detached clones of `binds`, filled in by the maker (-1: missing on the host).
    pub(crate) trees: &'a mut [RawFd],
    pub(crate) links: &'a [(CString, CString)],
    pub(crate) dirs: &'a [CString],
    pub(crate) scratch_options: &'a [(&'a CStr, &'a CStr)],
    pub(crate) program: RawFd,
    pub(crate) control: RawFd,
    pub(crate) argv: [*const libc::c_char; 2],
    pub(crate) envp: [*const libc::c_char; 1],
}

/// The maker: see the module docs. Raw system calls only; it ends with the keeper's `exec` or
/// `_exit(127)` after recording the failed step and errno in the context.
pub(crate) extern "C" fn maker(arg: *mut c_void) -> libc::c_int {
    // SAFETY: `arg` is the host's `Context`, alive until this process has exec'd or exited; the
    // host only reads its atomics meanwhile, and `trees` only after this process is gone.
    let context = unsafe { &mut *arg.cast::<Context<'_>>() };
    let mut step = 0;
    let result = run(context, &mut step);
    let e = match result {
        Ok(()) => libc::EINVAL,
        Err(e) => e.raw_os_error().unwrap_or(libc::EINVAL),
    };
    context.failed_step.store(step, Ordering::Release);
    context.errno.store(e, Ordering::Release);
    // SAFETY: ends this process without running the host's exit handlers.
    unsafe { libc::_exit(127) }
}

fn run(context: &mut Context<'_>, step: &mut u32) -> io::Result<()> {
    // A host that exits before it lets the maker go (a short-lived `tether list` whose reserve
    // was still making a world) must not leave it waiting, holding copies of the host's
    // descriptors (a caller reading the host's stdout to its end would wait with it): the maker
    // dies with the thread that started it, and waits at most `go_timeout`. The keeper clears
    // this: it ends with its control socket instead.
    // SAFETY: prctl with plain values.
    crate::confine::child::check(unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0)
    })?;
    while context.go.load(Ordering::Acquire) == 0 {
        // SAFETY: waits on the futex word while it is 0, at most `timeout`.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_futex,
                context.go.as_ptr(),
                libc::FUTEX_WAIT,
                0,
                &raw const context.go_timeout,
            )
        };
        if ret == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::ETIMEDOUT) {
            return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
        }
    }
    *step = 1;
    // SAFETY (whole block): raw system calls on values prepared by the host.
    unsafe {
        crate::confine::child::check(libc::unshare(libc::CLONE_NEWNS))?;
        crate::confine::child::check(libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))?;
        libc::umask(0);
    }
    *step = 2;
    for (bind, tree) in context.binds.iter().zip(context.trees.iter_mut()) {
        match sys::clone_tree(libc::AT_FDCWD, &bind.source) {
            Ok(fd) => *tree = fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => *tree = -1,
            Err(e) => return Err(e),
        }
        if *tree >= 0 {
            sys::set_attrs(*tree, bind.attrs)?;
        }
    }
    *step = 3;
    let (uid, gid) = context.ids.keeper;
    sys::become_user(uid, gid, context.ids.setgroups)?;
    *step = 4;
    let root = sys::new_fs(
        c"tmpfs",
        &[
            (c"size", ROOT_TMPFS_SIZE),
            (c"nr_inodes", ROOT_TMPFS_INODES),
            (c"mode", c"0755"),
        ],
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
    )?;
    *step = 5;
    for dir in context.dirs {
        sys::make_dir(root, dir, 0o755)?;
    }
    for dir in [c"proc", c"tmp", c"dev", c"dev/shm", c"run", c"run/tether"] {
        sys::make_dir(root, dir, 0o755)?;
    }
    *step = 6;
    for (bind, tree) in context.binds.iter().zip(context.trees.iter()) {
        if *tree < 0 {
            continue;
        }
        if bind.dir {
            sys::make_dir(root, &bind.target, 0o755)?;
        } else {
            sys::make_file(root, &bind.target)?;
        }
        sys::attach(*tree, root, &bind.target)?;
        sys::close(*tree);
    }
    *step = 7;
    for (target, link) in context.links {
        sys::make_link(target, root, link)?;
    }
    *step = 8;
    let scratch = sys::new_fs(
        c"tmpfs",
        context.scratch_options,
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
    )?;
    for (dir, mode, at, attrs) in [
        (c"tmp", 0o1777, c"tmp", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV),
        (
            c"shm",
            0o1777,
            c"dev/shm",
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        ),
        (
            c"delivered",
            0o755,
            c"run/tether",
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
        ),
    ] {
        sys::make_dir(scratch, dir, mode)?;
        let tree = sys::clone_tree(scratch, dir)?;
        sys::set_attrs(tree, attrs)?;
        sys::attach(tree, root, at)?;
        sys::close(tree);
    }
    *step = 9;
    let proc = sys::new_fs(
        c"proc",
        &[],
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
    )?;
    sys::attach(proc, root, c"proc")?;
    sys::close(proc);
    let mut path = [0_u8; 32];
    for part in PROC_READ_ONLY {
        let at = proc_path(&mut path, part);
        match sys::clone_tree(root, at) {
            Ok(tree) => {
                sys::set_attrs(
                    tree,
                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                )?;
                sys::attach(tree, root, at)?;
                sys::close(tree);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => return Err(e),
        }
    }
    *step = 10;
    // The new root goes over the (private copy of the) host's /proc, the one directory every
    // Linux has; the copy is detached right after.
    sys::attach(root, libc::AT_FDCWD, c"/proc")?;
    sys::close(root);
    // SAFETY (whole block): raw system calls with constant arguments.
    unsafe {
        crate::confine::child::check(libc::chdir(c"/proc".as_ptr()))?;
        crate::confine::child::check_long(libc::syscall(
            libc::SYS_pivot_root,
            c".".as_ptr(),
            c".".as_ptr(),
        ))?;
        crate::confine::child::check(libc::umount2(c".".as_ptr(), libc::MNT_DETACH))?;
        crate::confine::child::check(libc::chdir(c"/".as_ptr()))?;
        crate::confine::child::check(libc::sethostname(HOSTNAME.as_ptr().cast(), HOSTNAME.len()))?;
    }
    *step = 11;
    loopback_up()?;
    *step = 12;
    send_fd(context.control, scratch)?;
    sys::close(scratch);
    *step = 13;
    exec_keeper(context)
}

/// `proc/<part>` in `buf`, NUL-terminated.
fn proc_path<'b>(buf: &'b mut [u8; 32], part: &str) -> &'b CStr {
    let prefix = b"proc/";
    let len = (prefix.len() + part.len()).min(buf.len() - 1);
    buf[..prefix.len()].copy_from_slice(prefix);
    buf[prefix.len()..len].copy_from_slice(&part.as_bytes()[..len - prefix.len()]);
    buf[len] = 0;
    // Built just above with one NUL at its end and none before (the parts are plain names).
    CStr::from_bytes_until_nul(&buf[..=len]).unwrap_or(c"proc")
}

/// Brings `lo` up in this process's network namespace.
fn loopback_up() -> io::Result<()> {
    // SAFETY (whole block): a datagram socket and two ioctls on a local ifreq.
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if socket == -1 {
            return Err(io::Error::last_os_error());
        }
        let mut request = std::mem::zeroed::<libc::ifreq>();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo") {
            *slot = *byte as libc::c_char;
        }
        let mut ok = libc::ioctl(socket, libc::SIOCGIFFLAGS, &mut request) != -1;
        if ok {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            ok = libc::ioctl(socket, libc::SIOCSIFFLAGS, &request) != -1;
        }
        let e = errno();
        sys::close(socket);
        if ok {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(e))
        }
    }
}

/// Sends `fd` with the status byte `S` on `socket`.
fn send_fd(socket: RawFd, fd: RawFd) -> io::Result<()> {
    let status = [b'S'];
    let mut iov = libc::iovec {
        iov_base: status.as_ptr().cast_mut().cast(),
        iov_len: 1,
    };
    let mut control = [0_u64; 4];
    // SAFETY (whole block): msghdr and cmsghdr built in local buffers large enough for one
    // descriptor (CMSG_SPACE(4) = 24 bytes <= 32).
    unsafe {
        let mut msg = std::mem::zeroed::<libc::msghdr>();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(4) as usize;
        let header = libc::CMSG_FIRSTHDR(&msg);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(4) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<i32>(), fd);
        if libc::sendmsg(socket, &msg, libc::MSG_NOSIGNAL) == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Descriptors as the keeper expects them, its signals, no capabilities, then its `exec`.
fn exec_keeper(context: &Context<'_>) -> io::Result<()> {
    use crate::confine::child::{check, check_long};
    // SAFETY (whole block): raw system calls on descriptors this process holds and on local
    // or host-prepared, NUL-terminated data.
    unsafe {
        // Out of the way of 3 and 4 first, then in place; everything else closed.
        let control = libc::fcntl(context.control, libc::F_DUPFD_CLOEXEC, 10);
        let program = libc::fcntl(context.program, libc::F_DUPFD_CLOEXEC, 10);
        if control == -1 || program == -1 {
            return Err(io::Error::last_os_error());
        }
        check(libc::dup3(control, KEEPER_CONTROL_FD, 0))?;
        check(libc::dup3(program, KEEPER_CONTROL_FD + 1, libc::O_CLOEXEC))?;
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null == -1 {
            return Err(io::Error::last_os_error());
        }
        for target in 0..3 {
            check(libc::dup2(null, target))?;
        }
        check_long(libc::syscall(
            libc::SYS_close_range,
            (KEEPER_CONTROL_FD + 2) as u32,
            u32::MAX,
            0_u32,
        ))?;
        // Orphans are reaped by the kernel; every other signal stays blocked (the mask the
        // host set around clone is kept across exec).
        let mut ignore = std::mem::zeroed::<libc::sigaction>();
        ignore.sa_sigaction = libc::SIG_IGN;
        check(libc::sigaction(
            libc::SIGCHLD,
            &ignore,
            std::ptr::null_mut(),
        ))?;
        for cap in 0..=63 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) == -1 {
                break;
            }
        }
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        // The keeper outlives the thread that made it; it ends with its control socket.
        check(libc::prctl(libc::PR_SET_PDEATHSIG, 0, 0, 0, 0))?;
        libc::syscall(
            libc::SYS_execveat,
            KEEPER_CONTROL_FD + 1,
            c"".as_ptr(),
            context.argv.as_ptr(),
            context.envp.as_ptr(),
            libc::AT_EMPTY_PATH,
        );
    }
    Err(io::Error::last_os_error())
}
