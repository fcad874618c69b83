//! The two kinds of value an operator grants a plugin.

use std::fmt;

use crate::env;

/// A kind of value a plugin requests in its manifest and an operator grants: delivered to the
/// plugin as files in a private directory, never in environment variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ValueKind {
    /// A secret (a password, a token): read by the plugin with `tether_sdk::secrets`.
    Secret,
    /// A config file: read by the plugin with `tether_sdk::config`.
    Config,
}

impl ValueKind {
    /// Both kinds, secrets first.
    pub const ALL: [Self; 2] = [Self::Secret, Self::Config];

    /// The environment variable naming the directory in which values of this kind were
    /// delivered: [`env::SECRETS_DIR`] or [`env::CONFIG_DIR`].
    #[must_use]
    pub fn dir_var(self) -> &'static str {
        match self {
            Self::Secret => env::SECRETS_DIR,
            Self::Config => env::CONFIG_DIR,
        }
    }

    /// The key under which a plugin's manifest (and a grants file) lists names of this kind:
    /// `secrets` or `config`.
    #[must_use]
    pub fn manifest_key(self) -> &'static str {
        match self {
            Self::Secret => "secrets",
            Self::Config => "config",
        }
    }
}

/// `secret` or `config`, as in messages ("secret `token` was not granted").
impl fmt::Display for ValueKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Secret => "secret",
            Self::Config => "config",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_displays_as_the_word_used_in_messages() {
        assert_eq!(ValueKind::Secret.to_string(), "secret");
        assert_eq!(ValueKind::Config.to_string(), "config");
    }

    #[test]
    fn each_kind_names_its_directory_variable_and_manifest_key() {
        assert_eq!(ValueKind::Secret.dir_var(), "TETHER_SECRETS_DIR");
        assert_eq!(ValueKind::Config.dir_var(), "TETHER_CONFIG_DIR");
        assert_eq!(ValueKind::Secret.manifest_key(), "secrets");
        assert_eq!(ValueKind::Config.manifest_key(), "config");
    }
}
