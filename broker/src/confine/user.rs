//! Running a plugin as another user ([`run_as`](crate::PluginClientBuilder::run_as), root
//! hosts only): who may, and giving that user what the host made for the launch. The switch
//! itself (`setgroups`, `setresgid`, `setresuid`) happens between fork and exec, in
//! `crate::confine::sandbox`.

use std::io;
use std::path::Path;

/// Whether a host whose effective uid is `host_uid` may start a plugin as another user.
pub(crate) fn may_run_as(host_uid: u32) -> bool {
    host_uid == 0
}

/// What the host made for a launch becomes the plugin's user's (`run_as`, or the ids a root
/// host's plugins run as): the private directory `dir` (unless it is a world's, which is
/// already open to the plugin), the delivered files, and `hosts_working_dir`, the working
/// directory when the host made it (a supervisor's state directory; the directory only, not
/// what earlier launches left in it).
pub(crate) fn give_launch_dirs(
    dir: Option<&Path>,
    delivered: Option<&Path>,
    hosts_working_dir: Option<&Path>,
    run_as: (u32, u32),
) -> io::Result<()> {
    if let Some(dir) = dir {
        give(dir, run_as, false)?;
    }
    if let Some(delivered) = delivered {
        give(delivered, run_as, true)?;
    }
    if let Some(working_dir) = hosts_working_dir {
        give(working_dir, run_as, false)?;
    }
    Ok(())
}

/// Gives `path` (not following a symbolic link) and, when `recursive`, everything below it to
/// `uid`:`gid`. Only for what the host itself made for this launch.
pub(crate) fn give(path: &Path, (uid, gid): (u32, u32), recursive: bool) -> io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))?;
    if recursive && std::fs::symlink_metadata(path)?.is_dir() {
        for entry in std::fs::read_dir(path)? {
            give(&entry?.path(), (uid, gid), true)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt as _;

    use super::*;

    #[test]
    fn only_root_may_start_a_plugin_as_another_user() {
        assert!(may_run_as(0));
        assert!(!may_run_as(1000));
    }

    #[test]
    fn a_tree_is_given_whole_without_following_links() {
        if !rustix::process::geteuid().is_root() {
            return; // Only root can give files away.
        }
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::fs::create_dir(dir.path().join("secrets")).unwrap();
        std::fs::write(dir.path().join("secrets/a"), b"x").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        give(dir.path(), (65534, 65534), true).unwrap();
        for p in ["", "secrets", "secrets/a"] {
            let meta = std::fs::metadata(dir.path().join(p)).unwrap();
            assert_eq!((meta.uid(), meta.gid()), (65534, 65534), "{p}");
        }
        assert_eq!(std::fs::metadata(outside.path()).unwrap().uid(), 0);
    }
}
