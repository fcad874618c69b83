//! The plugin's network policy: which mode is asked for.
//!
//! Enforcement (an empty network namespace where the kernel allows it, else a seccomp filter
//! on socket families) follows; this module holds the knob that builders and manifests set.

use serde::Deserialize;

/// What network a plugin may use besides the plugin protocol's unix sockets.
///
/// Written in manifests as `network = "none" | "host"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum NetworkMode {
    /// No network: no TCP, UDP or raw sockets, not even to the host's loopback. Pathname unix
    /// sockets (the plugin protocol, go-plugin's default on Linux) keep working. A plugin that
    /// serves over TCP instead of a unix socket needs [`NetworkMode::Host`].
    #[default]
    None,
    /// The host's network, as for any process of the host's user.
    Host,
}

impl std::fmt::Display for NetworkMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::None => "none",
            Self::Host => "host",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct T {
        m: NetworkMode,
    }

    #[test]
    fn modes_are_written_as_manifests_spell_them_and_default_to_the_safe_one() {
        for (text, mode) in [("none", NetworkMode::None), ("host", NetworkMode::Host)] {
            let t: T = toml::from_str(&format!("m = \"{text}\"")).unwrap();
            assert_eq!(t.m, mode);
            assert_eq!(mode.to_string(), text);
        }
        assert_eq!(NetworkMode::default(), NetworkMode::None);
        assert!(toml::from_str::<T>("m = \"loose\"").is_err());
    }
}
