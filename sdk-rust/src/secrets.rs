//! The secrets the host granted this plugin, delivered as files in `TETHER_SECRETS_DIR`.
//!
//! ```no_run
//! use tether_sdk::ExposeSecret as _;
//! let password = tether_sdk::secrets::read("db-password")?;
//! let bytes: &[u8] = password.expose_secret();
//! # Ok::<(), tether_sdk::DeliveredError>(())
//! ```

use secrecy::{SecretSlice, SecretString};

use crate::delivered::DeliveredError;
use crate::granted::Granted;

/// The secret `name`: not shown by `Debug`, wiped from memory when dropped. The same as
/// [`Granted::from_env`]`().secret(name)`; a service that holds a [`Granted`] instead can be
/// pointed at a test's directory.
///
/// # Errors
/// [`DeliveredError`] saying what to do when the secret was not requested, not granted or
/// cannot be read.
pub fn read(name: &str) -> Result<SecretSlice<u8>, DeliveredError> {
    Granted::from_env().secret(name)
}

/// The secret `name` as UTF-8 text; see [`Granted::secret_string`].
///
/// # Errors
/// As [`read`]; invalid UTF-8 is [`DeliveredError::Io`].
pub fn read_string(name: &str) -> Result<SecretString, DeliveredError> {
    Granted::from_env().secret_string(name)
}
