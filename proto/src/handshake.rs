//! The handshake line a plugin prints as its first line on stdout — sans IO.
//!
//! ```text
//! CORE|APP|NETWORK|ADDR|PROTOCOL|SERVER_CERT[|MUX]
//! 1|1|unix|/tmp/plugin123/plugin.sock|grpc|MIIB...
//! ```
//!
//! [`Handshake::parse`] turns the bytes of one line into a typed [`Handshake`] or a
//! [`HandshakeError`] that says exactly what was wrong; [`Handshake`]'s `Display` writes the line
//! (without the trailing newline) so that go-plugin hosts of every version read it. Neither does
//! any IO, so both are fuzzed and property-tested directly.
//!
//! ```
//! use tether_proto::handshake::{Address, Handshake};
//!
//! let hs = Handshake::parse(b"1|1|tcp|127.0.0.1:1234|grpc|\n")?;
//! assert_eq!(hs.app_version, 1);
//! assert_eq!(hs.address, Address::Tcp("127.0.0.1:1234".parse()?));
//! assert_eq!(hs.server_cert, None);
//! assert_eq!(hs.to_string(), "1|1|tcp|127.0.0.1:1234|grpc|");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};

/// The only core protocol version go-plugin has ever defined.
pub const CORE_PROTOCOL_VERSION: u32 = 1;

/// Longest handshake line accepted, in bytes, newline excluded.
///
/// A base64 P-521 certificate (go-plugin's) is about 800 bytes and a unix socket path at most
/// 108; 16 KiB leaves room for large certificates while bounding what a host buffers from a
/// plugin that never prints a newline.
pub const MAX_LINE_LEN: usize = 16 * 1024;

/// Go hosts ignore a certificate field of at most this many characters (go-plugin's
/// `len(field) > 50` check); tether decodes any non-empty field and only documents the quirk.
pub const GO_MIN_CERT_FIELD_LEN: usize = 50;

/// A parsed handshake line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handshake {
    /// Core protocol version; always [`CORE_PROTOCOL_VERSION`] once parsed.
    pub core_version: u32,
    /// The app protocol version the plugin chose.
    pub app_version: u32,
    /// Where the plugin listens.
    pub address: Address,
    /// The RPC protocol; tether speaks gRPC only.
    pub protocol: Protocol,
    /// AutoMTLS: the plugin's certificate (DER), absent when TLS is off.
    pub server_cert: Option<Vec<u8>>,
    /// Whether the plugin accepted broker multiplexing. Present only when the host offered it.
    pub multiplex: Option<bool>,
}

/// Where a plugin listens.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Address {
    /// A unix domain socket at this path (`unix` network).
    Unix(PathBuf),
    /// A TCP address (`tcp` network).
    Tcp(SocketAddr),
}

impl Address {
    /// Parses a NETWORK and ADDR pair, as found in the handshake line and in the broker's
    /// `ConnInfo` messages.
    ///
    /// ```
    /// use tether_proto::handshake::Address;
    /// assert_eq!(Address::parse("tcp", "127.0.0.1:1234")?.network(), "tcp");
    /// assert!(Address::parse("udp", "127.0.0.1:1234").is_err());
    /// # Ok::<(), tether_proto::handshake::HandshakeError>(())
    /// ```
    ///
    /// # Errors
    /// [`HandshakeError::EmptyAddress`], [`HandshakeError::InvalidTcpAddress`] or
    /// [`HandshakeError::UnsupportedNetwork`].
    pub fn parse(network: &str, addr: &str) -> Result<Self, HandshakeError> {
        if addr.is_empty() {
            return Err(HandshakeError::EmptyAddress);
        }
        match network {
            "unix" => Ok(Self::Unix(PathBuf::from(addr))),
            "tcp" => addr
                .parse()
                .map(Self::Tcp)
                .map_err(|_| HandshakeError::InvalidTcpAddress(addr.to_owned())),
            other => Err(HandshakeError::UnsupportedNetwork(other.to_owned())),
        }
    }

    /// The handshake's NETWORK field for this address.
    #[must_use]
    pub fn network(&self) -> &'static str {
        match self {
            Self::Unix(_) => "unix",
            Self::Tcp(_) => "tcp",
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unix(path) => write!(f, "{}", path.display()),
            Self::Tcp(addr) => write!(f, "{addr}"),
        }
    }
}

/// The RPC protocol announced in the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Protocol {
    /// gRPC over HTTP/2.
    Grpc,
}

impl Protocol {
    /// The handshake's PROTOCOL field.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Grpc => "grpc",
        }
    }
}

