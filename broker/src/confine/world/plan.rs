//! The plan of a world's file system: what is mounted where, derived from the system path lists
//! and a launch's own paths. Pure: the host's file system is asked through [`HostFs`], so the
//! plan is unit-tested as data; `make` and `enter` carry it out.
//!
//! A world's root is an empty tmpfs. Into it go, at the same paths as on the host:
//! - the system exec and read paths, read-only (not `/proc`, which is the world's own, and not
//!   `/sys/fs/cgroup`, which would list the host's cgroups);
//! - the device files the sandbox allows, read-write (`/dev/null`, `/dev/zero`, …);
//! - the symbolic links among those paths (`/bin → usr/bin` on usr-merged systems) as links, and
//!   a link that points outside them (`/etc/resolv.conf → /run/…`) as a read-only bind of its
//!   target;
//! - per launch: the program's directory, the interpreter's prefixes and import directories and
//!   the granted read/exec directories read-only, a granted working directory read-write, each
//!   unless a path already mounted covers it.
//!
//! On a root host the plugin's own code (its program's directory, its interpreter's paths) is
//! bound **idmapped** (host root's files show as the plugin's, see `idmap.rs`), so that a
//! catalog under `/root` still runs; the operator's grants (`sandbox_allow_read`,
//! `sandbox_allow_exec`) never are: connecting to a unix socket needs only write permission on
//! its inode, which a read-only mount does not take away, so an idmapped grant would let the
//! plugin use every socket of host root's in it (`/run/docker.sock`). A grant is read with the
//! plugin's own ids, and one they cannot read is refused before the launch
//! ([`unreadable_grant`]).
//!
//! and the scratch tmpfs (private directory, `TMPDIR`, `/dev/shm`, delivered files) at
//! [`WORLD_TMP`], [`WORLD_SHM`] and [`WORLD_DELIVERED`].

use std::path::{Component, Path, PathBuf};

use crate::confine::reachable::{DEVICE_RW_PATHS, Paths, SYSTEM_EXEC_PATHS, SYSTEM_READ_PATHS};

/// The plugin's private directory in its world: its `TMPDIR`, its socket directory and `/tmp`.
pub const WORLD_TMP: &str = "/tmp";
/// The world's `/dev/shm`, on the same size-capped tmpfs as [`WORLD_TMP`].
pub const WORLD_SHM: &str = "/dev/shm";
/// Where a plugin finds its delivered secrets and config files (read-only), on the same tmpfs.
pub const WORLD_DELIVERED: &str = "/run/tether";
/// Parts of the world's `/proc` made read-only on top of it, as bubblewrap does.
pub(crate) const PROC_READ_ONLY: &[&str] = &["sys", "sysrq-trigger", "irq", "bus"];
/// System read paths a world does not get (see the module docs).
const NOT_IN_WORLD: &[&str] = &["/proc", "/sys/fs/cgroup"];

/// What a path is on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A directory.
    Dir,
    /// Anything else that can be bind-mounted: a file, a device.
    File,
    /// It does not exist (or cannot be looked at).
    Missing,
}

/// How a bind mount may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read-only, no set-uid, no devices.
    ReadOnly,
    /// Read-write, no set-uid, no devices.
    ReadWrite,
    /// A device file: read-write, devices allowed.
    Device,
}

/// One bind mount: the host's `path`, at the same path in the world.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bind {
    pub(crate) path: PathBuf,
    pub(crate) dir: bool,
    pub(crate) access: Access,
    /// Whether a root host may idmap it (the plugin's own code and its working directory);
    /// `false` for the system paths and the operator's read and exec grants.
    pub(crate) idmap: bool,
}

/// The owner and mode of a path on the host, for [`unreadable_grant`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    /// The permission bits.
    pub(crate) mode: u32,
    /// Whether it has a POSIX access ACL (then the mode bits do not tell).
    pub(crate) acl: bool,
}

impl Owner {
    /// Whether a process with exactly the ids `(uid, gid)` (no supplementary groups, no
    /// capabilities over the inode) may read it, and search it when `dir`.
    pub(crate) fn readable_by(self, (uid, gid): (u32, u32), dir: bool) -> bool {
        let bits = if uid == self.uid {
            self.mode >> 6
        } else if gid == self.gid {
            self.mode >> 3
        } else {
            self.mode
        } & 0o7;
        let needed = if dir { 0o5 } else { 0o4 };
        bits & needed == needed
    }
}

/// A symbolic link made in the world: `link` → `target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Link {
    pub(crate) link: PathBuf,
    pub(crate) target: PathBuf,
}

