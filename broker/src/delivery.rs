//! Delivering granted secrets and config files: a per-launch directory (mode `0700`) on tmpfs
//! where available, holding `secrets/` and `config/` with one file (mode `0400`) per value,
//! and the janitor that cleans up when the host dies.

use std::ffi::OsString;
use std::fs::Permissions;
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use secrecy::{ExposeSecret as _, SecretSlice};
use tempfile::TempDir;

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
    /// Writes `delivery` into a new private directory under `base`.
    pub(crate) fn create(base: &Path, delivery: &Delivery) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("tether-delivery-")
            .permissions(Permissions::from_mode(0o700))
            .tempdir_in(base)?;
        let secrets = write_all(dir.path(), "secrets", &delivery.secrets)?;
        let config = write_all(dir.path(), "config", &delivery.config)?;
        Ok(Self {
            dir,
            secrets,
            config,
        })
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
        crate::manifest::check_name(name)
            .map_err(|why| io::Error::new(io::ErrorKind::InvalidInput, why))?;
        let mut file = std::fs::File::options()
            .write(true)
            .create_new(true)
            .mode(0o400)
            .open(dir.join(name))?;
        file.write_all(value.expose_secret())?;
    }
    Ok(Some(dir))
}

/// A small process that outlives a host killed by `SIGKILL` and then cleans up after it: kills
/// the plugin's process group and removes its directories. It watches a pipe (the lifeline)
/// whose write end only the host holds; [`disarm`](Self::disarm) tells it the host cleaned up
/// itself.
#[derive(Debug)]
pub(crate) struct Janitor {
    lifeline: Option<tokio::process::ChildStdin>,
    /// Dropped without waiting: tokio reaps it in the background once it exits.
    child: tokio::process::Child,
}

/// The janitor's program (`sh -c`): `$1` the plugin's process group, then the directories.
const JANITOR_SCRIPT: &str = r#"read -r word; [ "$word" = done ] && exit 0; kill -s KILL -- "-$1" 2>/dev/null; shift; rm -rf -- "$@""#;

impl Janitor {
    /// Starts a janitor for the plugin process group `pgid` and `dirs`.
    pub(crate) fn spawn(pgid: u32, dirs: &[&Path]) -> io::Result<Self> {
        let mut args: Vec<OsString> = vec![
            "-c".into(),
            JANITOR_SCRIPT.into(),
            "tether-janitor".into(),
            pgid.to_string().into(),
        ];
        args.extend(dirs.iter().map(|d| d.as_os_str().to_owned()));
        let mut child = tokio::process::Command::new("/bin/sh")
            .args(args)
            .env_clear()
            // Holds no directory of the host's busy.
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Not in the host's process group: a signal to that group must not stop it.
            .process_group(0)
            .kill_on_drop(false)
            .spawn()?;
        Ok(Self {
            lifeline: child.stdin.take(),
            child,
        })
    }

    /// The host has ended the plugin and removed its directories: the janitor exits without
    /// doing anything.
    pub(crate) fn disarm(self) {
        send_done(self.lifeline);
        drop(self.child);
    }
}

/// Tells a janitor that all is cleaned up, closing its lifeline.
fn send_done(lifeline: Option<tokio::process::ChildStdin>) {
    if let Some(stdin) = lifeline {
        // The pipe is empty and the message tiny: this write does not block.
        if let Ok(fd) = stdin.into_owned_fd() {
            let mut file = std::fs::File::from(fd);
            let _ = file.write_all(b"done\n");
        }
    }
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
        let dir = DeliveredDir::create(base.path(), &delivery).unwrap();
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

    #[tokio::test]
    async fn a_janitor_whose_host_vanishes_removes_the_directories() {
        let dir = tempfile::tempdir().unwrap().keep();
        // An unused process group id: the kill fails quietly.
        let janitor = Janitor::spawn(i32::MAX.unsigned_abs(), &[&dir]).unwrap();
        drop(janitor); // The lifeline closes without "done", as when the host dies.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while dir.exists() {
            assert!(std::time::Instant::now() < deadline, "not removed");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn a_janitor_whose_host_vanishes_kills_the_plugins_process_group() {
        let mut plugin = tokio::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let janitor = Janitor::spawn(plugin.id().unwrap(), &[]).unwrap();
        drop(janitor);
        let status = tokio::time::timeout(std::time::Duration::from_secs(5), plugin.wait())
            .await
            .expect("the janitor kills the group")
            .unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
    }

    #[tokio::test]
    async fn a_disarmed_janitor_leaves_everything_alone() {
        let dir = tempfile::tempdir().unwrap();
        let janitor = Janitor::spawn(i32::MAX.unsigned_abs(), &[dir.path()]).unwrap();
        let Janitor {
            lifeline,
            mut child,
        } = janitor;
        send_done(lifeline);
        let status = child.wait().await.unwrap();
        assert!(status.success());
        assert!(dir.path().exists());
    }
}