/// Why a handshake line was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The line was empty (or only whitespace).
    #[error("the handshake line is empty")]
    Empty,
    /// The line was longer than [`MAX_LINE_LEN`].
    #[error("the handshake line is {len} bytes long, more than the maximum of {max}")]
    TooLong {
        /// Length seen (possibly a lower bound when the reader stopped early).
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The line is not UTF-8.
    #[error("the handshake line is not valid UTF-8")]
    NotUtf8,
    /// Fewer than the four fields `CORE|APP|NETWORK|ADDR`.
    #[error(
        "the handshake line has {found} `|`-separated fields; at least 4 are required (CORE|APP|NETWORK|ADDR|PROTOCOL|CERT)"
    )]
    TooFewFields {
        /// How many fields were found.
        found: usize,
    },
    /// More than the seven fields the protocol defines.
    #[error("the handshake line has {found} `|`-separated fields; at most 7 are defined")]
    TooManyFields {
        /// How many fields were found.
        found: usize,
    },
    /// The CORE field is not a number.
    #[error("the core protocol version {0:?} is not a number")]
    InvalidCoreVersion(String),
    /// The CORE field is a number other than [`CORE_PROTOCOL_VERSION`].
    #[error("core protocol version {0} is not supported (only {CORE_PROTOCOL_VERSION} is)")]
    UnsupportedCoreVersion(u32),
    /// The APP field is not a number.
    #[error("the app protocol version {0:?} is not a number")]
    InvalidAppVersion(String),
    /// NETWORK is neither `unix` nor `tcp`.
    #[error("network {0:?} is not supported (expected `unix` or `tcp`)")]
    UnsupportedNetwork(String),
    /// The ADDR field is empty.
    #[error("the address field is empty")]
    EmptyAddress,
    /// A `tcp` address that is not `IP:PORT`.
    #[error("TCP address {0:?} is not of the form IP:PORT")]
    InvalidTcpAddress(String),
    /// PROTOCOL is missing (which means go-plugin's `netrpc`) or not `grpc`.
    #[error(
        "plugin protocol {0:?} is not supported: tether speaks only `grpc` (a plugin built with go-plugin must set GRPCServer)"
    )]
    UnsupportedProtocol(String),
    /// SERVER_CERT is not base64.
    #[error("the server certificate field is not base64: {0}")]
    InvalidCertificate(String),
    /// MUX is neither `true` nor `false`.
    #[error("the multiplexing field {0:?} is neither `true` nor `false`")]
    InvalidMultiplex(String),
}

impl Handshake {
    /// Parses one handshake line; a trailing `\n` or `\r\n` and surrounding whitespace are
    /// ignored, as go-plugin does.
    ///
    /// # Errors
    /// A [`HandshakeError`] naming the first field that is wrong.
    pub fn parse(line: &[u8]) -> Result<Self, HandshakeError> {
        if line.len() > MAX_LINE_LEN + 2 {
            return Err(HandshakeError::TooLong {
                len: line.len(),
                max: MAX_LINE_LEN,
            });
        }
        let line = std::str::from_utf8(line).map_err(|_| HandshakeError::NotUtf8)?;
        let line = line.trim();
        if line.is_empty() {
            return Err(HandshakeError::Empty);
        }
        if line.len() > MAX_LINE_LEN {
            return Err(HandshakeError::TooLong {
                len: line.len(),
                max: MAX_LINE_LEN,
            });
        }
        let fields: Vec<&str> = line.split('|').collect();
        if fields.len() < 4 {
            return Err(HandshakeError::TooFewFields {
                found: fields.len(),
            });
        }
        if fields.len() > 7 {
            return Err(HandshakeError::TooManyFields {
                found: fields.len(),
            });
        }

        let core_version: u32 = fields[0]
            .parse()
            .map_err(|_| HandshakeError::InvalidCoreVersion(fields[0].to_owned()))?;
        if core_version != CORE_PROTOCOL_VERSION {
            return Err(HandshakeError::UnsupportedCoreVersion(core_version));
        }
        let app_version: u32 = fields[1]
            .parse()
            .map_err(|_| HandshakeError::InvalidAppVersion(fields[1].to_owned()))?;
        let address = Address::parse(fields[2], fields[3])?;
        let protocol = match fields.get(4).copied() {
            Some("grpc") => Protocol::Grpc,
            // go-plugin: a missing field means net/rpc.
            None => return Err(HandshakeError::UnsupportedProtocol("netrpc".to_owned())),
            Some(other) => return Err(HandshakeError::UnsupportedProtocol(other.to_owned())),
        };
        let server_cert = match fields.get(5).copied() {
            None | Some("") => None,
            Some(b64) => Some(decode_cert(b64)?),
        };
        let multiplex = match fields.get(6).copied() {
            None => None,
            Some("true") => Some(true),
            Some("false") => Some(false),
            Some(other) => return Err(HandshakeError::InvalidMultiplex(other.to_owned())),
        };
        Ok(Self {
            core_version,
            app_version,
            address,
            protocol,
            server_cert,
            multiplex,
        })
    }
}

