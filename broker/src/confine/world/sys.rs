//! The system calls a world is built with: the mount API (`open_tree`, `mount_setattr`,
//! `move_mount`, `fsopen`/`fsconfig`/`fsmount`, `fspick`), namespaces and a few more, as raw
//! calls that allocate nothing — they run in children on the host's memory, between `clone` and
//! `exec`. Each returns the errno on failure.

use std::ffi::CStr;
use std::io;
use std::os::fd::RawFd;

use crate::confine::child::{check, check_long};

/// `OPEN_TREE_CLONE` (`linux/mount.h`).
const OPEN_TREE_CLONE: libc::c_uint = 1;
/// `AT_RECURSIVE`.
const AT_RECURSIVE: libc::c_uint = 0x8000;
/// `MOVE_MOUNT_F_EMPTY_PATH`.
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
/// `FSOPEN_CLOEXEC`, `FSMOUNT_CLOEXEC`, `FSPICK_CLOEXEC`.
const CLOEXEC_FLAG: libc::c_uint = 1;
/// `FSCONFIG_SET_STRING`.
const FSCONFIG_SET_STRING: libc::c_uint = 1;
/// `FSCONFIG_CMD_CREATE`.
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
/// `FSCONFIG_CMD_RECONFIGURE`.
const FSCONFIG_CMD_RECONFIGURE: libc::c_uint = 7;

/// `MOUNT_ATTR_RDONLY`.
pub(crate) const MOUNT_ATTR_RDONLY: u64 = 0x1;
/// `MOUNT_ATTR_NOSUID`.
pub(crate) const MOUNT_ATTR_NOSUID: u64 = 0x2;
/// `MOUNT_ATTR_NODEV`.
pub(crate) const MOUNT_ATTR_NODEV: u64 = 0x4;
/// `MOUNT_ATTR_NOEXEC`.
pub(crate) const MOUNT_ATTR_NOEXEC: u64 = 0x8;
/// `MOUNT_ATTR_IDMAP`.
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// `struct mount_attr`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn fd(ret: libc::c_long) -> io::Result<RawFd> {
    // A descriptor fits an i32 (the kernel returns one).
    check_long(ret).map(|fd| fd as RawFd)
}

/// A detached copy of the mount tree at `path` (relative to `dir`), submounts included,
/// close-on-exec.
pub(crate) fn clone_tree(dir: RawFd, path: &CStr) -> io::Result<RawFd> {
    // SAFETY: a valid descriptor or AT_FDCWD and a NUL-terminated path.
    fd(unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            dir,
            path.as_ptr(),
            OPEN_TREE_CLONE | AT_RECURSIVE | libc::O_CLOEXEC as libc::c_uint,
        )
    })
}

/// Sets `attrs` (`MOUNT_ATTR_*`) on the detached tree `tree`, submounts included.
pub(crate) fn set_attrs(tree: RawFd, attrs: u64) -> io::Result<()> {
    set_attrs_at(
        tree,
        c"",
        libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
        attrs,
    )
}

/// Sets `attrs` on the mount at `path` only (not its submounts).
pub(crate) fn set_attrs_on(path: &CStr, attrs: u64) -> io::Result<()> {
    set_attrs_at(libc::AT_FDCWD, path, 0, attrs)
}

/// Sets `attrs` on the detached tree `tree`, submounts included, and makes it an idmapped
/// mount through the user namespace `userns` (`MOUNT_ATTR_IDMAP`).
pub(crate) fn set_attrs_idmapped(tree: RawFd, attrs: u64, userns: RawFd) -> io::Result<()> {
    set_attrs_full(
        tree,
        c"",
        libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
        attrs | MOUNT_ATTR_IDMAP,
        userns,
    )
}

fn set_attrs_at(dir: RawFd, path: &CStr, flags: libc::c_uint, attrs: u64) -> io::Result<()> {
    set_attrs_full(dir, path, flags, attrs, 0)
}

