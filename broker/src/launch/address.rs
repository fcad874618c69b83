//! The host's address policy: which announced addresses (the handshake's, and the broker's
//! `ConnInfo`s) it connects to. Connecting itself is `tether_transport::connect`.

use std::os::unix::fs::FileTypeExt as _;
use std::path::{Component, Path};

use tether_proto::handshake::Address;
use tether_transport::Target;

use crate::launch::error::AddressProblem;

/// The lexical part of the address policy: a unix socket must lie inside `private_dir`
/// (absolute, no `.`/`..`), a TCP address must be loopback.
pub(crate) fn check_address(
    address: &Address,
    private_dir: &Path,
) -> Result<Target, AddressProblem> {
    match address {
        Address::Tcp(addr) if addr.ip().is_loopback() => Ok(Target::Tcp(*addr)),
        Address::Tcp(_) => Err(AddressProblem::NotLoopback),
        Address::Unix(path) => {
            let plain = path
                .components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
            let inside = path
                .strip_prefix(private_dir)
                .is_ok_and(|rest| rest.components().next().is_some());
            if path.is_absolute() && plain && inside {
                Ok(Target::Unix(path.clone()))
            } else {
                Err(AddressProblem::OutsidePrivateDir {
                    dir: private_dir.to_owned(),
                })
            }
        }
    }
}

/// The file-system part of the address policy: no symbolic link between the private directory
/// and the socket, and the socket is a socket.
pub(crate) fn check_socket_file(target: &Target, private_dir: &Path) -> Result<(), AddressProblem> {
    let Target::Unix(socket) = target else {
        return Ok(());
    };
    let Ok(rest) = socket.strip_prefix(private_dir) else {
        return Err(AddressProblem::OutsidePrivateDir {
            dir: private_dir.to_owned(),
        });
    };
    let mut path = private_dir.to_owned();
    for component in rest.components() {
        path.push(component);
        let meta =
            std::fs::symlink_metadata(&path).map_err(|source| AddressProblem::Inaccessible {
                path: path.clone(),
                source,
            })?;
        if meta.file_type().is_symlink() {
            return Err(AddressProblem::Symlink { path });
        }
        if path == *socket && !meta.file_type().is_socket() {
            return Err(AddressProblem::NotASocket { path });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

    use super::*;

    const DIR: &str = "/tmp/tether-abc123";

    fn unix(path: &str) -> Result<Target, AddressProblem> {
        check_address(&Address::Unix(path.into()), Path::new(DIR))
    }

    fn tcp(ip: IpAddr) -> Result<Target, AddressProblem> {
        check_address(&Address::Tcp(SocketAddr::new(ip, 1234)), Path::new(DIR))
    }

    #[test]
    fn a_socket_inside_the_private_directory_is_accepted() {
        assert_eq!(
            unix("/tmp/tether-abc123/plugin42").unwrap(),
            Target::Unix("/tmp/tether-abc123/plugin42".into())
        );
        assert!(unix("/tmp/tether-abc123/sub/plugin.sock").is_ok());
    }

    #[test]
    fn a_socket_outside_the_private_directory_is_refused() {
        for path in [
            "/tmp/plugin42",
            "/tmp/tether-abc123",
            "/tmp/tether-abc1234/plugin",
            "/tmp/tether-abc123/../plugin",
            "tmp/tether-abc123/plugin",
            "plugin",
        ] {
            assert!(
                matches!(unix(path), Err(AddressProblem::OutsidePrivateDir { .. })),
                "{path} should be refused"
            );
        }
    }

    #[test]
    fn only_loopback_tcp_addresses_are_accepted() {
        assert!(tcp(IpAddr::V4(Ipv4Addr::LOCALHOST)).is_ok());
        assert!(tcp(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))).is_ok());
        assert!(tcp(IpAddr::V6(Ipv6Addr::LOCALHOST)).is_ok());
        for ip in [
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        ] {
            assert!(matches!(tcp(ip), Err(AddressProblem::NotLoopback)), "{ip}");
        }
    }

    #[test]
    fn a_symlinked_socket_is_refused_and_a_real_one_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        let socket = dir.join("real.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let link = dir.join("link.sock");
        std::os::unix::fs::symlink(&socket, &link).unwrap();
        let file = dir.join("file");
        std::fs::write(&file, b"").unwrap();

        assert!(check_socket_file(&Target::Unix(socket), &dir).is_ok());
        assert!(matches!(
            check_socket_file(&Target::Unix(link), &dir),
            Err(AddressProblem::Symlink { .. })
        ));
        assert!(matches!(
            check_socket_file(&Target::Unix(file), &dir),
            Err(AddressProblem::NotASocket { .. })
        ));
        assert!(matches!(
            check_socket_file(&Target::Unix(dir.join("missing")), &dir),
            Err(AddressProblem::Inaccessible { .. })
        ));
    }

    #[test]
    fn a_symlinked_directory_on_the_way_to_the_socket_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let socket = elsewhere.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.join("sub")).unwrap();
        assert!(matches!(
            check_socket_file(&Target::Unix(dir.join("sub/s.sock")), &dir),
            Err(AddressProblem::Symlink { .. })
        ));
    }
}