/// Whether `line` is meant as a handshake (its first field is a number and it has at least four
/// `|`-separated fields) rather than stray output.
///
/// A lenient host skips lines for which this is `false` and treats a line for which it is `true`
/// but [`Handshake::parse`] fails as a malformed handshake.
#[must_use]
pub fn looks_like_handshake(line: &[u8]) -> bool {
    let line = line.trim_ascii();
    let mut fields = line.split(|&b| b == b'|');
    let first_is_number = fields
        .next()
        .is_some_and(|f| !f.is_empty() && f.iter().all(u8::is_ascii_digit));
    first_is_number && fields.count() >= 3
}

/// go-plugin writes the certificate with `RawStdEncoding` (no padding); other implementations
/// may pad. Accept both.
fn decode_cert(b64: &str) -> Result<Vec<u8>, HandshakeError> {
    let engine = if b64.ends_with('=') {
        &STANDARD
    } else {
        &STANDARD_NO_PAD
    };
    engine
        .decode(b64)
        .map_err(|e| HandshakeError::InvalidCertificate(e.to_string()))
}

/// Encodes a DER certificate for the handshake's SERVER_CERT field: base64, standard alphabet,
/// no padding (Go's `RawStdEncoding`; padded input fails on Go hosts).
#[must_use]
pub fn encode_cert(der: &[u8]) -> String {
    STANDARD_NO_PAD.encode(der)
}

impl fmt::Display for Handshake {
    /// Writes the line without its newline. The certificate field is always written (empty when
    /// TLS is off, like Go plugins); the multiplexing field only when set, because hosts of
    /// go-plugin ≤ 1.5 split into at most six fields.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}|{}|{}|{}|{}|",
            self.core_version,
            self.app_version,
            self.address.network(),
            self.address,
            self.protocol.as_str()
        )?;
        if let Some(cert) = &self.server_cert {
            f.write_str(&encode_cert(cert))?;
        }
        if let Some(mux) = self.multiplex {
            write!(f, "|{mux}")?;
        }
        Ok(())
    }
}

