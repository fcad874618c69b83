//! What the shim does with each line the plugin prints on stdout, as a pure function: every line
//! passes through unchanged except the first handshake-looking one, which — when it parses and
//! names the plugin's own socket or loopback port — is re-announced with the shim's TCP listener
//! as the address, everything else (versions, protocol, certificate, multiplexing) unchanged.

use std::net::SocketAddr;

use tether_proto::handshake::{Address, Handshake, looks_like_handshake};

/// What to do with one line of the plugin's stdout.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// Print it as it is (stray output, or anything after the handshake).
    PassThrough,
    /// The plugin's handshake: relay connections to its address; print [`announce`] of it
    /// instead.
    Handshake(Handshake),
    /// A handshake the shim will not relay to; it is printed unchanged (so the host reports it
    /// as it would without the shim) and the reason goes to stderr.
    Unrelayable(String),
}

/// The handshake line (with its newline) announcing `listener` instead of the plugin's address.
pub(crate) fn announce(handshake: &Handshake, listener: SocketAddr) -> String {
    let announced = Handshake {
        address: Address::Tcp(listener),
        ..handshake.clone()
    };
    format!("{announced}\n")
}

/// Reads the plugin's stdout, one line at a time.
#[derive(Debug, Default)]
pub(crate) struct Announcer {
    seen_handshake: bool,
}

impl Announcer {
    /// What to do with `line` (one line of stdout, with or without its newline).
    pub(crate) fn line(&mut self, line: &[u8]) -> Line {
        if self.seen_handshake || !looks_like_handshake(line) {
            return Line::PassThrough;
        }
        self.seen_handshake = true;
        let handshake = match Handshake::parse(line) {
            Ok(handshake) => handshake,
            Err(e) => {
                return Line::Unrelayable(format!("the plugin's handshake is malformed: {e}"));
            }
        };
        match &handshake.address {
            Address::Unix(_) => {}
            Address::Tcp(addr) if addr.ip().is_loopback() => {}
            Address::Tcp(addr) => {
                return Line::Unrelayable(format!(
                    "the plugin announced {addr}, not a unix socket or a loopback port of its own"
                ));
            }
        }
        Line::Handshake(handshake)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn announcer() -> Announcer {
        Announcer::default()
    }

    fn relayed(line: Line) -> (Address, String) {
        match line {
            Line::Handshake(h) => (
                h.address.clone(),
                announce(&h, "0.0.0.0:7070".parse().unwrap()),
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_unix_socket_handshake_is_announced_as_the_shims_port_with_every_other_field_kept() {
        let mut a = announcer();
        assert_eq!(a.line(b"starting up\n"), Line::PassThrough);
        let (target, announced) =
            relayed(a.line(b"1|1|unix|/run/tether/tmp/plugin123|grpc|AAAA|true\n"));
        assert_eq!(target, Address::Unix("/run/tether/tmp/plugin123".into()));
        assert_eq!(announced, "1|1|tcp|0.0.0.0:7070|grpc|AAAA|true\n");
        assert_eq!(a.line(b"1|1|unix|/other|grpc|\n"), Line::PassThrough);
    }

    #[test]
    fn a_loopback_tcp_handshake_is_relayed_and_the_certificate_field_kept_empty() {
        let mut a = announcer();
        let (target, announced) = relayed(a.line(b"1|2|tcp|127.0.0.1:10000|grpc|"));
        assert_eq!(target, Address::Tcp("127.0.0.1:10000".parse().unwrap()));
        assert_eq!(announced, "1|2|tcp|0.0.0.0:7070|grpc|\n");
    }

    #[test]
    fn a_handshake_naming_another_machine_or_malformed_is_not_relayed() {
        let mut a = announcer();
        assert!(matches!(
            a.line(b"1|1|tcp|10.0.0.9:10000|grpc|\n"),
            Line::Unrelayable(m) if m.contains("10.0.0.9:10000")
        ));
        let mut a = announcer();
        assert!(matches!(
            a.line(b"1|1|carrier-pigeon|x|grpc|\n"),
            Line::Unrelayable(m) if m.contains("malformed")
        ));
    }
}
