//! The per-launch private directory (`0700`, the plugin's socket and `TMPDIR`) and the socket
//! path limits it must fit.

use std::fs::Permissions;
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

/// Longest unix socket path portable across the unix kernels tether runs on (`sun_path` is
/// 108 bytes on Linux and 104 on macOS and the BSDs, terminating NUL included).
pub const MAX_SOCKET_PATH_LEN: usize = 103;
/// Bytes reserved in [`MAX_SOCKET_PATH_LEN`] for the socket's file name inside the private
/// directory (go-plugin names it `plugin` + up to 10 digits).
pub const SOCKET_NAME_RESERVE: usize = 24;
/// Prefix of every private directory's name.
pub(crate) const PRIVATE_DIR_PREFIX: &str = "tether-";
/// Random characters after [`PRIVATE_DIR_PREFIX`].
pub(crate) const PRIVATE_DIR_RANDOM_LEN: usize = 6;
/// Longest private-directory base ([`PluginClientBuilder::private_dir_base`](crate::launch::PluginClientBuilder::private_dir_base)) in bytes: a socket in a
/// private directory (`/tether-XXXXXX/`) inside it must still fit [`MAX_SOCKET_PATH_LEN`] with
/// [`SOCKET_NAME_RESERVE`] bytes for its name.
pub const MAX_PRIVATE_DIR_BASE_LEN: usize = MAX_SOCKET_PATH_LEN
    - SOCKET_NAME_RESERVE
    - (PRIVATE_DIR_PREFIX.len() + PRIVATE_DIR_RANDOM_LEN + 2);

/// Where private directories go when the host's temporary directory is too long.
const FALLBACK_PRIVATE_DIR_BASE: &str = "/tmp";

/// A per-launch directory that holds the plugin's socket and is its `TMPDIR`: a directory of
/// the host (mode `0700`, removed with everything in it when dropped or [closed](Self::close)),
/// or the `tmp/` of a world's own tmpfs, which the host reaches through a descriptor
/// (`/proc/self/fd/N/tmp`) and which ends with the world.
#[derive(Debug)]
pub(crate) struct PrivateDir {
    place: Place,
}

#[derive(Debug)]
enum Place {
    Host(TempDir),
    /// A host directory with a size-capped tmpfs of its own on it (a gVisor plugin's, whose
    /// `TMPDIR` it is); the tmpfs is detached before the directory is removed.
    HostTmpfs {
        mount: Unmount,
        dir: TempDir,
    },
    World {
        root: OwnedFd,
        dir: PathBuf,
        owner: Option<(u32, u32)>,
    },
}

impl PrivateDir {
    /// Creates a private directory in `configured`, else in the host's temporary directory
    /// (or [`FALLBACK_PRIVATE_DIR_BASE`] when that is too long for sockets).
    pub(crate) fn create(configured: Option<&Path>) -> io::Result<Self> {
        let base = match configured {
            Some(dir) => {
                let dir = dir.canonicalize()?;
                check_private_dir_base_len(&dir)?;
                dir
            }
            None => {
                let tmp = std::env::temp_dir().canonicalize();
                match tmp {
                    Ok(tmp) if check_private_dir_base_len(&tmp).is_ok() => tmp,
                    _ => PathBuf::from(FALLBACK_PRIVATE_DIR_BASE),
                }
            }
        };
        let dir = tempfile::Builder::new()
            .prefix(PRIVATE_DIR_PREFIX)
            .rand_bytes(PRIVATE_DIR_RANDOM_LEN)
            .permissions(Permissions::from_mode(0o700))
            .tempdir_in(base)?;
        Ok(Self {
            place: Place::Host(dir),
        })
    }

    /// The directory `name` of the file system `root` (a world's tmpfs, held open here), in
    /// which the host makes files as `owner` (the plugin's ids) when its own ids are not
    /// mapped in the world.
    pub(crate) fn in_world(root: OwnedFd, name: &str, owner: Option<(u32, u32)>) -> Self {
        let dir = PathBuf::from(format!("/proc/self/fd/{}/{name}", root.as_raw_fd()));
        Self {
            place: Place::World { root, dir, owner },
        }
    }

