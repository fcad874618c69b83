//! [`Granted`]: the secrets and config files a host granted, as a value a service can hold —
//! read from the directories the host delivered, or from directories a test chose.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use secrecy::{SecretSlice, SecretString};
use tether_proto::ValueKind;

use crate::delivered::{self, DeliveredError};

/// Where this plugin's granted secrets and config files are.
///
/// [`Granted::from_env`] (also [`Plugin::granted`](crate::Plugin::granted)) reads the
/// directories the host named at launch (`TETHER_SECRETS_DIR`, `TETHER_CONFIG_DIR`);
/// [`Granted::from_dirs`] takes them from the caller, which is how `tether-sdk-test` points a
/// service at a temporary directory without touching the process environment (which tests
/// running in parallel share). A service that holds a `Granted` instead of calling
/// [`secrets::read`](crate::secrets::read) is testable in-process.
///
/// ```no_run
/// use tether_sdk::ExposeSecret as _;
///
/// let granted = tether_sdk::Granted::from_env();
/// let token = granted.secret_string("api-token")?;
/// let header = format!("Bearer {}", token.expose_secret());
/// # drop(header);
/// # Ok::<(), tether_sdk::DeliveredError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Granted {
    secrets_dir: Option<PathBuf>,
    config_dir: Option<PathBuf>,
}

impl Granted {
    /// The directories the host delivered, read from the environment now (an empty variable
    /// counts as unset).
    #[must_use]
    pub fn from_env() -> Self {
        let dir = |kind: ValueKind| {
            std::env::var_os(kind.dir_var())
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Self {
            secrets_dir: dir(ValueKind::Secret),
            config_dir: dir(ValueKind::Config),
        }
    }

    /// These directories (`None`: nothing of that kind was delivered).
    #[must_use]
    pub fn from_dirs(secrets_dir: Option<PathBuf>, config_dir: Option<PathBuf>) -> Self {
        Self {
            secrets_dir,
            config_dir,
        }
    }

    /// The directory of granted secrets, if any was delivered.
    #[must_use]
    pub fn secrets_dir(&self) -> Option<&Path> {
        self.secrets_dir.as_deref()
    }

    /// The directory of granted config files, if any was delivered.
    #[must_use]
    pub fn config_dir(&self) -> Option<&Path> {
        self.config_dir.as_deref()
    }

    /// The secret `name`'s bytes: not shown by `Debug`, wiped from memory when dropped
    /// ([`ExposeSecret`](crate::ExposeSecret) reads them).
    ///
    /// # Errors
    /// [`DeliveredError`] saying what to do when the secret was not requested, not granted or
    /// cannot be read.
    pub fn secret(&self, name: &str) -> Result<SecretSlice<u8>, DeliveredError> {
        self.read(ValueKind::Secret, name).map(SecretSlice::from)
    }

    /// The secret `name` as UTF-8 text (a trailing newline, as editors write, is kept).
    ///
    /// # Errors
    /// As [`secret`](Self::secret); invalid UTF-8 is [`DeliveredError::Io`] (the value is not
    /// shown).
    pub fn secret_string(&self, name: &str) -> Result<SecretString, DeliveredError> {
        let bytes = self.read(ValueKind::Secret, name)?;
        match String::from_utf8(bytes) {
            Ok(text) => Ok(SecretString::from(text)),
            Err(e) => {
                // The bytes are a secret: wipe them before reporting.
                let mut bytes = e.into_bytes();
                zeroize::Zeroize::zeroize(&mut bytes);
                Err(self.not_utf8(ValueKind::Secret, name))
            }
        }
    }

    /// The config file `name`'s bytes.
    ///
    /// # Errors
    /// [`DeliveredError`] saying what to do when the file was not requested, not granted or
    /// cannot be read.
    pub fn config(&self, name: &str) -> Result<Vec<u8>, DeliveredError> {
        self.read(ValueKind::Config, name)
    }

    /// The config file `name` as UTF-8 text.
    ///
    /// # Errors
    /// As [`config`](Self::config); invalid UTF-8 is [`DeliveredError::Io`].
    pub fn config_string(&self, name: &str) -> Result<String, DeliveredError> {
        String::from_utf8(self.config(name)?).map_err(|_| self.not_utf8(ValueKind::Config, name))
    }

    fn dir(&self, kind: ValueKind) -> Option<&PathBuf> {
        match kind {
            ValueKind::Secret => self.secrets_dir.as_ref(),
            ValueKind::Config => self.config_dir.as_ref(),
        }
    }

    fn read(&self, kind: ValueKind, name: &str) -> Result<Vec<u8>, DeliveredError> {
        let dir = self.dir(kind).cloned().map(OsString::from);
        delivered::read(
            kind,
            |var| (var == kind.dir_var()).then(|| dir.clone()).flatten(),
            name,
        )
    }

    fn not_utf8(&self, kind: ValueKind, name: &str) -> DeliveredError {
        DeliveredError::Io {
            kind,
            name: name.to_owned(),
            dir: self.dir(kind).cloned().unwrap_or_default(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not valid UTF-8"),
        }
    }
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret as _;

    use super::*;

    #[test]
    fn values_are_read_from_the_directories_given_not_from_the_environment() {
        let secrets = tempfile::tempdir().unwrap();
        std::fs::write(secrets.path().join("token"), "s3cret").unwrap();
        let granted = Granted::from_dirs(Some(secrets.path().to_owned()), None);
        assert_eq!(
            granted.secret_string("token").unwrap().expose_secret(),
            "s3cret"
        );
        assert_eq!(granted.secret("token").unwrap().expose_secret(), b"s3cret");
        let err = granted.config("settings.json").unwrap_err();
        assert!(
            matches!(err, DeliveredError::NothingDelivered { .. }),
            "{err}"
        );
        let err = granted.secret("other").unwrap_err();
        assert!(matches!(err, DeliveredError::NotDelivered { .. }), "{err}");
    }

    #[test]
    fn a_secret_that_is_not_utf8_is_reported_without_its_value() {
        let secrets = tempfile::tempdir().unwrap();
        std::fs::write(secrets.path().join("bin"), b"\xff\xfe").unwrap();
        let granted = Granted::from_dirs(Some(secrets.path().to_owned()), None);
        let err = granted.secret_string("bin").unwrap_err().to_string();
        assert!(err.contains("not valid UTF-8"), "{err}");
    }
}
