//! Checking a plugin binary against its expected SHA-256 without a check-then-exec race: the
//! file is opened once (not following a symbolic link), checked and hashed through that
//! descriptor, and that same open file is executed (`/proc/self/fd/N`).

use std::fs::File;
use std::io::{self, Read as _};
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

/// Why a plugin binary is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IntegrityError {
    /// The file cannot be opened or read (a symbolic link is refused with `ELOOP`).
    #[error("cannot open {} without following symbolic links: {source}; point the manifest at the real file", path.display())]
    Open {
        /// The binary.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Not a regular file.
    #[error("{} is not a regular file", path.display())]
    NotAFile {
        /// The binary.
        path: PathBuf,
    },
    /// Others than its owner may change it.
    #[error("{} is writable by its group or by everyone (mode {mode:o}); run `chmod go-w` on it", path.display())]
    Writable {
        /// The binary.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Owned by another user than the host's or root.
    #[error("{} is owned by uid {owner}, neither the host's user nor root; chown it", path.display())]
    ForeignOwner {
        /// The binary.
        path: PathBuf,
        /// Its owner.
        owner: u32,
    },
    /// The contents do not match.
    #[error("{} has SHA-256 {actual}, but the manifest expects {expected}; the binary was changed: reinstall it or update the manifest", path.display())]
    Mismatch {
        /// The binary.
        path: PathBuf,
        /// The manifest's hash.
        expected: String,
        /// The file's hash.
        actual: String,
    },
}

/// A binary opened, checked and hashed; executing [`Self::exec_path`] runs exactly this file.
#[derive(Debug)]
pub(crate) struct VerifiedBinary {
    file: File,
}

impl VerifiedBinary {
    /// Opens `path` (refusing a symbolic link), checks ownership and mode, and compares its
    /// SHA-256 with `expected` (lower-case hex).
    pub(crate) fn open(path: &Path, expected: &str) -> Result<Self, IntegrityError> {
        let open_error = |source| IntegrityError::Open {
            path: path.to_owned(),
            source,
        };
        let mut file = File::options()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(open_error)?;
        let meta = file.metadata().map_err(open_error)?;
        if !meta.file_type().is_file() {
            return Err(IntegrityError::NotAFile {
                path: path.to_owned(),
            });
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o022 != 0 {
            return Err(IntegrityError::Writable {
                path: path.to_owned(),
                mode,
            });
        }
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me && meta.uid() != 0 {
            return Err(IntegrityError::ForeignOwner {
                path: path.to_owned(),
                owner: meta.uid(),
            });
        }
        let mut hasher = Sha256::new();
        let mut buf = vec![0; 64 * 1024];
        loop {
            let n = file.read(&mut buf).map_err(open_error)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        let actual = hex(&hasher.finalize());
        // Not secret: a plain comparison leaks nothing worth hiding.
        if actual != expected {
            return Err(IntegrityError::Mismatch {
                path: path.to_owned(),
                expected: expected.to_owned(),
                actual,
            });
        }
        Ok(Self { file })
    }

    /// The path that executes this open file: `/proc/self/fd/N`, valid in the child between
    /// fork and exec (the descriptor closes at exec, after the kernel opened the file). The
    /// file must be a native executable, not a `#!` script.
    pub(crate) fn exec_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// SHA-256 of the file at `path`, lower-case hex (for writing manifests and tests).
///
/// # Errors
/// When the file cannot be read.
pub fn sha256_file(path: &Path) -> io::Result<String> {
    let bytes = std::fs::read(path)?;
    Ok(hex(&Sha256::digest(&bytes)))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn binary(dir: &Path) -> (PathBuf, String) {
        let path = dir.join("plugin");
        std::fs::write(&path, b"\x7fELF pretend").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let hash = sha256_file(&path).unwrap();
        (path, hash)
    }

    #[test]
    fn a_matching_binary_is_executed_through_its_open_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let (path, hash) = binary(dir.path());
        let verified = VerifiedBinary::open(&path, &hash).unwrap();
        assert_eq!(std::fs::read_link(verified.exec_path()).unwrap(), path);
    }

    #[test]
    fn a_changed_binary_is_refused_with_both_hashes() {
        let dir = tempfile::tempdir().unwrap();
        let (path, hash) = binary(dir.path());
        std::fs::write(&path, b"\x7fELF tampered").unwrap();
        let err = VerifiedBinary::open(&path, &hash).unwrap_err();
        let text = err.to_string();
        assert!(text.contains(&hash), "{text}");
        assert!(text.contains(&sha256_file(&path).unwrap()), "{text}");
    }

    #[test]
    fn a_symbolic_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (path, hash) = binary(dir.path());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let err = VerifiedBinary::open(&link, &hash).unwrap_err();
        assert!(
            matches!(&err, IntegrityError::Open { source, .. } if source.raw_os_error() == Some(libc::ELOOP)),
            "{err}"
        );
    }

    #[test]
    fn a_group_writable_binary_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (path, hash) = binary(dir.path());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o775)).unwrap();
        let err = VerifiedBinary::open(&path, &hash).unwrap_err();
        assert!(
            matches!(err, IntegrityError::Writable { mode: 0o775, .. }),
            "{err}"
        );
    }
}
