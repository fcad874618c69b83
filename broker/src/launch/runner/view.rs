//! Address translation between the plugin's view of its socket directory and the host's: a
//! plugin in a sandbox announces `/run/tether/sock/plugin-….sock`, which the host reaches as
//! the same file in the launch's private directory; the host's brokered sockets go the other
//! way. For a plugin that shares the host's file system (the process runner) both views are the
//! same and translation is the identity. A plugin on another machine (a Pod) announces the
//! address its runner told it to listen on, which the host reaches at another one (the Pod's IP,
//! or a port-forward): that one address, and no other, is translated. Pure.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use tether_proto::handshake::Address;

use crate::launch::error::AddressProblem;

/// How the plugin sees the host's private directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PluginView {
    /// The private directory on the host.
    host_dir: PathBuf,
    /// The same directory as the plugin sees it.
    plugin_dir: PathBuf,
    /// A remote plugin's one address: `(as it announces it, as the host reaches it)`.
    remote: Option<(SocketAddr, SocketAddr)>,
}

impl PluginView {
    /// The plugin sees `host_dir` at `plugin_dir`.
    pub(crate) fn new(host_dir: impl Into<PathBuf>, plugin_dir: impl Into<PathBuf>) -> Self {
        Self {
            host_dir: host_dir.into(),
            plugin_dir: plugin_dir.into(),
            remote: None,
        }
    }

    /// A plugin elsewhere, told to announce `announced`, which the host reaches at `reached`.
    pub(crate) fn remote(
        host_dir: impl Into<PathBuf>,
        announced: SocketAddr,
        reached: SocketAddr,
    ) -> Self {
        let host_dir = host_dir.into();
        Self {
            remote: Some((announced, reached)),
            ..Self::same(host_dir)
        }
    }

    /// Whether the plugin runs elsewhere (a Pod) and is reached at a translated address.
    pub(crate) fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// For a remote plugin, the address the host connects to: exactly the translation of the
    /// one address its runner assigned, anything else refused. `None` for a local plugin (its
    /// address is judged by the address policy as it is).
    pub(crate) fn remote_target(
        &self,
        address: &Address,
    ) -> Option<Result<SocketAddr, AddressProblem>> {
        let (announced, reached) = self.remote?;
        Some(match address {
            Address::Tcp(addr) if *addr == announced => Ok(reached),
            _ => Err(AddressProblem::NotAssigned {
                assigned: announced,
            }),
        })
    }

    /// The plugin sees the host's file system as it is.
    pub(crate) fn same(host_dir: impl Into<PathBuf>) -> Self {
        let host_dir = host_dir.into();
        Self::new(host_dir.clone(), host_dir)
    }

    /// The private directory as the plugin sees it, when that differs from the host's view.
    pub(crate) fn translated_dir(&self) -> Option<&Path> {
        (self.plugin_dir != self.host_dir).then_some(self.plugin_dir.as_path())
    }

    /// An address the plugin announced, as the host reaches it: a unix socket below the
    /// plugin's view of the directory moves to the host's; anything else is unchanged (and
    /// then judged by the address policy as it is).
    pub(crate) fn to_host(&self, address: &Address) -> Address {
        match address {
            Address::Unix(path) => match path.strip_prefix(&self.plugin_dir) {
                Ok(rest) if !rest.as_os_str().is_empty() => Address::Unix(self.host_dir.join(rest)),
                _ => address.clone(),
            },
            Address::Tcp(_) => address.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unix(path: &str) -> Address {
        Address::Unix(path.into())
    }

    #[test]
    fn a_socket_the_sandboxed_plugin_announces_is_reached_in_the_hosts_private_directory() {
        let view = PluginView::new("/tmp/tether-abc", "/run/tether/sock");
        assert_eq!(
            view.to_host(&unix("/run/tether/sock/plugin-1.sock")),
            unix("/tmp/tether-abc/plugin-1.sock")
        );
        assert_eq!(view.translated_dir(), Some(Path::new("/run/tether/sock")));
    }

    #[test]
    fn addresses_outside_the_plugins_view_are_left_for_the_policy_to_refuse() {
        let view = PluginView::new("/tmp/tether-abc", "/run/tether/sock");
        for other in ["/run/tether/sock", "/run/tether/sockx/p", "/etc/passwd"] {
            assert_eq!(view.to_host(&unix(other)), unix(other), "{other}");
        }
        let tcp = Address::Tcp("127.0.0.1:1234".parse().unwrap());
        assert_eq!(view.to_host(&tcp), tcp);
    }

    #[test]
    fn a_remote_plugin_is_reached_only_at_the_translation_of_the_address_it_was_assigned() {
        let assigned: SocketAddr = "127.0.0.1:7070".parse().unwrap();
        let reached: SocketAddr = "10.1.2.3:7070".parse().unwrap();
        let view = PluginView::remote("/tmp/tether-abc", assigned, reached);
        assert_eq!(
            view.remote_target(&Address::Tcp(assigned))
                .unwrap()
                .unwrap(),
            reached
        );
        for other in [
            Address::Tcp("127.0.0.1:7071".parse().unwrap()),
            Address::Tcp("10.1.2.3:7070".parse().unwrap()),
            unix("/tmp/tether-abc/p.sock"),
        ] {
            assert!(matches!(
                view.remote_target(&other),
                Some(Err(AddressProblem::NotAssigned { assigned: a })) if a == assigned
            ));
        }
        assert!(
            PluginView::same("/tmp/tether-abc")
                .remote_target(&Address::Tcp(assigned))
                .is_none()
        );
    }

    #[test]
    fn a_plugin_sharing_the_hosts_file_system_needs_no_translation() {
        let view = PluginView::same("/tmp/tether-abc");
        assert_eq!(view.translated_dir(), None);
        assert_eq!(
            view.to_host(&unix("/tmp/tether-abc/p.sock")),
            unix("/tmp/tether-abc/p.sock")
        );
    }
}
