//! Address translation between the plugin's view of its socket directory and the host's: a
//! plugin in a sandbox announces `/run/tether/sock/plugin-….sock`, which the host reaches as
//! the same file in the launch's private directory; the host's brokered sockets go the other
//! way. For a plugin that shares the host's file system (the process runner) both views are the
//! same and translation is the identity. Pure.

use std::path::{Path, PathBuf};

use tether_proto::handshake::Address;

/// How the plugin sees the host's private directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PluginView {
    /// The private directory on the host.
    host_dir: PathBuf,
    /// The same directory as the plugin sees it.
    plugin_dir: PathBuf,
}

impl PluginView {
    /// The plugin sees `host_dir` at `plugin_dir`.
    pub(crate) fn new(host_dir: impl Into<PathBuf>, plugin_dir: impl Into<PathBuf>) -> Self {
        Self {
            host_dir: host_dir.into(),
            plugin_dir: plugin_dir.into(),
        }
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
    fn a_plugin_sharing_the_hosts_file_system_needs_no_translation() {
        let view = PluginView::same("/tmp/tether-abc");
        assert_eq!(view.translated_dir(), None);
        assert_eq!(
            view.to_host(&unix("/tmp/tether-abc/p.sock")),
            unix("/tmp/tether-abc/p.sock")
        );
    }
}
