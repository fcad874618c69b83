//! The config files the host granted this plugin, delivered in `TETHER_CONFIG_DIR`.
//!
//! ```no_run
//! let settings = tether_sdk::config::read_string("settings.json")?;
//! # Ok::<(), tether_sdk::DeliveredError>(())
//! ```

use crate::delivered::DeliveredError;
use crate::granted::Granted;

/// The config file `name`'s bytes.
///
/// # Errors
/// [`DeliveredError`] saying what to do when the file was not requested, not granted or
/// cannot be read.
pub fn read(name: &str) -> Result<Vec<u8>, DeliveredError> {
    Granted::from_env().config(name)
}

/// The config file `name` as UTF-8 text.
///
/// # Errors
/// As [`read`]; invalid UTF-8 is reported as [`DeliveredError::Io`].
pub fn read_string(name: &str) -> Result<String, DeliveredError> {
    Granted::from_env().config_string(name)
}
