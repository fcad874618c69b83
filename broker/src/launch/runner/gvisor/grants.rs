//! A gVisor plugin's read-only grants as runsc sees them: idmapped views, in which host root's
//! files belong to [`GRANT_OWNER`], attached under the bundle in a mount namespace of runsc's
//! own ([`GrantViews`]).
//!
//! runsc's gofer connects to a host unix socket for the sandbox as host root, in any mount:
//! `--host-uds` is one setting for all of them (runsc 20221219, Debian 12's), and the plugin
//! needs it for its own socket directory. What stands between a plugin and a root daemon's
//! socket in a directory it may read (`/run/docker.sock`, `0660`) is gVisor's own permission
//! check, and the plugin runs as gVisor's root, the owner of every root-owned file. In these
//! views root's files are [`GRANT_OWNER`]'s and other users' show as the overflow id, so the
//! plugin is refused such a socket as any other user is (a FIFO runsc refuses anyway); it reads
//! what others may read. Its socket, state and delivered directories are mounted as they are.
//!
//! The views live in runsc's mount namespace only: they end with runsc, and a killed host
//! leaves at most the empty mount points in the bundle, which the janitor removes with it.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use crate::confine::child::c_string;
use crate::confine::world::idmap;
use crate::confine::world::sys::{self, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY};

/// Whom host root's files in a gVisor plugin's read-only grants belong to as the sandbox sees
/// them: an id no plugin runs as by default (the top of the 31-bit range, outside
/// [`DEFAULT_PLUGIN_IDS`](crate::confine::world::ids::DEFAULT_PLUGIN_IDS)), so that gVisor's
/// root inside owns none of them.
pub(crate) const GRANT_OWNER: (u32, u32) = (2_147_483_646, 2_147_483_646);

/// The directory of the bundle holding the views' mount points (`grants/0`, `grants/1`, …).
pub(crate) const VIEWS_DIR: &str = "grants";

/// The idmapped views of one launch's read-only grants, attached by runsc's child.
#[derive(Debug)]
pub(crate) struct GrantViews {
    /// (granted path, its view's mount point), as C strings for the child.
    views: Vec<(CString, CString)>,
    /// The user namespace mapping root to [`GRANT_OWNER`].
    userns: RawFd,
}

impl GrantViews {
    /// Mount points under `bundle` for the existing paths of `grants` (made here), and where
    /// runsc is to mount each grant from: its view, or on a host that cannot idmap (not root)
    /// the path itself. `None` views: nothing to attach.
    pub(crate) fn new(
        bundle: &Path,
        grants: &[PathBuf],
    ) -> io::Result<(Option<Self>, Vec<PathBuf>)> {
        if rustix::process::geteuid().as_raw() != 0 || grants.is_empty() {
            return Ok((None, grants.to_vec()));
        }
        let userns = idmap::userns_for(GRANT_OWNER)?;
        let dir = bundle.join(VIEWS_DIR);
        std::fs::create_dir(&dir)?;
        let mut views = Vec::new();
        let mut sources = Vec::new();
        for (i, grant) in grants.iter().enumerate() {
            let view = dir.join(i.to_string());
            match std::fs::metadata(grant) {
                Ok(m) if m.is_dir() => std::fs::create_dir(&view)?,
                Ok(_) => drop(std::fs::File::create(&view)?),
                // Missing: runsc reports it, naming the path.
                Err(_) => {
                    sources.push(grant.clone());
                    continue;
                }
            }
            views.push((
                c_string(grant.as_os_str().as_bytes())?,
                c_string(view.as_os_str().as_bytes())?,
            ));
            sources.push(view);
        }
        Ok((Some(Self { views, userns }), sources))
    }

    /// In runsc's child, before it executes runsc: a mount namespace of its own (private),
    /// then each grant cloned, made read-only and idmapped, and attached at its mount point.
    /// Raw system calls on prepared values only.
    pub(crate) fn attach(&self) -> io::Result<()> {
        // SAFETY: unshare and mount with NUL-terminated strings (or NULL where allowed).
        unsafe {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        for (grant, view) in &self.views {
            let tree = sys::clone_tree(libc::AT_FDCWD, grant)?;
            let attached = sys::set_attrs_idmapped(
                tree,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                self.userns,
            )
            .and_then(|()| sys::attach(tree, libc::AT_FDCWD, view));
            sys::close(tree);
            attached?;
        }
        Ok(())
    }
}
