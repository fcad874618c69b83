//! Delivering granted secrets and config files: a per-launch directory (mode `0700`) on tmpfs
//! where available, holding `secrets/` and `config/` with one file (mode `0400`) per value
//! (the [janitor](crate::confine::janitor) removes it if the host dies).

use std::fs::Permissions;
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use tether_proto::ValueKind;

use secrecy::{ExposeSecret as _, SecretSlice};
use tempfile::TempDir;

/// Longest plugin, secret or config name.
pub const MAX_NAME_LEN: usize = 64;

/// Checks a plugin, secret or config name: 1–[`MAX_NAME_LEN`] characters of ASCII letters,
/// digits, `.`, `_` and `-`, not starting with `.` (so it is a safe file name).
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!("must be 1 to {MAX_NAME_LEN} characters long"));
    }
    if name.starts_with('.')
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(format!(
            "`{}` is not a valid name: use ASCII letters, digits, `.`, `_` and `-`, not starting with `.`",
            name.escape_debug()
        ));
    }
    Ok(())
}

/// Values to deliver to one launch: `(name, value)` pairs.
#[derive(Debug, Default)]
pub struct Delivery {
    pub(crate) secrets: Vec<(String, SecretSlice<u8>)>,
    pub(crate) config: Vec<(String, SecretSlice<u8>)>,
}

impl Delivery {
    /// Nothing to deliver.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the secret `name`.
    #[must_use]
    pub fn secret(mut self, name: impl Into<String>, value: SecretSlice<u8>) -> Self {
        self.secrets.push((name.into(), value));
        self
    }

    /// Adds the config file `name`.
    #[must_use]
    pub fn config(mut self, name: impl Into<String>, value: SecretSlice<u8>) -> Self {
        self.config.push((name.into(), value));
        self
    }

    /// Whether there is nothing to deliver.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty() && self.config.is_empty()
    }
}

/// Where delivery directories are made: `$XDG_RUNTIME_DIR` (a per-user tmpfs), else
/// `/dev/shm` (tmpfs), else the temporary directory — so secrets stay off disk where possible.
#[must_use]
pub fn delivery_base() -> PathBuf {
    let candidates = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from("/dev/shm")]);
    for dir in candidates {
        if dir.is_absolute() && dir.is_dir() && writable(&dir) {
            return dir;
        }
    }
    std::env::temp_dir()
}

fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

/// A launch's delivered files; removed when dropped.
#[derive(Debug)]
pub(crate) struct DeliveredDir {
    dir: TempDir,
    pub(crate) secrets: Option<PathBuf>,
    pub(crate) config: Option<PathBuf>,
}

impl DeliveredDir {
    /// A new, empty private directory under `base`: [`write`](Self::write) fills it once
    /// the janitor knows it (a host that dies in between leaves no secret behind).
    pub(crate) fn create(base: &Path) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("tether-delivery-")
            .permissions(Permissions::from_mode(0o700))
            .tempdir_in(base)?;
        Ok(Self {
            dir,
            secrets: None,
            config: None,
        })
    }

    /// Writes `delivery` into the directory.
    pub(crate) fn write(&mut self, delivery: &Delivery) -> io::Result<()> {
        self.secrets = write_all(
            self.dir.path(),
            ValueKind::Secret.manifest_key(),
            &delivery.secrets,
        )?;
        self.config = write_all(
            self.dir.path(),
            ValueKind::Config.manifest_key(),
            &delivery.config,
        )?;
        Ok(())
    }

    /// The directory holding `secrets/` and `config/`.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

fn write_all(
    parent: &Path,
    sub: &str,
    values: &[(String, SecretSlice<u8>)],
) -> io::Result<Option<PathBuf>> {
    if values.is_empty() {
        return Ok(None);
    }
    let dir = parent.join(sub);
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    for (name, value) in values {
        check_name(name).map_err(|why| io::Error::new(io::ErrorKind::InvalidInput, why))?;
        let mut file = std::fs::File::options()
            .write(true)
            .create_new(true)
            .mode(0o400)
            .open(dir.join(name))?;
        file.write_all(value.expose_secret())?;
    }
    Ok(Some(dir))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt as _;

    use secrecy::SecretSlice;

    use super::*;

    #[test]
    fn secrets_are_owner_read_only_files_in_a_private_directory() {
        let base = tempfile::tempdir().unwrap();
        let delivery = Delivery::new()
            .secret("a", SecretSlice::from(b"alpha".to_vec()))
            .config("c.json", SecretSlice::from(b"{}".to_vec()));
        let mut dir = DeliveredDir::create(base.path()).unwrap();
        dir.write(&delivery).unwrap();
        let meta = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(meta(dir.path()), 0o700);
        let secrets = dir.secrets.clone().unwrap();
        assert_eq!(meta(&secrets.join("a")), 0o400);
        assert_eq!(std::fs::read(secrets.join("a")).unwrap(), b"alpha");
        assert_eq!(
            std::fs::read(dir.config.clone().unwrap().join("c.json")).unwrap(),
            b"{}"
        );
        let path = dir.path().to_owned();
        drop(dir);
        assert!(!path.exists());
    }

    #[test]
    fn delivery_prefers_tmpfs() {
        let base = delivery_base();
        if Path::new("/dev/shm").is_dir() && std::env::var_os("XDG_RUNTIME_DIR").is_none() {
            assert_eq!(base, Path::new("/dev/shm"));
        }
    }
}
