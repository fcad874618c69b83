//! Reading the secrets and config files the host delivered (`TETHER_SECRETS_DIR`,
//! `TETHER_CONFIG_DIR`): shared by [`crate::secrets`] and [`crate::config`].

use std::io;
use std::path::PathBuf;

/// Why a delivered secret or config file cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeliveredError {
    /// The host delivered nothing of this kind: the variable is not set.
    #[error(
        "no {kind} was delivered to this plugin ({variable} is not set), so `{name}` cannot be read; list `{name}` under `{kind}s` in the plugin's manifest and have the operator grant it"
    )]
    NothingDelivered {
        /// `secret` or `config`.
        kind: &'static str,
        /// The name asked for.
        name: String,
        /// The environment variable that would name the directory.
        variable: &'static str,
    },
    /// Other values were delivered, but not this one.
    #[error(
        "{kind} `{name}` was not delivered to this plugin (not in {}); list it under `{kind}s` in the plugin's manifest and have the operator grant it",
        dir.display()
    )]
    NotDelivered {
        /// `secret` or `config`.
        kind: &'static str,
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
        /// `secret` or `config`.
        kind: &'static str,
        /// The name asked for.
        name: String,
    },
    /// The file exists but cannot be read.
    #[error("cannot read {kind} `{name}` from {}: {source}", dir.display())]
    Io {
        /// `secret` or `config`.
        kind: &'static str,
        /// The name asked for.
        name: String,
        /// The delivery directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// Reads the delivered file `name` from the directory named by `variable`.
pub(crate) fn read(
    kind: &'static str,
    variable: &'static str,
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
    let Some(dir) = std::env::var_os(variable).map(PathBuf::from) else {
        return Err(DeliveredError::NothingDelivered {
            kind,
            name: name.to_owned(),
            variable,
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
            let err = read("secret", "TETHER_TEST_UNSET_VARIABLE", name).unwrap_err();
            assert!(
                matches!(&err, DeliveredError::InvalidName { kind: "secret", .. }),
                "{name:?}: {err}"
            );
        }
    }

    #[test]
    fn nothing_delivered_says_which_variable_and_what_to_do() {
        let err = read("config", "TETHER_TEST_UNSET_VARIABLE", "settings.json").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("TETHER_TEST_UNSET_VARIABLE is not set"),
            "{text}"
        );
        assert!(text.contains("have the operator grant it"), "{text}");
    }
}