/// Truncates peer output for quoting in an error message: at most `max` bytes, lossily decoded,
/// with a note of how much was cut.
#[must_use]
pub fn quote_truncated(bytes: &[u8], max: usize) -> String {
    if bytes.len() <= max {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    format!(
        "{}… ({} more bytes)",
        String::from_utf8_lossy(&bytes[..max]),
        bytes.len() - max
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn unix(path: &str) -> Address {
        Address::Unix(PathBuf::from(path))
    }

    #[test]
    fn parses_a_go_plugin_line_without_certificate() {
        let hs = Handshake::parse(b"1|1|unix|/tmp/plugin42|grpc|\n").unwrap();
        assert_eq!(
            hs,
            Handshake {
                core_version: 1,
                app_version: 1,
                address: unix("/tmp/plugin42"),
                protocol: Protocol::Grpc,
                server_cert: None,
                multiplex: None,
            }
        );
    }

    #[test]
    fn parses_certificate_with_and_without_padding() {
        let der = vec![0x30, 0x82, 0x01, 0x02, 0xff];
        let raw = encode_cert(&der);
        assert!(!raw.ends_with('='));
        let padded = STANDARD.encode(&der);
        assert!(padded.ends_with('='));
        for field in [raw, padded] {
            let line = format!("1|3|tcp|127.0.0.1:10000|grpc|{field}\r\n");
            let hs = Handshake::parse(line.as_bytes()).unwrap();
            assert_eq!(hs.server_cert.as_deref(), Some(&der[..]));
            assert_eq!(hs.app_version, 3);
        }
    }

    #[test]
    fn parses_the_multiplexing_field() {
        let hs = Handshake::parse(b"1|1|unix|/s|grpc||true").unwrap();
        assert_eq!(hs.multiplex, Some(true));
        let hs = Handshake::parse(b"1|1|unix|/s|grpc||false").unwrap();
        assert_eq!(hs.multiplex, Some(false));
        assert_eq!(
            Handshake::parse(b"1|1|unix|/s|grpc||yes"),
            Err(HandshakeError::InvalidMultiplex("yes".into()))
        );
    }

    #[test]
    fn a_missing_protocol_field_is_netrpc_and_unsupported() {
        assert_eq!(
            Handshake::parse(b"1|1|unix|/s"),
            Err(HandshakeError::UnsupportedProtocol("netrpc".into()))
        );
        assert_eq!(
            Handshake::parse(b"1|1|unix|/s|netrpc|"),
            Err(HandshakeError::UnsupportedProtocol("netrpc".into()))
        );
    }

    #[test]
    fn rejects_each_malformed_field_with_its_own_error() {
        let cases: &[(&[u8], HandshakeError)] = &[
            (b"", HandshakeError::Empty),
            (b"  \n", HandshakeError::Empty),
            (b"1|1|unix", HandshakeError::TooFewFields { found: 3 }),
            (
                b"1|1|unix|/s|grpc||true|x",
                HandshakeError::TooManyFields { found: 8 },
            ),
            (
                b"x|1|unix|/s|grpc|",
                HandshakeError::InvalidCoreVersion("x".into()),
            ),
            (
                b"2|1|unix|/s|grpc|",
                HandshakeError::UnsupportedCoreVersion(2),
            ),
            (
                b"1|-1|unix|/s|grpc|",
                HandshakeError::InvalidAppVersion("-1".into()),
            ),
            (
                b"1|1|udp|/s|grpc|",
                HandshakeError::UnsupportedNetwork("udp".into()),
            ),
            (b"1|1|unix||grpc|", HandshakeError::EmptyAddress),
            (
                b"1|1|tcp|localhost:80|grpc|",
                HandshakeError::InvalidTcpAddress("localhost:80".into()),
            ),
            (b"1|1|unix|/s|grpc|\xff", HandshakeError::NotUtf8),
        ];
        for (line, want) in cases {
            assert_eq!(
                Handshake::parse(line).as_ref(),
                Err(want),
                "line {:?}",
                String::from_utf8_lossy(line)
            );
        }
        assert!(matches!(
            Handshake::parse(b"1|1|unix|/s|grpc|!!notbase64"),
            Err(HandshakeError::InvalidCertificate(_))
        ));
    }

    #[test]
    fn rejects_a_line_longer_than_the_maximum() {
        let long = format!("1|1|unix|/{}|grpc|", "a".repeat(MAX_LINE_LEN));
        assert!(matches!(
            Handshake::parse(long.as_bytes()),
            Err(HandshakeError::TooLong {
                max: MAX_LINE_LEN,
                ..
            })
        ));
    }

    #[test]
    fn encodes_six_fields_without_multiplexing_and_seven_with() {
        let mut hs = Handshake {
            core_version: 1,
            app_version: 2,
            address: unix("/run/p/plugin.sock"),
            protocol: Protocol::Grpc,
            server_cert: None,
            multiplex: None,
        };
        assert_eq!(hs.to_string(), "1|2|unix|/run/p/plugin.sock|grpc|");
        hs.server_cert = Some(vec![1, 2, 3, 4]);
        hs.multiplex = Some(false);
        assert_eq!(
            hs.to_string(),
            "1|2|unix|/run/p/plugin.sock|grpc|AQIDBA|false"
        );
    }

    #[test]
    fn tells_stray_output_from_an_attempted_handshake() {
        assert!(looks_like_handshake(b"1|1|unix|/s|grpc|"));
        assert!(looks_like_handshake(b"9|x|y|z"));
        assert!(!looks_like_handshake(b"starting up..."));
        assert!(!looks_like_handshake(b"a|b|c|d"));
        assert!(!looks_like_handshake(b"1|2|3"));
        assert!(!looks_like_handshake(b""));
    }

    #[test]
    fn quotes_long_output_truncated() {
        assert_eq!(quote_truncated(b"abc", 10), "abc");
        assert_eq!(quote_truncated(b"abcdef", 2), "ab… (4 more bytes)");
    }

    fn arb_handshake() -> impl Strategy<Value = Handshake> {
        let address = prop_oneof![
            "/[a-zA-Z0-9_./-]{1,100}".prop_map(|p| Address::Unix(PathBuf::from(p))),
            (any::<std::net::IpAddr>(), any::<u16>())
                .prop_map(|(ip, port)| Address::Tcp(SocketAddr::new(ip, port))),
        ];
        (
            any::<u32>(),
            address,
            proptest::option::of(proptest::collection::vec(any::<u8>(), 1..600)),
            proptest::option::of(any::<bool>()),
        )
            .prop_map(|(app_version, address, server_cert, multiplex)| Handshake {
                core_version: CORE_PROTOCOL_VERSION,
                app_version,
                address,
                protocol: Protocol::Grpc,
                server_cert,
                multiplex,
            })
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = Handshake::parse(&bytes);
            let _ = looks_like_handshake(&bytes);
        }

        #[test]
        fn random_fields_never_panic(fields in proptest::collection::vec("[0-9a-z:./|=+]{0,12}", 0..9)) {
            let _ = Handshake::parse(fields.join("|").as_bytes());
        }

        #[test]
        fn encode_then_parse_round_trips(hs in arb_handshake()) {
            let line = format!("{hs}\n");
            prop_assert!(looks_like_handshake(line.as_bytes()));
            prop_assert_eq!(Handshake::parse(line.as_bytes()), Ok(hs));
        }
    }
}
