//! Reading the secrets and config files the host delivered (`TETHER_SECRETS_DIR`,
//! `TETHER_CONFIG_DIR`): shared by [`crate::secrets`] and [`crate::config`].

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;

use tether_proto::ValueKind;

/// Why a delivered secret or config file cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeliveredError {
    /// The host delivered nothing of this kind: the variable is not set.
    #[error(
        "no {kind} was delivered to this plugin ({} is not set), so `{name}` cannot be read; list `{name}` under `{}` in the plugin's manifest and have the operator grant it",
        kind.dir_var(),
        kind.manifest_key()
    )]
    NothingDelivered {
        /// What was asked for; its [`ValueKind::dir_var`] is not set.
        kind: ValueKind,
        /// The name asked for.
        name: String,
    },
    /// Other values were delivered, but not this one.
    #[error(
        "{kind} `{name}` was not delivered to this plugin (not in {}); list it under `{}` in the plugin's manifest and have the operator grant it",
        dir.display(),
        kind.manifest_key()
    )]
    NotDelivered {
        /// What was asked for.
        kind: ValueKind,
        /// The name asked for.
        name: String,
        /// The delivery directory.
        dir: PathBuf,
    },
    /// The name cannot be a delivered file's name.
    #[error(
        "`{name}` is not a valid {kind} name: use ASCII letters, digits, `.`, `_` and `-`, not starting with `.`"
    )]
    InvalidName {
        /// What was asked for.
        kind: ValueKind,
        /// The name asked for.
        name: String,
    },
    /// The file exists but cannot be read.
    #[error("cannot read {kind} `{name}` from {}: {source}", dir.display())]
    Io {
        /// What was asked for.
        kind: ValueKind,
        /// The name asked for.
        name: String,
        /// The delivery directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// Reads the delivered file `name` of `kind` from the directory its variable names, looked up
/// with `lookup` (which returns a variable's value, like [`std::env::var_os`]).
pub(crate) fn read(
    kind: ValueKind,
    lookup: impl Fn(&str) -> Option<OsString>,
    name: &str,
) -> Result<Vec<u8>, DeliveredError> {
    let valid = !name.is_empty()
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !valid {
        return Err(DeliveredError::InvalidName {
            kind,
            name: name.to_owned(),
        });
    }
    let Some(dir) = lookup(kind.dir_var()).map(PathBuf::from) else {
        return Err(DeliveredError::NothingDelivered {
            kind,
            name: name.to_owned(),
        });
    };
    std::fs::read(dir.join(name)).map_err(|source| {
        if source.kind() == io::ErrorKind::NotFound {
            DeliveredError::NotDelivered {
                kind,
                name: name.to_owned(),
                dir,
            }
        } else {
            DeliveredError::Io {
                kind,
                name: name.to_owned(),
                dir,
                source,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_leave_the_delivery_directory_are_refused_before_any_io() {
        for name in ["", ".", "..", "../etc/passwd", "a/b", ".hidden", "a\0b"] {
            let err = read(ValueKind::Secret, |_| None, name).unwrap_err();
            assert!(
                matches!(
                    &err,
                    DeliveredError::InvalidName {
                        kind: ValueKind::Secret,
                        ..
                    }
                ),
                "{name:?}: {err}"
            );
        }
    }

    #[test]
    fn nothing_delivered_says_which_variable_and_what_to_do() {
        let err = read(ValueKind::Config, |_| None, "settings.json").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("TETHER_CONFIG_DIR is not set"), "{text}");
        assert!(text.contains("have the operator grant it"), "{text}");
        assert!(
            text.contains("under `config` in the plugin's manifest"),
            "{text}"
        );
    }
}