/// Mounts and links, in the order they are made (parents first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tree {
    pub(crate) binds: Vec<Bind>,
    pub(crate) links: Vec<Link>,
}

impl Tree {
    /// Whether `path` lies at or below a bind of this tree.
    pub(crate) fn covers(&self, path: &Path) -> bool {
        self.binds.iter().any(|b| path.starts_with(&b.path))
    }

    /// Whether `path` lies at or below a link of this tree.
    fn under_link(&self, path: &Path) -> bool {
        self.links.iter().any(|l| path.starts_with(&l.link))
    }
}

/// The host's file system as the plan needs it.
pub(crate) trait HostFs {
    /// What `path` is, following symbolic links.
    fn kind(&self, path: &Path) -> Kind;
    /// `path` with every symbolic link resolved; `None` when it does not exist.
    fn canonical(&self, path: &Path) -> Option<PathBuf>;
    /// Who owns `path` (following symbolic links) and its mode; `None` when it cannot be told.
    fn owner(&self, path: &Path) -> Option<Owner>;
}

/// The real file system.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RealFs;

impl HostFs for RealFs {
    fn kind(&self, path: &Path) -> Kind {
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => Kind::Dir,
            Ok(_) => Kind::File,
            Err(_) => Kind::Missing,
        }
    }

    fn canonical(&self, path: &Path) -> Option<PathBuf> {
        path.canonicalize().ok()
    }

    fn owner(&self, path: &Path) -> Option<Owner> {
        use std::os::unix::fs::MetadataExt as _;
        let meta = std::fs::metadata(path).ok()?;
        let c = crate::confine::child::c_string(path.as_os_str().as_encoded_bytes()).ok()?;
        // SAFETY: NUL-terminated strings; a NULL buffer of size 0 asks for the size only.
        let acl = unsafe {
            libc::getxattr(
                c.as_ptr(),
                c"system.posix_acl_access".as_ptr(),
                std::ptr::null_mut(),
                0,
            )
        } >= 0;
        Some(Owner {
            uid: meta.uid(),
            gid: meta.gid(),
            mode: meta.mode() & 0o7777,
            acl,
        })
    }
}

/// The tree every world starts with: the system paths and devices.
pub(crate) fn base(fs: &impl HostFs) -> Tree {
    let mut wanted: Vec<(&str, Access)> = Vec::new();
    wanted.extend(SYSTEM_EXEC_PATHS.iter().map(|p| (*p, Access::ReadOnly)));
    for path in SYSTEM_READ_PATHS
        .iter()
        .filter(|p| !NOT_IN_WORLD.contains(p))
    {
        let access = if path.starts_with("/dev/") {
            Access::Device
        } else {
            Access::ReadOnly
        };
        wanted.push((path, access));
    }
    wanted.extend(DEVICE_RW_PATHS.iter().map(|p| (*p, Access::Device)));
    let mut tree = Tree::default();
    // Real directories and files first, so that a link can be judged by what they cover.
    let mut links = Vec::new();
    for (path, access) in &wanted {
        let path = Path::new(path);
        match fs.canonical(path) {
            None => {}
            Some(real) if real == path => add_bind(&mut tree, fs, path, *access, false),
            Some(real) => links.push((path, real, *access)),
        }
    }
    for (path, real, access) in links {
        if tree.covers(&real) {
            tree.links.push(Link {
                link: path.to_owned(),
                target: relative_target(path, &real),
            });
        } else {
            // A link out of the world's paths: its content, read-only, at the link's path.
            add_bind(&mut tree, fs, path, access, false);
        }
    }
    tree
}

