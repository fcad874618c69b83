//! The launch's part of a world, carried out by the launch child (on the host's memory, raw
//! system calls only) before it starts the plugin in it: join the world's user namespace and its
//! network, IPC and UTS namespaces; clone the launch's own paths from the host view (with the
//! host's ids, so that a root host's paths are reachable); become the plugin's user; join the
//! world's mount namespace and mount the clones there; make the root read-only; resize the
//! scratch tmpfs to the launch's `disk_mib`; a cgroup namespace rooted at the plugin's cgroup;
//! then the pid namespace, for the plugin the child starts next.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd as _, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::PathBuf;

use crate::confine::child::{c_string, check};
use crate::confine::world::idmap;
use crate::confine::world::make::{SCRATCH_INODES_PER_MIB, World};
use crate::confine::world::maker;
use crate::confine::world::plan::{self, Tree};
use crate::confine::world::sys::{self, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY};

/// The mode of the directories a launch makes only to hold its paths (`/work`, `/tmp/site`
/// on the way to `/tmp/site/catalog/bin`): walked through, never listed.
pub(crate) const SKELETON_DIR_MODE: libc::mode_t = 0o111;

/// What the launch child needs to enter a world, prepared by the host. The descriptors are the
/// host's (the child has a copy of its table); the world they belong to must outlive the spawn.
#[derive(Debug)]
pub(crate) struct Entry {
    user: RawFd,
    view: RawFd,
    mnt: RawFd,
    /// The world's network namespace; `None` for a plugin with the host's network.
    net: Option<RawFd>,
    ipc: RawFd,
    uts: RawFd,
    pid: RawFd,
    plugin: (u32, u32),
    setgroups: bool,
    /// A root host's: the user namespace mapping root to the plugin's ids, for idmapping the
    /// read-only binds (see [`super::idmap`]); the binds are then cloned from the host's own
    /// mount namespace.
    idmap: Option<RawFd>,
    /// Whether the read-write binds are idmapped too (only where the system-call filter
    /// refuses set-uid and set-gid modes: what the plugin makes there is root's on the host).
    idmap_rw: bool,
    /// Path, whether a directory, mount attributes, whether it may be idmapped (not an
    /// operator's grant: see [`plan::Bind::idmap`]).
    binds: Vec<(CString, bool, u64, bool)>,
    /// Their detached clones while the child works (-1: missing on the host).
    trees: Vec<RawFd>,
    links: Vec<(CString, CString)>,
    dirs: Vec<CString>,
    /// Which of `dirs` are the world's own, not the host's once the binds are mounted.
    skeleton: Vec<bool>,
    /// Which of `dirs` the child made (it writes them: the vector is made before).
    made: Vec<bool>,
    /// `size` and `nr_inodes` for the scratch tmpfs, when the launch's differ from the world's.
    resize: Option<(CString, CString)>,
}

impl Entry {
    /// The entry into `world` for a plugin running as `plugin` (uid, gid), with the launch's own
    /// mounts `tree`, the host's network when `host_network`, and a scratch tmpfs of
    /// `disk_mib`.
    pub(crate) fn new(
        world: &World,
        tree: &Tree,
        plugin: (u32, u32),
        host_network: bool,
        disk_mib: u64,
        idmap_rw: bool,
    ) -> io::Result<Self> {
        let binds = tree
            .binds
            .iter()
            .map(|b| {
                let attrs = maker::Bind::new(b)?.attrs;
                Ok((
                    c_string(b.path.as_os_str().as_bytes())?,
                    b.dir,
                    attrs,
                    b.idmap,
                ))
            })
            .collect::<io::Result<Vec<_>>>()?;
        let links = tree
            .links
            .iter()
            .map(|l| {
                Ok((
                    c_string(l.target.as_os_str().as_bytes())?,
                    c_string(l.link.as_os_str().as_bytes())?,
                ))
            })
            .collect::<io::Result<Vec<_>>>()?;
        let mut dirs: Vec<PathBuf> = Vec::new();
        for path in tree
            .binds
            .iter()
            .map(|b| &b.path)
            .chain(tree.links.iter().map(|l| &l.link))
        {
            for dir in plan::ancestors(path) {
                if !dirs.contains(&dir) {
                    dirs.push(dir);
                }
            }
        }
        // Only a directory no bind covers is the world's own: below a bind (or a bind's own
        // mount point) the path reaches the host's directory once mounted.
        let skeleton: Vec<bool> = dirs
            .iter()
            .map(|d| !tree.binds.iter().any(|b| d.starts_with(&b.path)))
            .collect();
        let dirs = dirs
            .iter()
            .map(|d| c_string(d.as_os_str().as_bytes()))
            .collect::<io::Result<Vec<_>>>()?;
        let resize = (disk_mib != world.scratch_mib)
            .then(|| -> io::Result<_> {
                let inodes = disk_mib.saturating_mul(SCRATCH_INODES_PER_MIB).max(1024);
                Ok((
                    c_string(format!("{disk_mib}m").as_bytes())?,
                    c_string(inodes.to_string().as_bytes())?,
                ))
            })
            .transpose()?;
        // A root host has the capabilities over its own mount namespace that idmapping needs;
        // a non-root host's plugins run as the host's own user and need none.
        let idmap = if world.ids.setgroups {
            Some(idmap::userns_for(plugin)?)
        } else {
            None
        };
        Ok(Self {
            idmap,
            idmap_rw,
            user: world.user.as_raw_fd(),
            view: world.view.as_raw_fd(),
            mnt: world.mnt.as_raw_fd(),
            net: (!host_network).then(|| world.net.as_raw_fd()),
            ipc: world.ipc.as_raw_fd(),
            uts: world.uts.as_raw_fd(),
            pid: world.pid.as_raw_fd(),
            plugin,
            setgroups: world.ids.setgroups,
            trees: vec![-1; binds.len()],
            binds,
            links,
            made: vec![false; dirs.len()],
            skeleton,
            dirs,
            resize,
        })
    }

