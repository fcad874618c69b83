//! The secrets the host granted this plugin, delivered as files in `TETHER_SECRETS_DIR`.
//!
//! ```no_run
//! use secrecy::ExposeSecret as _;
//! let password = tether_sdk::secrets::read("db-password")?;
//! let bytes: &[u8] = password.expose_secret();
//! # Ok::<(), tether_sdk::DeliveredError>(())
//! ```

use secrecy::SecretSlice;
use tether_proto::ValueKind;

use crate::delivered::{self, DeliveredError};

/// The secret `name`: not shown by `Debug`, wiped from memory when dropped.
///
/// # Errors
/// [`DeliveredError`] saying what to do when the secret was not requested, not granted or
/// cannot be read.
pub fn read(name: &str) -> Result<SecretSlice<u8>, DeliveredError> {
    delivered::read(ValueKind::Secret, |var| std::env::var_os(var), name).map(SecretSlice::from)
}
