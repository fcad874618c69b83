//! The text formats involved in finding and naming a plugin's pids cgroup, without IO:
//! `/proc/self/mountinfo` (where the cgroup file systems are mounted), `/proc/self/cgroup`
//! (which group the host is in) and the names tether gives the groups it creates.

use std::path::{Path, PathBuf};

/// Which cgroup interface a hierarchy speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    /// A legacy hierarchy with the `pids` controller bound to it.
    V1,
    /// The unified hierarchy.
    V2,
}

/// A mounted cgroup hierarchy that can carry the pids controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    /// The interface.
    pub(crate) version: Version,
    /// The group of the hierarchy shown at the mount point (`/` unless a container bind-mounts
    /// a sub-tree).
    pub(crate) root: String,
    /// Where it is mounted.
    pub(crate) mount_point: PathBuf,
}

/// The cgroup hierarchies of `mountinfo` (the text of `/proc/self/mountinfo`) that can carry
/// the pids controller: every v1 hierarchy with `pids` among its options, and every cgroup2
/// mount. Malformed lines are skipped.
pub(crate) fn pids_mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo.lines().filter_map(parse_mount).collect()
}

/// One mountinfo line: `id parent major:minor root mount-point options [optional…] - fstype
/// source super-options`.
fn parse_mount(line: &str) -> Option<Mount> {
    let (left, right) = line.split_once(" - ")?;
    let mut left = left.split(' ');
    let root = unescape(left.nth(3)?);
    let mount_point = PathBuf::from(unescape(left.next()?));
    let mut right = right.split(' ');
    let fstype = right.next()?;
    let super_options = right.nth(1).unwrap_or("");
    let version = match fstype {
        "cgroup2" => Version::V2,
        "cgroup" if super_options.split(',').any(|o| o == "pids") => Version::V1,
        _ => return None,
    };
    Some(Mount {
        version,
        root,
        mount_point,
    })
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\011`, `\012`, `\134`).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .map(|d| d.iter().fold(0_u32, |n, c| n * 8 + u32::from(c - b'0')))
            .and_then(|n| u8::try_from(n).ok());
        match octal {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The host's group in a hierarchy of `version`, from `cgroup` (the text of
/// `/proc/self/cgroup`: `id:controllers:path` lines; v2 is `0::path`).
pub(crate) fn own_group(cgroup: &str, version: Version) -> Option<&str> {
    cgroup.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (id, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let matches = match version {
            Version::V2 => id == "0" && controllers.is_empty(),
            Version::V1 => controllers.split(',').any(|c| c == "pids"),
        };
        matches.then_some(path)
    })
}

/// The directory of `group` (a path as `/proc/self/cgroup` shows it) under `mount`; `None`
/// when the group is outside what the mount shows.
pub(crate) fn group_dir(mount: &Mount, group: &str) -> Option<PathBuf> {
    let relative = Path::new(group).strip_prefix(&mount.root).ok()?;
    if relative
        .components()
        .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return None;
    }
    Some(mount.mount_point.join(relative))
}

/// The prefix of every group tether creates.
const NAME_PREFIX: &str = "tether-";

/// Who created a plugin's group: the host's pid namespace and pid, and the launch's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GroupName {
    /// The inode of the host's pid namespace (pids of other namespaces mean other processes).
    pub(crate) pid_namespace: u64,
    /// The host's process id.
    pub(crate) host: u32,
    /// The launch's number within the host.
    pub(crate) launch: u64,
}

impl GroupName {
    /// Parses a group directory's name; `None` for a group tether did not name.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        let mut parts = name.strip_prefix(NAME_PREFIX)?.split('-');
        let name = Self {
            pid_namespace: parts.next()?.parse().ok()?,
            host: parts.next()?.parse().ok()?,
            launch: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(name)
    }
}

impl std::fmt::Display for GroupName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{NAME_PREFIX}{}-{}-{}",
            self.pid_namespace, self.host, self.launch
        )
    }
}

/// The inode number of a namespace link's target (`pid:[4026531836]`).
pub(crate) fn namespace_inode(link: &str) -> Option<u64> {
    link.split_once(":[")?.1.strip_suffix(']')?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hybrid host: v1 controllers (pids among them) plus the unified hierarchy.
    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime shared:9 - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
22 1 8:1 / / rw - ext4 /dev/vda rw";

    #[test]
    fn mountinfo_yields_the_v1_pids_hierarchy_and_the_unified_one() {
        assert_eq!(
            pids_mounts(HYBRID),
            vec![
                Mount {
                    version: Version::V1,
                    root: "/".into(),
                    mount_point: "/sys/fs/cgroup/pids".into()
                },
                Mount {
                    version: Version::V2,
                    root: "/".into(),
                    mount_point: "/sys/fs/cgroup/unified".into()
                },
            ]
        );
    }

    #[test]
    fn a_v1_hierarchy_without_pids_and_malformed_lines_are_skipped() {
        let text =
            "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,pidsx\ngarbage\n1 2 3\n";
        assert!(pids_mounts(text).is_empty());
    }

    #[test]
    fn escaped_mount_points_and_roots_are_decoded() {
        let text = r"50 1 0:40 /a\040b /mnt/my\040cgroups rw - cgroup2 none rw";
        let mount = &pids_mounts(text)[0];
        assert_eq!(mount.root, "/a b");
        assert_eq!(mount.mount_point, Path::new("/mnt/my cgroups"));
        assert_eq!(unescape(r"x\134y\0"), r"x\y\0");
    }

    #[test]
    fn the_own_group_is_found_per_version() {
        let text = "12:cpu,cpuacct:/a\n8:pids:/ci/job\n0::/user.slice/x.scope\n";
        assert_eq!(own_group(text, Version::V1), Some("/ci/job"));
        assert_eq!(own_group(text, Version::V2), Some("/user.slice/x.scope"));
        assert_eq!(own_group("1:name=systemd:/\n", Version::V1), None);
        assert_eq!(own_group("1:name=systemd:/\n", Version::V2), None);
    }

    #[test]
    fn a_group_dir_is_the_group_below_the_mounts_root() {
        let mount = Mount {
            version: Version::V2,
            root: "/ci".into(),
            mount_point: "/sys/fs/cgroup".into(),
        };
        assert_eq!(
            group_dir(&mount, "/ci/job/1"),
            Some(PathBuf::from("/sys/fs/cgroup/job/1"))
        );
        assert_eq!(
            group_dir(&mount, "/ci"),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        assert_eq!(group_dir(&mount, "/other"), None);
        assert_eq!(group_dir(&mount, "/ci/../x"), None);
    }

    #[test]
    fn group_names_round_trip_and_foreign_names_are_not_ours() {
        let name = GroupName {
            pid_namespace: 4_026_531_836,
            host: 4242,
            launch: 7,
        };
        assert_eq!(name.to_string(), "tether-4026531836-4242-7");
        assert_eq!(GroupName::parse(&name.to_string()), Some(name));
        for foreign in [
            "tether-1-2",
            "tether-1-2-3-4",
            "docker-1-2-3",
            "tether-a-2-3",
            "",
        ] {
            assert_eq!(GroupName::parse(foreign), None, "{foreign}");
        }
    }

    #[test]
    fn namespace_links_yield_their_inode() {
        assert_eq!(namespace_inode("pid:[4026531836]"), Some(4_026_531_836));
        assert_eq!(namespace_inode("pid:4026531836"), None);
    }
}