    /// Enters the world (see the module docs). Raw system calls only: for the launch child.
    pub(crate) fn enter(&mut self) -> io::Result<()> {
        if let Some(userns) = self.idmap {
            // A root host clones from its own mount namespace, with its capabilities there.
            self.clone_binds(Some(userns))?;
        }
        sys::enter(self.user, libc::CLONE_NEWUSER)?;
        if let Some(net) = self.net {
            sys::enter(net, libc::CLONE_NEWNET)?;
        }
        sys::enter(self.ipc, libc::CLONE_NEWIPC)?;
        sys::enter(self.uts, libc::CLONE_NEWUTS)?;
        if self.idmap.is_none() {
            sys::enter(self.view, libc::CLONE_NEWNS)?;
            self.clone_binds(None)?;
        }
        let (uid, gid) = self.plugin;
        sys::become_user(uid, gid, self.setgroups)?;
        sys::enter(self.mnt, libc::CLONE_NEWNS)?;
        for (dir, made) in self.dirs.iter().zip(self.made.iter_mut()) {
            *made = sys::make_dir(libc::AT_FDCWD, dir, 0o755)?;
        }
        for ((path, dir, _, _), tree) in self.binds.iter().zip(self.trees.iter()) {
            if *tree < 0 {
                continue;
            }
            if *dir {
                sys::make_dir(libc::AT_FDCWD, path, 0o755)?;
            } else {
                sys::make_file(libc::AT_FDCWD, path)?;
            }
            sys::attach(*tree, libc::AT_FDCWD, path)?;
            sys::close(*tree);
        }
        for (target, link) in &self.links {
            sys::make_link(target, libc::AT_FDCWD, link)?;
        }
        // The directories made only to hold this launch's paths can be walked through, not
        // listed: the plugin sees no name of the host's on the way to what it was given.
        for ((dir, made), skeleton) in self.dirs.iter().zip(&self.made).zip(&self.skeleton) {
            if *made && *skeleton {
                sys::change_mode(dir, SKELETON_DIR_MODE)?;
            }
        }
        sys::set_attrs_on(
            c"/",
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        )?;
        if let Some((size, inodes)) = &self.resize {
            let options: [(&CStr, &CStr); 2] = [(c"size", size), (c"nr_inodes", inodes)];
            sys::reconfigure(c"/tmp", &options)?;
        }
        // SAFETY: unshare of this process's cgroup namespace (it is in the plugin's cgroup).
        check(unsafe { libc::unshare(libc::CLONE_NEWCGROUP) })?;
        sys::enter(self.pid, libc::CLONE_NEWPID)
    }

