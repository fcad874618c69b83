//! The socket the host connects to: binding it and removing it again (accepting is
//! `tether_transport::accept`).

use std::path::Path;

use tempfile::{TempDir, TempPath};
use tether_proto::env::PortRange;
use tether_proto::handshake::Address;
use tether_transport::Listener;
use tokio::net::UnixListener;

use crate::env::Launch;
use crate::error::Error;
use crate::options::Transport;

/// Name of the socket inside a private directory the plugin made itself.
const SOCKET_NAME: &str = "plugin.sock";

/// A bound listener, its address for the handshake, and what to delete when it is dropped.
#[derive(Debug)]
pub(crate) struct Bound {
    pub(crate) listener: Listener,
    pub(crate) address: Address,
    /// Removes the socket file (or the private directory holding it) on drop.
    pub(crate) cleanup: Cleanup,
}

/// What the plugin created on the file system for its socket.
#[derive(Debug)]
pub(crate) enum Cleanup {
    /// A private directory (with the socket inside) made by the plugin.
    Dir(#[allow(dead_code, reason = "held for its Drop, which deletes the directory")] TempDir),
    /// A socket file in the host's directory.
    Socket(#[allow(dead_code, reason = "held for its Drop, which deletes the file")] TempPath),
    /// Nothing (TCP).
    Nothing,
}

/// Binds the listener the handshake will announce. Must run inside a tokio runtime.
pub(crate) fn bind(transport: Transport, launch: &Launch) -> Result<Bound, Error> {
    match transport {
        Transport::Unix => match (&launch.env.unix_socket_dir, &launch.env.tmp_dir) {
            (Some(dir), _) => bind_unix_in_host_dir(dir),
            (None, Some(tmp)) => bind_unix_in_private_dir(tmp),
            (None, None) => bind_unix_in_private_dir(&std::env::temp_dir()),
        },
        Transport::Tcp => bind_tcp(launch.env.ports),
    }
}

/// The host's directory may be shared with other plugins (go-plugin hosts let users choose
/// it), so the socket gets a fresh random name there.
fn bind_unix_in_host_dir(dir: &Path) -> Result<Bound, Error> {
    let (listener, path) =
        tether_transport::bind::unix_in(dir).map_err(|source| Error::BindUnix {
            dir: dir.to_owned(),
            source,
        })?;
    Ok(Bound {
        listener: Listener::Unix(listener),
        address: Address::Unix(path.to_path_buf()),
        cleanup: Cleanup::Socket(path),
    })
}

/// Without a directory from the host, the socket lives in a fresh 0700 directory, so no other
/// user can even reach it.
fn bind_unix_in_private_dir(parent: &Path) -> Result<Bound, Error> {
    use std::os::unix::fs::PermissionsExt as _;

    let dir = tempfile::Builder::new()
        .prefix("tether-plugin-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(parent)
        .map_err(|source| Error::SocketDir {
            dir: parent.to_owned(),
            source,
        })?;
    let path = dir.path().join(SOCKET_NAME);
    let listener = UnixListener::bind(&path).map_err(|source| Error::BindUnix {
        dir: dir.path().to_owned(),
        source,
    })?;
    Ok(Bound {
        listener: Listener::Unix(listener),
        address: Address::Unix(path),
        cleanup: Cleanup::Dir(dir),
    })
}

/// Binds the first free port of `ports` on 127.0.0.1, in order, as go-plugin does.
fn bind_tcp(ports: PortRange) -> Result<Bound, Error> {
    let error = |source| Error::BindTcp {
        min: ports.min,
        max: ports.max,
        source,
    };
    let listener = tether_transport::bind::tcp_in_range(ports.min, ports.max).map_err(error)?;
    let address = Address::Tcp(listener.local_addr().map_err(error)?);
    Ok(Bound {
        listener: Listener::Tcp(listener),
        address,
        cleanup: Cleanup::Nothing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_private_socket_dir_is_0700_and_removed_with_its_socket() {
        use std::os::unix::fs::PermissionsExt as _;

        let parent = tempfile::tempdir().unwrap();
        let bound = bind_unix_in_private_dir(parent.path()).unwrap();
        let Address::Unix(path) = bound.address.clone() else {
            panic!("not a unix address: {:?}", bound.address);
        };
        let dir = path.parent().unwrap().to_owned();
        assert_eq!(path.file_name().unwrap(), SOCKET_NAME);
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(path.exists());
        drop(bound);
        assert!(!dir.exists());
    }

    #[tokio::test]
    async fn sockets_in_a_host_dir_get_unique_names_and_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let a = bind_unix_in_host_dir(dir.path()).unwrap();
        let b = bind_unix_in_host_dir(dir.path()).unwrap();
        assert_ne!(a.address, b.address);
        let Address::Unix(path) = a.address.clone() else {
            panic!("not a unix address");
        };
        assert_eq!(path.parent(), Some(dir.path()));
        assert!(path.exists());
        drop(a);
        assert!(!path.exists());
        assert!(dir.path().exists());
    }

    #[tokio::test]
    async fn tcp_binds_the_first_free_port_of_the_range_on_loopback() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        // The taken port is skipped; the next one may be taken too on a busy machine, so only
        // check that the result is on loopback and in range.
        let bound = bind_tcp(PortRange {
            min: port,
            max: port.saturating_add(50),
        })
        .unwrap();
        let Address::Tcp(addr) = bound.address else {
            panic!("not a TCP address");
        };
        assert!(addr.ip().is_loopback());
        assert!(addr.port() > port && addr.port() <= port.saturating_add(50));

        let err = bind_tcp(PortRange {
            min: port,
            max: port,
        })
        .unwrap_err();
        assert!(matches!(err, Error::BindTcp { .. }));
    }
}
