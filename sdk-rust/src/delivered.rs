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
    #[error("{}", not_available(*kind, name, false))]
    NothingDelivered {
        /// What was asked for; its [`ValueKind::dir_var`] is not set.
        kind: ValueKind,
        /// The name asked for.
        name: String,
    },
    /// Other values were delivered, but not this one.
    #[error("{}", not_available(*kind, name, true))]
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

/// Why a secret or config file `name` of `kind` is not available (`others`: other values of
/// that kind were delivered) and what to do, in the one wording every tether SDK uses, word for
/// word (`proto/testdata/not-available.json`): a plugin cannot tell a name missing from its
/// manifest from one the operator did not grant, so it names both remedies.
fn not_available(kind: ValueKind, name: &str, others: bool) -> String {
    let (noun, plural) = match kind {
        ValueKind::Secret => ("secret", "secrets"),
        ValueKind::Config => ("config file", "config files"),
    };
    let (var, key) = (kind.dir_var(), kind.manifest_key());
    let why = if others {
        format!("the host delivered other {plural}, not this one (no file \"{name}\" in {var})")
    } else {
        format!("the host delivered no {plural} ({var} is not set)")
    };
    format!(
        "{noun} \"{name}\" is not available to this plugin: {why}. To receive it, list it in the plugin's manifest (`{key} = [\"{name}\"]`) and have the operator grant it in the grants file (`{key} = [\"{name}\"]` under the plugin's `[plugins.NAME]`)."
    )
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
    fn a_value_not_available_is_worded_exactly_as_every_sdk_words_it() {
        let fixture: serde_json::Value =
            serde_json::from_str(include_str!("../../proto/testdata/not-available.json")).unwrap();
        let cases = fixture["cases"].as_array().unwrap();
        assert_eq!(cases.len(), 4);
        let empty = tempfile::tempdir().unwrap();
        for case in cases {
            let kind = match case["kind"].as_str().unwrap() {
                "secret" => ValueKind::Secret,
                _ => ValueKind::Config,
            };
            let name = case["name"].as_str().unwrap();
            let err = match case["delivered"].as_str().unwrap() {
                "none" => read(kind, |_| None, name).unwrap_err(),
                _ => read(kind, |_| Some(empty.path().into()), name).unwrap_err(),
            };
            assert_eq!(err.to_string(), case["message"].as_str().unwrap(), "{case}");
        }
    }
}