fn set_attrs_full(
    dir: RawFd,
    path: &CStr,
    flags: libc::c_uint,
    attrs: u64,
    userns: RawFd,
) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: attrs,
        attr_clr: 0,
        propagation: 0,
        userns_fd: u64::try_from(userns).unwrap_or(0),
    };
    // SAFETY: a valid descriptor, a NUL-terminated path and a mount_attr of the size passed.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dir,
            path.as_ptr(),
            flags,
            std::ptr::from_ref(&attr),
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// Attaches the detached tree `tree` at `path` (relative to `dir`).
pub(crate) fn attach(tree: RawFd, dir: RawFd, path: &CStr) -> io::Result<()> {
    // SAFETY: valid descriptors and NUL-terminated paths.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            dir,
            path.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// A new, detached file system of type `fs` configured with `options` (key, value), mounted
/// with `attrs`; close-on-exec.
pub(crate) fn new_fs(fs: &CStr, options: &[(&CStr, &CStr)], attrs: u64) -> io::Result<RawFd> {
    // SAFETY: a NUL-terminated file-system name.
    let context = fd(unsafe { libc::syscall(libc::SYS_fsopen, fs.as_ptr(), CLOEXEC_FLAG) })?;
    let made = configure(context, options, FSCONFIG_CMD_CREATE).and_then(|()| {
        // SAFETY: a file-system context just created.
        fd(unsafe { libc::syscall(libc::SYS_fsmount, context, CLOEXEC_FLAG, attrs) })
    });
    close(context);
    made
}

/// Changes `options` of the file system mounted at `path` (e.g. a tmpfs's `size`).
pub(crate) fn reconfigure(path: &CStr, options: &[(&CStr, &CStr)]) -> io::Result<()> {
    // SAFETY: a NUL-terminated path.
    let context = fd(unsafe {
        libc::syscall(
            libc::SYS_fspick,
            libc::AT_FDCWD,
            path.as_ptr(),
            CLOEXEC_FLAG,
        )
    })?;
    let done = configure(context, options, FSCONFIG_CMD_RECONFIGURE);
    close(context);
    done
}

fn configure(context: RawFd, options: &[(&CStr, &CStr)], command: libc::c_uint) -> io::Result<()> {
    for (key, value) in options {
        // SAFETY: a file-system context and NUL-terminated strings.
        check_long(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                context,
                FSCONFIG_SET_STRING,
                key.as_ptr(),
                value.as_ptr(),
                0,
            )
        })?;
    }
    // SAFETY: a file-system context.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            context,
            command,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        )
    })
    .map(drop)
}

/// Makes the directory `path` (relative to `dir`) with `mode`; one that exists is fine.
/// `Ok(true)` when this call made it.
pub(crate) fn make_dir(dir: RawFd, path: &CStr, mode: libc::mode_t) -> io::Result<bool> {
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::mkdirat(dir, path.as_ptr(), mode) } == -1 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(e);
        }
        return Ok(false);
    }
    Ok(true)
}

/// Sets the mode of `path`.
pub(crate) fn change_mode(path: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: a NUL-terminated path.
    check(unsafe { libc::fchmodat(libc::AT_FDCWD, path.as_ptr(), mode, 0) })
}

/// Makes an empty file at `path` (relative to `dir`) for a file to be mounted on; one that
/// exists is fine.
pub(crate) fn make_file(dir: RawFd, path: &CStr) -> io::Result<()> {
    // SAFETY: a NUL-terminated path.
    let fd = unsafe {
        libc::openat(
            dir,
            path.as_ptr(),
            libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0o644,
        )
    };
    if fd == -1 {
        return Err(io::Error::last_os_error());
    }
    close(fd);
    Ok(())
}

/// Makes the symbolic link `path` (relative to `dir`) → `target`; one that exists is fine.
pub(crate) fn make_link(target: &CStr, dir: RawFd, path: &CStr) -> io::Result<()> {
    // SAFETY: NUL-terminated strings.
    if unsafe { libc::symlinkat(target.as_ptr(), dir, path.as_ptr()) } == -1 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(e);
        }
    }
    Ok(())
}

/// Joins the namespace `fd` of kind `kind` (`CLONE_NEW*`).
pub(crate) fn enter(fd: RawFd, kind: libc::c_int) -> io::Result<()> {
    // SAFETY: setns on a descriptor the caller holds.
    check(unsafe { libc::setns(fd, kind) })
}

/// Switches to `uid`/`gid` in every slot; with `clear_groups`, drops supplementary groups
/// first (only where the user namespace allows `setgroups`).
pub(crate) fn become_user(uid: u32, gid: u32, clear_groups: bool) -> io::Result<()> {
    // SAFETY (whole block): raw credential calls on this process's only thread.
    unsafe {
        if clear_groups {
            check_long(libc::syscall(
                libc::SYS_setgroups,
                0_usize,
                std::ptr::null::<libc::gid_t>(),
            ))?;
        }
        check_long(libc::syscall(libc::SYS_setresgid, gid, gid, gid))?;
        check_long(libc::syscall(libc::SYS_setresuid, uid, uid, uid))?;
    }
    Ok(())
}

/// Closes `fd`, ignoring errors.
pub(crate) fn close(fd: RawFd) {
    // SAFETY: the caller owns fd.
    unsafe { libc::close(fd) };
}
