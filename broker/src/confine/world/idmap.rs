//! User namespaces for idmapped mounts: on a root host, the plugin's own code (its program's
//! directory, its interpreter's prefixes and import directories) is mounted in its world so
//! that what host root owns appears as owned by the plugin's id. The plugin does not run as
//! root, so without this a catalog only root may read (`0700`, as `mktemp -d` and most of
//! `/root` are) would be mounted and still unreadable.
//!
//! The operator's read and exec grants are **not** idmapped (`plan.rs`): `connect(2)` on a unix
//! socket needs only write permission on its inode, and a read-only mount does not refuse
//! that (`EROFS` is for files, directories and links), so an idmapped grant would make every
//! root-owned socket in it (`/run/docker.sock`, `0660`) the plugin's own to connect to. A
//! FIFO there is refused by Landlock's read-only rule either way.
//!
//! Read-only mounts change nothing on the host. A read-write one (a granted working
//! directory) stores what the plugin makes there as root's, as a plugin running as root did
//! before worlds: so it is idmapped only where the system-call filter refuses set-uid and
//! set-gid modes (`crate::confine::seccomp`), and not when the host made the directory for the
//! plugin's own id.
//!
//! The namespace maps uid and gid 0 (inside) to the plugin's ids (outside) and nothing else;
//! it holds no process. One per plugin id pair, made once and kept by the host process.

use std::collections::HashMap;
use std::ffi::c_void;
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd, RawFd};
use std::sync::Mutex;

use crate::confine::child::{BlockedSignals, Stack};

static NAMESPACES: Mutex<Option<HashMap<(u32, u32), OwnedFd>>> = Mutex::new(None);

/// The user namespace mapping 0 to `(uid, gid)`, for `MOUNT_ATTR_IDMAP`: made on first use,
/// then kept (the descriptor stays valid as long as the host process runs).
pub(crate) fn userns_for(ids: (u32, u32)) -> io::Result<RawFd> {
    let mut cache = NAMESPACES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let map = cache.get_or_insert_with(HashMap::new);
    if let Some(fd) = map.get(&ids) {
        return Ok(fd.as_raw_fd());
    }
    let fd = make(ids)?;
    let raw = fd.as_raw_fd();
    map.insert(ids, fd);
    Ok(raw)
}

/// The child that holds the new namespace until the host has written its maps and opened it.
extern "C" fn hold(_: *mut c_void) -> libc::c_int {
    loop {
        // SAFETY: pause has no preconditions; the host ends this child with SIGKILL.
        unsafe { libc::pause() };
    }
}

fn make((uid, gid): (u32, u32)) -> io::Result<OwnedFd> {
    let stack = Stack::new()?;
    let pid = {
        let _blocked = BlockedSignals::new()?;
        // SAFETY: the child runs `hold` on a stack of its own, touching no memory but that
        // stack, with every signal blocked (SIGKILL ends it); the host kills and reaps it
        // below before the stack is unmapped.
        unsafe {
            libc::clone(
                hold,
                stack.top(),
                libc::CLONE_VM | libc::CLONE_NEWUSER | libc::SIGCHLD,
                std::ptr::null_mut(),
            )
        }
    };
    if pid == -1 {
        return Err(io::Error::last_os_error());
    }
    let proc = format!("/proc/{pid}");
    let opened = std::fs::write(format!("{proc}/uid_map"), format!("0 {uid} 1"))
        .and_then(|()| std::fs::write(format!("{proc}/gid_map"), format!("0 {gid} 1")))
        .and_then(|()| std::fs::File::open(format!("{proc}/ns/user")));
    // SAFETY: pid is this process's unreaped child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL);
    }
    drop(stack);
    Ok(opened?.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_host_makes_one_user_namespace_per_plugin_id_and_keeps_it() {
        if rustix::process::geteuid().as_raw() != 0 {
            return;
        }
        let fd = userns_for((2_130_706_500, 2_130_706_501)).unwrap();
        assert_eq!(userns_for((2_130_706_500, 2_130_706_501)).unwrap(), fd);
        let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        assert!(link.to_string_lossy().starts_with("user:["), "{link:?}");
    }
}