/// The binds and links one launch adds to a world built as `base`: its program, interpreter and
/// granted paths (`paths`; the private directory and delivered files are not among them in a
/// world), each at its host path, unless already covered. The operator's grants
/// (`paths.granted`) are never idmapped, the rest may be: where one lies inside another of the
/// other kind, it gets a bind of its own on top.
pub(crate) fn launch(paths: &Paths, base: &Tree, fs: &impl HostFs) -> Tree {
    let mut wanted: Vec<(&Path, Access, bool)> = Vec::new();
    for p in paths.exec.iter().chain(&paths.read) {
        wanted.push((p.as_path(), Access::ReadOnly, !paths.granted.contains(p)));
    }
    wanted.extend(
        paths
            .read_write
            .iter()
            .map(|p| (p.as_path(), Access::ReadWrite, true)),
    );
    // Parents first: a read-write working directory inside a read-only grant goes on top.
    wanted.sort_by_key(|(p, _, _)| p.components().count());
    let mut tree = Tree::default();
    for (path, access, idmap) in wanted {
        let Some(real) = fs.canonical(path) else {
            continue;
        };
        let covered = |t: &Tree| t.covers(&real);
        let writable_inside_read_only = access == Access::ReadWrite
            && !base.covers(&real)
            && tree
                .binds
                .iter()
                .any(|b| real.starts_with(&b.path) && b.access == Access::ReadOnly);
        // The deepest bind this path lies strictly inside, if it maps ids otherwise.
        let mapped_otherwise = access == Access::ReadOnly
            && !base.covers(&real)
            && tree
                .binds
                .iter()
                .filter(|b| real.starts_with(&b.path))
                .max_by_key(|b| b.path.components().count())
                .is_some_and(|b| b.path != real && b.idmap != idmap);
        if !(covered(base) || covered(&tree)) || writable_inside_read_only || mapped_otherwise {
            add_bind(&mut tree, fs, &real, access, idmap);
        }
        if real != path && !base.covers(path) && !tree.covers(path) && !tree.under_link(path) {
            tree.links.push(Link {
                link: path.to_owned(),
                target: real.clone(),
            });
        }
    }
    tree
}

fn add_bind(tree: &mut Tree, fs: &impl HostFs, path: &Path, access: Access, idmap: bool) {
    let dir = match fs.kind(path) {
        Kind::Dir => true,
        Kind::File => false,
        Kind::Missing => return,
    };
    tree.binds.push(Bind {
        path: path.to_owned(),
        dir,
        access,
        idmap,
    });
}

/// The first read-only bind of `tree` that is not idmapped (an operator's grant) and that a
/// plugin running as exactly `ids` cannot read (or search, a directory), with its owner: such
/// a grant would be bound and still unreadable, so the launch is refused with a clear error
/// instead. Paths with an ACL, or whose owner cannot be told, are left to the kernel.
pub(crate) fn unreadable_grant(
    tree: &Tree,
    fs: &impl HostFs,
    ids: (u32, u32),
) -> Option<(PathBuf, Owner)> {
    tree.binds
        .iter()
        .filter(|b| b.access == Access::ReadOnly && !b.idmap)
        .find_map(|b| {
            let owner = fs.owner(&b.path)?;
            (!owner.acl && !owner.readable_by(ids, b.dir)).then(|| (b.path.clone(), owner))
        })
}

/// `target` as a link at `link` would best name it: relative when both share the first
/// component's parent (`/bin` → `usr/bin`), else absolute.
fn relative_target(link: &Path, target: &Path) -> PathBuf {
    let parent = link.parent().unwrap_or(Path::new("/"));
    match target.strip_prefix(parent) {
        Ok(rest) if parent == Path::new("/") => rest.to_owned(),
        _ => target.to_owned(),
    }
}

