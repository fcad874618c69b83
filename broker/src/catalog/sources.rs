//! Where secret (and config) values come from: the [`ValueSource`] trait and its directory,
//! environment and in-memory implementations.
//!
//! Values are [`SecretSlice`]s: never printed by `Debug`, wiped from memory when dropped.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read as _};
use std::path::{Path, PathBuf};

use secrecy::SecretSlice;

/// Largest secret or config value read from a source.
pub const MAX_VALUE_LEN: u64 = 1024 * 1024;

/// A source of named values (secrets or config files).
///
/// `fetch` is called once per name per launch; names were already checked to be safe file
/// names (ASCII letters, digits, `.`, `_`, `-`).
pub trait ValueSource: Send + Sync + fmt::Debug {
    /// The value named `name`, `None` when the source has none.
    ///
    /// # Errors
    /// When the source cannot be read.
    fn fetch(&self, name: &str) -> io::Result<Option<SecretSlice<u8>>>;

    /// A short description for error messages, e.g. `directory /run/secrets` (no values).
    fn describe(&self) -> String;
}

/// One file per value in a directory, like mounted Kubernetes secrets.
///
/// A value is only ever read from a regular file **inside** the directory: the name is opened
/// relative to the opened directory with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`,
/// so symbolic links are followed only while they stay inside it — a Kubernetes secret
/// volume's `key -> ..data/key` and `..data -> ..<timestamp>/` work — and the kernel refuses,
/// without a race, any link (or `..`) that leads out of it. Such a value is an error naming
/// the link and its target, not a missing value. On kernels without `openat2` (before 5.6)
/// the file's canonical path is checked to lie below the directory's before it is opened,
/// which a concurrent swap of a link could defeat.
#[derive(Debug, Clone)]
pub struct DirValueSource {
    dir: PathBuf,
}

impl DirValueSource {
    /// Values are the files in `dir`.
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Opens `name` for reading, resolved strictly inside the directory.
    fn open_beneath(&self, name: &str) -> io::Result<std::fs::File> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        let dir = rustix::fs::open(
            &self.dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        // Non-blocking, so that a FIFO planted in the directory cannot hang the host.
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        match rustix::fs::openat2(&dir, name, flags, Mode::empty(), resolve) {
            Ok(fd) => Ok(std::fs::File::from(fd)),
            // EXDEV: the path left the directory; ELOOP here: a /proc magic link.
            Err(rustix::io::Errno::XDEV | rustix::io::Errno::LOOP) => Err(self.outside(name)),
            Err(rustix::io::Errno::NOSYS) => self.open_checked(name),
            Err(e) => Err(e.into()),
        }
    }

    /// Without `openat2`: the canonical path must lie below the directory's.
    fn open_checked(&self, name: &str) -> io::Result<std::fs::File> {
        let resolved = self.dir.join(name).canonicalize()?;
        if !resolved.starts_with(self.dir.canonicalize()?) {
            return Err(self.outside(name));
        }
        std::fs::File::open(resolved)
    }

    /// The error for value `name`, whose path leads out of the directory.
    fn outside(&self, name: &str) -> io::Error {
        let path = self.dir.join(name);
        let target =
            std::fs::read_link(&path).map_or_else(|_| "?".to_owned(), |t| t.display().to_string());
        let resolved = path
            .canonicalize()
            .map_or_else(|_| "?".to_owned(), |r| r.display().to_string());
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is a symbolic link to {target} (resolving to {resolved}), outside the directory {}: refused. A value must be a file inside its source directory; links within it (a Kubernetes secret volume's `..data`) are followed",
                path.display(),
                self.dir.display()
            ),
        )
    }
}

impl ValueSource for DirValueSource {
    fn fetch(&self, name: &str) -> io::Result<Option<SecretSlice<u8>>> {
        let file = match self.open_beneath(name) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a regular file", self.dir.join(name).display()),
            ));
        }
        let mut bytes = Vec::new();
        file.take(MAX_VALUE_LEN + 1).read_to_end(&mut bytes)?;
        let value = SecretSlice::from(bytes);
        if secrecy::ExposeSecret::expose_secret(&value).len() as u64 > MAX_VALUE_LEN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("`{name}` is larger than {MAX_VALUE_LEN} bytes"),
            ));
        }
        Ok(Some(value))
    }

    fn describe(&self) -> String {
        format!("directory {}", self.dir.display())
    }
}

/// Values from the host's environment: the value named `db-password` is the variable
/// `<PREFIX>DB_PASSWORD` (upper case, `-` and `.` as `_`).
#[derive(Debug, Clone)]
pub struct EnvValueSource {
    prefix: String,
}