    /// Detached clones of the launch's binds, from the current mount namespace; the read-only
    /// ones of the plugin's own code idmapped through `idmap` where the file system allows it
    /// (never an operator's grant: see [`plan`]).
    fn clone_binds(&mut self, idmap: Option<RawFd>) -> io::Result<()> {
        let idmap_rw = self.idmap_rw;
        for ((path, _, attrs, may_idmap), tree) in self.binds.iter().zip(self.trees.iter_mut()) {
            *tree = match sys::clone_tree(libc::AT_FDCWD, path) {
                Ok(fd) => fd,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => -1,
                Err(e) => return Err(e),
            };
            if *tree < 0 {
                continue;
            }
            let idmapped = match idmap {
                Some(userns) if *may_idmap && (idmap_rw || attrs & MOUNT_ATTR_RDONLY != 0) => {
                    // A file system without idmapping support (or a tree holding one) keeps
                    // its owners: the plugin reads what its id may read.
                    sys::set_attrs_idmapped(*tree, *attrs, userns).is_ok()
                }
                _ => false,
            };
            if !idmapped {
                sys::set_attrs(*tree, *attrs)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::ffi::OsStr;
    use std::io::Read as _;
    use std::path::Path;

    use super::*;
    use crate::confine::child::Hooks;
    use crate::confine::reachable::Paths;
    use crate::confine::world::ids::{DEFAULT_PLUGIN_IDS, WorldIds};
    use crate::confine::world::plan::RealFs;
    use crate::launch::runner::process::vfork::{self, Exec};

    struct EnterOnly(Entry);

    impl Hooks for EnterOnly {
        fn enters_world(&self) -> bool {
            true
        }

        fn enter(&mut self) -> io::Result<()> {
            self.0.enter()
        }

        fn confine(&mut self) -> io::Result<()> {
            // SAFETY: setsid has no preconditions.
            check(unsafe { libc::setsid() })
        }
    }

    /// Runs `script` with `/bin/sh` in a new world with `paths` granted; its stdout and the
    /// ids it ran as.
    fn run_in_world(script: &str, paths: &Paths) -> (String, (u32, u32)) {
        let host = (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
        );
        let ids = WorldIds::new(host, None, false, DEFAULT_PLUGIN_IDS).unwrap();
        let base = plan::base(&RealFs);
        let world = crate::confine::world::make::make(ids, &base, 8).unwrap();
        let tree = plan::launch(paths, &base, &RealFs);
        let plugin = ids.plugin("test", &HashSet::new());
        let entry = Entry::new(&world, &tree, plugin, false, 4, false).unwrap();
        let exec = Exec {
            program: Path::new("/bin/sh"),
            argv: vec![OsStr::new("sh"), OsStr::new("-c"), OsStr::new(script)],
            env: vec![(OsStr::new("PATH"), OsStr::new("/usr/bin:/bin"))],
            cwd: Path::new("/tmp"),
        };
        let child = vfork::spawn(&exec, &mut EnterOnly(entry)).unwrap();
        let mut out = String::new();
        std::fs::File::from(child.stdout)
            .read_to_string(&mut out)
            .unwrap();
        let mut status = 0;
        // SAFETY: the plugin is this process's child (CLONE_PARENT).
        let reaped = unsafe { libc::waitpid(child.pid as i32, &mut status, 0) };
        assert_eq!(
            reaped, child.pid as i32,
            "the plugin is the host's own child"
        );
        let mut err = String::new();
        std::fs::File::from(child.stderr)
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(status, 0, "{out}\n{err}");
        (out, plugin)
    }

    #[test]
    fn a_plugin_in_a_world_is_not_pid_1_sees_only_its_world_and_runs_as_its_id() {
        let (out, (uid, gid)) = run_in_world(
            "echo \"$(id -u) $(id -g) ppid=$PPID pwd=$(pwd)\"; ls /; ls /proc > /tmp/pids; grep -c '^[0-9]' /tmp/pids; \
             hostname; echo x > /tmp/f && echo wrote; df -k /tmp | tail -1",
            &Paths::default(),
        );
        let mut lines = out.lines();
        assert_eq!(
            lines.next().unwrap(),
            format!("{uid} {gid} ppid=0 pwd=/tmp"),
            "{out}"
        );
        let listing: Vec<&str> = lines.by_ref().take_while(|l| !l.is_empty()).collect();
        assert!(
            listing.contains(&"usr") && listing.contains(&"tmp"),
            "{out}"
        );
        assert!(
            !listing.contains(&"home") && !listing.contains(&"work"),
            "{out}"
        );
        // Its /proc lists the keeper, the shell and `ls`: nothing of the host.
        assert!(out.contains("\n3\n"), "{out}");
        assert!(out.contains("tether\nwrote\n"), "{out}");
        // The scratch tmpfs was resized to the launch's 4 MiB.
        assert!(out.contains(" 4096 "), "{out}");
    }

    #[test]
    fn a_launch_sees_its_granted_paths_and_nothing_else_of_the_host() {
        let granted = tempfile::tempdir().unwrap();
        std::fs::write(granted.path().join("data"), "granted\n").unwrap();
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("data"), "other\n").unwrap();
        let paths = Paths {
            read: vec![granted.path().to_owned()],
            ..Paths::default()
        };
        let script = format!(
            "cat {}/data; cat {}/data 2>/dev/null || echo missing; touch {}/new 2>/dev/null || echo read-only",
            granted.path().display(),
            other.path().display(),
            granted.path().display()
        );
        let (out, _) = run_in_world(&script, &paths);
        assert_eq!(out, "granted\nmissing\nread-only\n");
    }
}
