//! The plugin's network policy: [`NetworkMode`], and how it is enforced
//! ([`NetworkMechanism`]).
//!
//! `none` is enforced, in order of preference, by:
//! - **an empty network namespace** ([`NetworkMechanism::Namespace`]), one per plugin, entered
//!   between fork and exec, where the host may make one (it has `CAP_SYS_ADMIN`, i.e. runs as
//!   root). The host makes it ahead of the launch ([`NETWORK_NAMESPACE_RESERVE`]).
//!   The plugin sees only a loopback interface that is down: no TCP, UDP or raw socket
//!   reaches anything, not even the host's loopback services, and abstract unix sockets are
//!   those of its own namespace. Pathname unix sockets are files and work across it, so the
//!   plugin protocol (go-plugin's unix socket in the private directory) is unaffected.
//! - **a seccomp filter on socket families** ([`NetworkMechanism::Seccomp`]) otherwise:
//!   `socket(2)` fails with `EPERM` for every family but `AF_UNIX`, and io_uring (which could
//!   make sockets without `socket(2)`) is refused. Abstract unix sockets are then reachable
//!   unless Landlock (ABI ≥ 6, [`SandboxMode`](crate::confine::SandboxMode) on) scopes them.
//!
//! Either way, when Landlock is on and the kernel has ABI ≥ 4, the plugin's Landlock domain
//! also refuses every TCP `bind` and `connect`.
//!
//! Pathname unix sockets outside the plugin's directories (a container daemon's
//! `/run/docker.sock`, a database's socket) are blocked by Landlock from ABI 9
//! ([`RESOLVE_UNIX_ABI`](crate::confine::RESOLVE_UNIX_ABI)) with the sandbox on. On
//! older kernels Landlock does not cover `connect(2)` on them: what keeps a plugin from such a
//! socket is its world (a path it was not granted is not there) and the socket file's own
//! permissions (a root host's plugin runs as another user and reads its grants as that user).
//! [`pathname_sockets_blocked`] says which, for `tether check` to warn.

use serde::Deserialize;

#[cfg(doc)]
use crate::confine::NETWORK_NAMESPACE_RESERVE;

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

/// How [`NetworkMode::None`] is enforced for a plugin (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NetworkMechanism {
    /// An empty network namespace of the plugin's own (`netns`).
    Namespace,
    /// A seccomp filter refusing every socket family but `AF_UNIX` (`seccomp`).
    Seccomp,
}

impl std::fmt::Display for NetworkMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Namespace => "netns",
            Self::Seccomp => "seccomp",
        })
    }
}

impl NetworkMechanism {
    /// The mechanism that enforces `mode` on this host: `None` for [`NetworkMode::Host`];
    /// a namespace when `namespace` allows one and [`network_namespaces_available`], else the
    /// seccomp filter.
    #[must_use]
    pub fn for_mode(mode: NetworkMode, namespace: bool) -> Option<Self> {
        match mode {
            NetworkMode::Host => None,
            NetworkMode::None if namespace && network_namespaces_available() => {
                Some(Self::Namespace)
            }
            NetworkMode::None => Some(Self::Seccomp),
        }
    }
}

/// Whether this host can give plugins a network namespace of their own: it has
/// `CAP_SYS_ADMIN` (it runs as root). Other hosts get the seccomp mechanism.
#[must_use]
pub fn network_namespaces_available() -> bool {
    crate::confine::caps::has_capability(crate::confine::caps::CAP_SYS_ADMIN)
}

/// Whether a plugin with the sandbox on is kept from connecting to pathname unix sockets
/// outside the directories it may write (a container daemon's control socket, for example):
/// when the kernel's Landlock has `LANDLOCK_ACCESS_FS_RESOLVE_UNIX` (ABI 9). Otherwise only
/// the socket file's permissions protect one it can reach (see the [module docs](self)).
#[must_use]
pub fn pathname_sockets_blocked() -> bool {
    crate::confine::kernel_landlock_abi() >= crate::confine::RESOLVE_UNIX_ABI
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

    #[test]
    fn no_network_is_a_namespace_only_where_the_host_may_make_one() {
        assert_eq!(NetworkMechanism::for_mode(NetworkMode::Host, true), None);
        assert_eq!(
            NetworkMechanism::for_mode(NetworkMode::None, false),
            Some(NetworkMechanism::Seccomp)
        );
        let expected = if network_namespaces_available() {
            NetworkMechanism::Namespace
        } else {
            NetworkMechanism::Seccomp
        };
        assert_eq!(
            NetworkMechanism::for_mode(NetworkMode::None, true),
            Some(expected)
        );
        assert_eq!(NetworkMechanism::Namespace.to_string(), "netns");
    }
}