    /// The directory with a tmpfs of `mib` MiB mounted on it (mode `0700`, `nosuid`, `nodev`):
    /// writing past it fails with `ENOSPC`. Needs the host's `CAP_SYS_ADMIN` (the gVisor
    /// runner's hosts are root); a world's is capped already.
    pub(crate) fn capped(self, mib: u64) -> io::Result<Self> {
        use std::os::unix::ffi::OsStrExt as _;
        let Place::Host(dir) = self.place else {
            return Ok(self);
        };
        let target = std::ffi::CString::new(dir.path().as_os_str().as_bytes())?;
        let data = std::ffi::CString::new(format!("size={mib}m,mode=0700"))?;
        // SAFETY: NUL-terminated strings that outlive the call.
        let ret = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                data.as_ptr().cast(),
            )
        };
        if ret == -1 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            place: Place::HostTmpfs {
                mount: Unmount(target),
                dir,
            },
        })
    }

    /// The ids the host makes files as in this directory, when not its own.
    pub(crate) fn file_owner(&self) -> Option<(u32, u32)> {
        match &self.place {
            Place::Host(_) | Place::HostTmpfs { .. } => None,
            Place::World { owner, .. } => *owner,
        }
    }

    /// The directory's absolute path as the host reaches it.
    pub(crate) fn path(&self) -> &Path {
        match &self.place {
            Place::Host(dir) | Place::HostTmpfs { dir, .. } => dir.path(),
            Place::World { dir, .. } => dir,
        }
    }

    /// For a world's directory: `name` beside it on the same file system, as the host
    /// reaches it.
    pub(crate) fn sibling(&self, name: &str) -> Option<PathBuf> {
        match &self.place {
            Place::Host(_) | Place::HostTmpfs { .. } => None,
            Place::World { root, .. } => Some(PathBuf::from(format!(
                "/proc/self/fd/{}/{name}",
                root.as_raw_fd()
            ))),
        }
    }

    /// Removes the directory and everything in it (a world's goes with its file system).
    pub(crate) fn close(self) -> io::Result<()> {
        match self.place {
            Place::Host(dir) => dir.close(),
            Place::HostTmpfs { mount, dir } => {
                drop(mount);
                dir.close()
            }
            Place::World { .. } => Ok(()),
        }
    }
}

/// A tmpfs mounted on a private directory: detached when dropped, before the directory is
/// removed (declared first in [`Place::HostTmpfs`]).
#[derive(Debug)]
struct Unmount(std::ffi::CString);

impl Drop for Unmount {
    fn drop(&mut self) {
        // SAFETY: a NUL-terminated path. Failure leaves the mount (nothing else to do in drop).
        unsafe { libc::umount2(self.0.as_ptr(), libc::MNT_DETACH) };
    }
}

fn check_private_dir_base_len(dir: &Path) -> io::Result<()> {
    let len = dir.as_os_str().len();
    if len > MAX_PRIVATE_DIR_BASE_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is {len} bytes long; a plugin's socket path must fit in {MAX_SOCKET_PATH_LEN} \
                 bytes, so the private-directory base may be at most {MAX_PRIVATE_DIR_BASE_LEN}",
                dir.display()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt as _;

    use super::*;

    #[test]
    fn a_private_directory_is_short_owner_only_and_removed_on_close() {
        let dir = PrivateDir::create(None).unwrap();
        let path = dir.path().to_owned();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700);
        assert!(path.as_os_str().len() + SOCKET_NAME_RESERVE <= MAX_SOCKET_PATH_LEN);
        assert_eq!(path, path.canonicalize().unwrap());
        std::fs::write(path.join("plugin123"), b"x").unwrap();
        dir.close().unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn a_capped_private_directory_stops_writes_at_its_size_and_leaves_no_mount() {
        if !rustix::process::geteuid().is_root() {
            return; // Mounting a tmpfs on the host needs root, as the gVisor runner does.
        }
        let dir = PrivateDir::create(None).unwrap().capped(1).unwrap();
        let path = dir.path().to_owned();
        let err = std::fs::write(path.join("fill"), vec![0_u8; 2 << 20]).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
        let mounted = || {
            std::fs::read_to_string("/proc/self/mounts")
                .unwrap()
                .contains(path.to_str().unwrap())
        };
        assert!(mounted());
        dir.close().unwrap();
        assert!(!mounted());
        assert!(!path.exists());
    }

    #[test]
    fn a_configured_private_dir_base_that_is_too_long_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let long = base.path().join("d".repeat(MAX_PRIVATE_DIR_BASE_LEN));
        std::fs::create_dir(&long).unwrap();
        let err = PrivateDir::create(Some(&long)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
