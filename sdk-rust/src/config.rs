//! The config files the host granted this plugin, delivered in `TETHER_CONFIG_DIR`.
//!
//! ```no_run
//! let settings = tether_sdk::config::read_string("settings.json")?;
//! # Ok::<(), tether_sdk::DeliveredError>(())
//! ```

use tether_proto::ValueKind;

use crate::delivered::{self, DeliveredError};

/// The config file `name`'s bytes.
///
/// # Errors
/// [`DeliveredError`] saying what to do when the file was not requested, not granted or
/// cannot be read.
pub fn read(name: &str) -> Result<Vec<u8>, DeliveredError> {
    delivered::read(ValueKind::Config, |var| std::env::var_os(var), name)
}

/// The config file `name` as UTF-8 text.
///
/// # Errors
/// As [`read`]; invalid UTF-8 is reported as [`DeliveredError::Io`].
pub fn read_string(name: &str) -> Result<String, DeliveredError> {
    let bytes = read(name)?;
    String::from_utf8(bytes).map_err(|e| DeliveredError::Io {
        kind: ValueKind::Config,
        name: name.to_owned(),
        dir: std::env::var_os(ValueKind::Config.dir_var())
            .map(Into::into)
            .unwrap_or_default(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}