/// The directories to make (parents first) so that `path` can be a mount point or a link in
/// a world root, excluding the root and `path` itself.
pub(crate) fn ancestors(path: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut current = PathBuf::from("/");
    let components: Vec<Component<'_>> = path.components().collect();
    for component in components.iter().take(components.len().saturating_sub(1)) {
        if let Component::Normal(name) = component {
            current.push(name);
            out.push(current.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A host described by (path, kind, canonical) triples; everything else is missing.
    struct FakeFs(HashMap<PathBuf, (Kind, PathBuf)>);

    impl FakeFs {
        fn new(entries: &[(&str, Kind, &str)]) -> Self {
            Self(
                entries
                    .iter()
                    .map(|(p, k, c)| (PathBuf::from(p), (k.clone(), PathBuf::from(c))))
                    .collect(),
            )
        }
    }

    impl HostFs for FakeFs {
        fn kind(&self, path: &Path) -> Kind {
            self.0.get(path).map_or(Kind::Missing, |(k, _)| k.clone())
        }

        fn canonical(&self, path: &Path) -> Option<PathBuf> {
            self.0.get(path).map(|(_, c)| c.clone())
        }

        /// Everything is host root's: `0700` under `/root`, else `0755`.
        fn owner(&self, path: &Path) -> Option<Owner> {
            self.0.get(path)?;
            let mode = if path.starts_with("/root") {
                0o700
            } else {
                0o755
            };
            Some(Owner {
                uid: 0,
                gid: 0,
                mode,
                acl: false,
            })
        }
    }

    fn usr_merged() -> FakeFs {
        FakeFs::new(&[
            ("/usr/lib", Kind::Dir, "/usr/lib"),
            ("/usr/lib64", Kind::Dir, "/usr/lib64"),
            ("/usr/bin", Kind::Dir, "/usr/bin"),
            ("/lib", Kind::Dir, "/usr/lib"),
            ("/lib64", Kind::Dir, "/usr/lib64"),
            ("/bin", Kind::Dir, "/usr/bin"),
            ("/etc/ld.so.cache", Kind::File, "/etc/ld.so.cache"),
            ("/etc/localtime", Kind::File, "/usr/share/zoneinfo/Etc/UTC"),
            ("/usr/share/zoneinfo", Kind::Dir, "/usr/share/zoneinfo"),
            (
                "/usr/share/zoneinfo/Etc/UTC",
                Kind::File,
                "/usr/share/zoneinfo/Etc/UTC",
            ),
            (
                "/etc/resolv.conf",
                Kind::File,
                "/run/systemd/resolve/stub-resolv.conf",
            ),
            ("/proc", Kind::Dir, "/proc"),
            ("/sys/fs/cgroup", Kind::Dir, "/sys/fs/cgroup"),
            ("/dev/null", Kind::File, "/dev/null"),
            ("/dev/urandom", Kind::File, "/dev/urandom"),
            ("/opt/p", Kind::Dir, "/opt/p"),
            ("/srv/kv", Kind::Dir, "/srv/kv"),
            ("/srv/kv/state", Kind::Dir, "/srv/kv/state"),
            ("/home/op/proj", Kind::Dir, "/data/proj"),
            ("/data/proj", Kind::Dir, "/data/proj"),
            ("/usr/lib/python3", Kind::Dir, "/usr/lib/python3"),
            ("/root/catalog", Kind::Dir, "/root/catalog"),
            ("/root/catalog/data", Kind::Dir, "/root/catalog/data"),
            ("/root/notes", Kind::Dir, "/root/notes"),
            ("/run", Kind::Dir, "/run"),
        ])
    }

    fn bind(path: &str, access: Access) -> Bind {
        Bind {
            path: path.into(),
            dir: !path.starts_with("/dev/") && !path.starts_with("/etc/"),
            access,
            idmap: false,
        }
    }

    /// A bind of a launch's own code or working directory: idmapped on a root host.
    fn own(path: &str, access: Access) -> Bind {
        Bind {
            idmap: true,
            ..bind(path, access)
        }
    }

    #[test]
    fn a_world_gets_the_system_paths_read_only_devices_writable_and_usr_merge_links() {
        let tree = base(&usr_merged());
        for path in ["/usr/lib", "/usr/lib64", "/usr/bin", "/usr/share/zoneinfo"] {
            assert!(
                tree.binds.contains(&bind(path, Access::ReadOnly)),
                "{path}: {tree:?}"
            );
        }
        assert!(tree.binds.contains(&bind("/dev/null", Access::Device)));
        assert!(tree.binds.contains(&bind("/dev/urandom", Access::Device)));
        let link = |l: &str, t: &str| Link {
            link: l.into(),
            target: t.into(),
        };
        assert!(tree.links.contains(&link("/bin", "usr/bin")));
        assert!(tree.links.contains(&link("/lib", "usr/lib")));
        // A link into a bound path stays a link; one out of them is its target's content.
        assert!(
            tree.links
                .contains(&link("/etc/localtime", "/usr/share/zoneinfo/Etc/UTC"))
        );
        assert!(
            tree.binds
                .contains(&bind("/etc/resolv.conf", Access::ReadOnly))
        );
        assert!(!tree.covers(Path::new("/run/systemd")));
    }

    #[test]
    fn a_world_has_neither_the_hosts_proc_nor_its_cgroups_nor_anything_unlisted() {
        let tree = base(&usr_merged());
        for path in [
            "/proc",
            "/sys/fs/cgroup",
            "/home",
            "/run",
            "/tmp",
            "/var",
            "/root",
        ] {
            assert!(!tree.covers(Path::new(path)), "{path}");
        }
        // Missing system paths are left out, not made.
        assert!(!tree.covers(Path::new("/usr/lib32")));
    }

    #[test]
    fn a_launch_adds_its_own_paths_unless_the_system_paths_cover_them() {
        let fs = usr_merged();
        let base = base(&fs);
        let paths = Paths {
            exec: vec!["/opt/p".into(), "/usr/lib/python3".into()],
            read: vec!["/srv/kv".into()],
            read_write: vec!["/srv/kv/state".into()],
            granted: vec![],
        };
        let tree = launch(&paths, &base, &fs);
        assert_eq!(
            tree.binds,
            [
                own("/opt/p", Access::ReadOnly),
                own("/srv/kv", Access::ReadOnly),
                own("/srv/kv/state", Access::ReadWrite),
            ]
        );
        assert!(tree.links.is_empty());
    }

    #[test]
    fn a_granted_path_through_a_symbolic_link_is_bound_at_its_real_path_and_linked() {
        let fs = usr_merged();
        let base = base(&fs);
        let paths = Paths {
            read: vec!["/home/op/proj".into(), "/nonexistent".into()],
            ..Paths::default()
        };
        let tree = launch(&paths, &base, &fs);
        assert_eq!(tree.binds, [own("/data/proj", Access::ReadOnly)]);
        assert_eq!(
            tree.links,
            [Link {
                link: "/home/op/proj".into(),
                target: "/data/proj".into()
            }]
        );
    }

    #[test]
    fn the_operators_grants_are_never_idmapped_and_a_grant_inside_the_plugins_code_gets_its_own_bind()
     {
        let fs = usr_merged();
        let base = base(&fs);
        let paths = Paths {
            exec: vec!["/root/catalog".into()],
            read: vec!["/run".into(), "/root/catalog/data".into()],
            read_write: vec![],
            granted: vec!["/run".into(), "/root/catalog/data".into()],
        };
        let tree = launch(&paths, &base, &fs);
        assert_eq!(
            tree.binds,
            [
                bind("/run", Access::ReadOnly),
                own("/root/catalog", Access::ReadOnly),
                bind("/root/catalog/data", Access::ReadOnly),
            ]
        );
        // The catalog (root's 0700) is idmapped and not checked; the grant inside it is read
        // with the plugin's ids, and refused: root's 0700 too.
        let (path, _) = unreadable_grant(&tree, &fs, (2_130_706_433, 2_130_706_433)).unwrap();
        assert_eq!(path, Path::new("/root/catalog/data"));
        // The plugin's code inside a grant gets its idmapped bind on top.
        let paths = Paths {
            exec: vec!["/srv/kv/state".into()],
            read: vec!["/srv/kv".into()],
            granted: vec!["/srv/kv".into()],
            ..Paths::default()
        };
        assert_eq!(
            launch(&paths, &base, &fs).binds,
            [
                bind("/srv/kv", Access::ReadOnly),
                own("/srv/kv/state", Access::ReadOnly),
            ]
        );
    }

    #[test]
    fn a_grant_the_plugins_ids_cannot_read_is_named_with_its_owner_and_mode() {
        let fs = usr_merged();
        let base = base(&fs);
        let paths = Paths {
            read: vec!["/run".into(), "/root/notes".into()],
            granted: vec!["/run".into(), "/root/notes".into()],
            ..Paths::default()
        };
        let tree = launch(&paths, &base, &fs);
        let (path, owner) = unreadable_grant(&tree, &fs, (2_130_706_433, 2_130_706_433)).unwrap();
        assert_eq!(path, Path::new("/root/notes"));
        assert_eq!((owner.uid, owner.gid, owner.mode), (0, 0, 0o700));
        // Root itself (`run_as = 0` with `allow_root`) reads it as its owner.
        assert_eq!(unreadable_grant(&tree, &fs, (0, 0)), None);
    }

    #[test]
    fn who_may_read_follows_the_owner_group_and_other_bits() {
        let owner = |mode| Owner {
            uid: 10,
            gid: 20,
            mode,
            acl: false,
        };
        assert!(owner(0o700).readable_by((10, 99), true));
        assert!(!owner(0o700).readable_by((11, 20), true));
        assert!(owner(0o750).readable_by((11, 20), true));
        assert!(!owner(0o740).readable_by((11, 20), true));
        assert!(owner(0o740).readable_by((11, 20), false));
        assert!(owner(0o755).readable_by((11, 21), true));
        assert!(!owner(0o751).readable_by((11, 21), true));
        // The owner's bits apply to the owner even when others may do more.
        assert!(!owner(0o077).readable_by((10, 20), false));
    }

    #[test]
    fn mount_points_need_their_parents_made_first() {
        assert_eq!(
            ancestors(Path::new("/srv/kv/state")),
            [PathBuf::from("/srv"), PathBuf::from("/srv/kv")]
        );
        assert!(ancestors(Path::new("/tmp")).is_empty());
    }
}