impl EnvValueSource {
    /// Values are the host variables starting with `prefix`.
    #[must_use]
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
        }
    }

    /// The variable that holds `name`.
    #[must_use]
    pub fn variable(&self, name: &str) -> String {
        let suffix: String = name
            .chars()
            .map(|c| match c {
                '-' | '.' => '_',
                c => c.to_ascii_uppercase(),
            })
            .collect();
        format!("{}{suffix}", self.prefix)
    }
}

impl ValueSource for EnvValueSource {
    fn fetch(&self, name: &str) -> io::Result<Option<SecretSlice<u8>>> {
        use std::os::unix::ffi::OsStringExt as _;
        Ok(std::env::var_os(self.variable(name)).map(|v| SecretSlice::from(v.into_vec())))
    }

    fn describe(&self) -> String {
        format!("environment variables {}*", self.prefix)
    }
}

/// Values held in memory, e.g. fetched from a vault by the host.
#[derive(Debug, Default)]
pub struct MemoryValueSource {
    values: BTreeMap<String, SecretSlice<u8>>,
}

impl MemoryValueSource {
    /// An empty source.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the value `name`.
    #[must_use]
    pub fn with(mut self, name: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        self.values
            .insert(name.into(), SecretSlice::from(value.into()));
        self
    }
}

impl ValueSource for MemoryValueSource {
    fn fetch(&self, name: &str) -> io::Result<Option<SecretSlice<u8>>> {
        use secrecy::ExposeSecret as _;
        Ok(self
            .values
            .get(name)
            .map(|v| SecretSlice::from(v.expose_secret().to_vec())))
    }

    fn describe(&self) -> String {
        format!("{} in-memory values", self.values.len())
    }
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret as _;

    use super::*;

    #[test]
    fn a_directory_source_reads_one_file_per_secret() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("db-password"), b"hunter2").unwrap();
        let source = DirValueSource::new(dir.path());
        let value = source.fetch("db-password").unwrap().unwrap();
        assert_eq!(value.expose_secret(), b"hunter2");
        assert!(source.fetch("missing").unwrap().is_none());
    }

    #[test]
    fn values_are_not_shown_by_debug() {
        let source = MemoryValueSource::new().with("a", "top-secret-value");
        assert!(!format!("{source:?}").contains("top-secret-value"));
        let value = source.fetch("a").unwrap().unwrap();
        assert!(!format!("{value:?}").contains("top-secret-value"));
    }

    #[test]
    fn environment_names_are_upper_case_with_underscores() {
        let source = EnvValueSource::new("APP_SECRET_");
        assert_eq!(
            source.variable("db-password.v2"),
            "APP_SECRET_DB_PASSWORD_V2"
        );
        assert!(source.fetch("surely-not-set-anywhere").unwrap().is_none());
    }

    /// A Kubernetes secret volume as the kubelet writes it: the values in a timestamped
    /// directory, `..data` pointing at it, and each key a link through `..data`.
    fn kubernetes_volume(dir: &Path) {
        let stamp = dir.join("..2026_12_01_10_00_00.123456789");
        std::fs::create_dir(&stamp).unwrap();
        std::fs::write(stamp.join("db-password"), b"hunter2").unwrap();
        std::os::unix::fs::symlink("..2026_12_01_10_00_00.123456789", dir.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/db-password", dir.join("db-password")).unwrap();
    }

    #[test]
    fn a_kubernetes_secret_volume_layout_is_read_through_its_links() {
        let dir = tempfile::tempdir().unwrap();
        kubernetes_volume(dir.path());
        let source = DirValueSource::new(dir.path());
        let value = source.fetch("db-password").unwrap().unwrap();
        assert_eq!(value.expose_secret(), b"hunter2");
    }

    #[test]
    fn a_link_out_of_the_directory_is_refused_naming_the_link_and_its_target() {
        let outside = tempfile::tempdir().unwrap();
        let host_file = outside.path().join("shadow");
        std::fs::write(&host_file, b"root:$6$...").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(&host_file, dir.path().join("absolute")).unwrap();
        std::os::unix::fs::symlink(
            Path::new("..")
                .join(outside.path().file_name().unwrap())
                .join("shadow"),
            dir.path().join("relative"),
        )
        .unwrap();
        let source = DirValueSource::new(dir.path());
        for name in ["absolute", "relative"] {
            let err = source.fetch(name).unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains(&dir.path().join(name).display().to_string())
                    && text.contains("shadow")
                    && text.contains("outside"),
                "{name}: {text}"
            );
        }
    }

    #[test]
    fn a_kubernetes_layout_whose_data_link_leaves_the_directory_is_refused() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("db-password"), b"not yours").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/db-password", dir.path().join("db-password")).unwrap();
        let err = DirValueSource::new(dir.path())
            .fetch("db-password")
            .unwrap_err();
        assert!(err.to_string().contains("outside"), "{err}");
    }
}
