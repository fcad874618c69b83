//! AutoMTLS: throw-away identities and TLS configurations that trust exactly one peer.
//!
//! Each side of a plugin connection makes its own key pair and self-signed certificate for one
//! launch ([`Identity::generate`]). The host hands its certificate to the plugin in
//! `PLUGIN_CLIENT_CERT` ([`Identity::cert_pem`]); the plugin answers its own in the handshake
//! ([`Identity::handshake_field`]). Each side then accepts exactly the other's certificate, byte
//! for byte ([`PinnedCertVerifier`]), while TLS still checks that the peer holds the matching
//! private key (handshake signatures are verified).
//!
//! Pinning instead of path validation is what lets tether accept go-plugin's own certificates,
//! which are P-521, signed with ECDSA-SHA512 and marked `CA:TRUE` — webpki would reject those as
//! end-entity certificates. Signatures are verified with aws-lc-rs, which verifies P-521
//! ([`crypto_provider`]).
//!
//! ```
//! use tether_proto::tls::{self, Identity};
//!
//! let host = Identity::generate()?;
//! let plugin = Identity::generate()?;
//! let client = tls::client_config(&host, plugin.cert_der().clone())?;
//! let server = tls::server_config(&plugin, host.cert_der().clone())?;
//! assert_eq!(client.alpn_protocols, vec![b"h2".to_vec()]);
//! assert_eq!(server.alpn_protocols, vec![b"h2".to_vec()]);
//! # Ok::<(), tether_proto::tls::TlsError>(())
//! ```

use std::fmt;
use std::sync::Arc;

use rcgen::{
    CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
    PKCS_ECDSA_P256_SHA256,
};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    ClientConfig, DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use sha2::{Digest, Sha256};

use crate::handshake;
use crate::key_shares;

/// The TLS server name both sides use (go-plugin's certificates name `localhost`).
pub const SERVER_NAME: &str = "localhost";

/// ALPN protocol offered and required on every connection (grpc-go ≥ 1.67 rejects peers
/// without it).
pub const ALPN_H2: &[u8] = b"h2";

/// How long a generated certificate is valid. Certificates live for one launch and are pinned,
/// so validity only matters to Go peers, which check it against their clock; a day before and
/// a year after generation tolerates clock skew and long-running plugins.
pub const CERT_VALIDITY: time::Duration = time::Duration::days(365);

/// How far before "now" a generated certificate's validity starts, for clock skew.
pub const CERT_BACKDATE: time::Duration = time::Duration::days(1);

/// Errors while making identities or TLS configurations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// Key or certificate generation failed.
    #[error("generating a certificate failed: {0}")]
    Generate(#[from] rcgen::Error),
    /// `PLUGIN_CLIENT_CERT` (or another PEM input) holds no certificate.
    #[error(
        "no PEM certificate found in the input; expected one `-----BEGIN CERTIFICATE-----` block"
    )]
    NoCertificate,
    /// More than one certificate where exactly one peer is pinned.
    #[error("found {0} PEM certificates; exactly one is pinned, so exactly one is expected")]
    MultipleCertificates(usize),
    /// The PEM input is not well formed.
    #[error("the PEM certificate is malformed: {0}")]
    InvalidPem(String),
    /// rustls refused the configuration.
    #[error("building the TLS configuration failed: {0}")]
    Config(#[from] rustls::Error),
}

/// A throw-away key pair and its self-signed certificate, for one launch.
///
/// P-256, `CA:FALSE`, SAN `DNS:localhost`, key usage digitalSignature, extended key usage
/// serverAuth and clientAuth — acceptable to Go peers as their pinned root and client
/// certificate.
pub struct Identity {
    cert: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("fingerprint", &fingerprint(&self.cert))
            .field("key", &"<redacted>")
            .finish()
    }
}

impl Identity {
    /// Generates a fresh key pair and certificate.
    ///
    /// # Errors
    /// [`TlsError::Generate`] if the key or certificate cannot be made.
    pub fn generate() -> Result<Self, TlsError> {
        // A handshake follows every identity: have its key share made meanwhile.
        key_shares::X25519_AHEAD.start_making();
        let key_pair = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut params = CertificateParams::new(vec![SERVER_NAME.to_owned()])?;
        params
            .distinguished_name
            .push(DnType::CommonName, SERVER_NAME);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - CERT_BACKDATE;
        params.not_after = now + CERT_VALIDITY;
        let cert = params.self_signed(&key_pair)?;
        Ok(Self {
            cert: cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(key_pair.serialize_der()),
        })
    }

    /// The certificate, DER encoded.
    #[must_use]
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert
    }

    /// The certificate as PEM, for `PLUGIN_CLIENT_CERT`.
    #[must_use]
    pub fn cert_pem(&self) -> String {
        cert_to_pem(&self.cert)
    }

    /// The certificate for the handshake's SERVER_CERT field (base64, no padding).
    #[must_use]
    pub fn handshake_field(&self) -> String {
        handshake::encode_cert(&self.cert)
    }

    /// SHA-256 fingerprint of the certificate, lowercase hex with `:` separators.
    #[must_use]
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.cert)
    }

    fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(self.key.clone_key())
    }
}

/// PEM-encodes one DER certificate.
#[must_use]
pub fn cert_to_pem(der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        // base64 output is ASCII, so every chunk is valid UTF-8.
        pem.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

/// Parses exactly one PEM certificate, as found in `PLUGIN_CLIENT_CERT`.
///
/// # Errors
/// [`TlsError::NoCertificate`], [`TlsError::MultipleCertificates`] or [`TlsError::InvalidPem`].
pub fn parse_cert_pem(pem: &str) -> Result<CertificateDer<'static>, TlsError> {
    let mut certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::InvalidPem(e.to_string()))?;
    match certs.len() {
        0 => Err(TlsError::NoCertificate),
        1 => Ok(certs.remove(0)),
        n => Err(TlsError::MultipleCertificates(n)),
    }
}

/// SHA-256 fingerprint of a DER certificate, lowercase hex with `:` separators.
#[must_use]
pub fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The crypto provider tether uses everywhere: *ring* for everything that needs randomness
/// (key exchange, signing, the handshake's random values) and for verifying the signatures it
/// knows, aws-lc-rs only for the peer signatures *ring* cannot verify ([`VERIFICATION`]).
///
/// aws-lc-rs is needed because only it verifies go-plugin's P-521 signatures. It is kept away
/// from randomness because AWS-LC seeds its generator from CPU jitter entropy the first time a
/// process asks for random bytes, which costs 30–50 ms — in every plugin process, on every
/// launch. *ring* takes its randomness from the operating system (`getrandom`), as Go does.
#[must_use]
pub fn crypto_provider() -> Arc<CryptoProvider> {
    key_shares::X25519_AHEAD.start_making();
    Arc::new(CryptoProvider {
        // X25519 first, as in *ring*'s defaults, with its key pairs made ahead.
        kx_groups: vec![
            &key_shares::X25519_AHEAD,
            rustls::crypto::ring::kx_group::SECP256R1,
            rustls::crypto::ring::kx_group::SECP384R1,
        ],
        signature_verification_algorithms: VERIFICATION,
        ..rustls::crypto::ring::default_provider()
    })
}

/// The signature algorithms a peer may use, each verified by *ring* where *ring* has it and by
/// aws-lc-rs otherwise (P-521 and SHA-512 with ECDSA: go-plugin's certificates are P-521).
///
/// The schemes are aws-lc-rs's own list minus ML-DSA, which no go-plugin or tether peer uses.
/// *ring* first because tether ↔ tether handshakes (P-256) then never start AWS-LC: its P-256
/// verification is the portable fiat code, ≈ 4× the time of *ring*'s assembly here, and its
/// first use probes the CPU (bench/BENCHMARKS.md, Decisions).
pub static VERIFICATION: WebPkiSupportedAlgorithms = WebPkiSupportedAlgorithms {
    all: &[
        webpki::ring::ECDSA_P256_SHA256,
        webpki::ring::ECDSA_P256_SHA384,
        webpki::aws_lc_rs::ECDSA_P256_SHA512,
        webpki::ring::ECDSA_P384_SHA256,
        webpki::ring::ECDSA_P384_SHA384,
        webpki::aws_lc_rs::ECDSA_P384_SHA512,
        webpki::aws_lc_rs::ECDSA_P521_SHA256,
        webpki::aws_lc_rs::ECDSA_P521_SHA384,
        webpki::aws_lc_rs::ECDSA_P521_SHA512,
        webpki::ring::ED25519,
        webpki::ring::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
        webpki::ring::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
        webpki::ring::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
        webpki::ring::RSA_PKCS1_2048_8192_SHA256,
        webpki::ring::RSA_PKCS1_2048_8192_SHA384,
        webpki::ring::RSA_PKCS1_2048_8192_SHA512,
        webpki::ring::RSA_PKCS1_2048_8192_SHA256_ABSENT_PARAMS,
        webpki::ring::RSA_PKCS1_2048_8192_SHA384_ABSENT_PARAMS,
        webpki::ring::RSA_PKCS1_2048_8192_SHA512_ABSENT_PARAMS,
    ],
    mapping: &[
        // For TLS 1.2 the curve is not fixed by the scheme; for TLS 1.3 it is.
        (
            SignatureScheme::ECDSA_NISTP384_SHA384,
            &[
                webpki::ring::ECDSA_P384_SHA384,
                webpki::ring::ECDSA_P256_SHA384,
                webpki::aws_lc_rs::ECDSA_P521_SHA384,
            ],
        ),
        (
            SignatureScheme::ECDSA_NISTP256_SHA256,
            &[
                webpki::ring::ECDSA_P256_SHA256,
                webpki::ring::ECDSA_P384_SHA256,
                webpki::aws_lc_rs::ECDSA_P521_SHA256,
            ],
        ),
        (
            SignatureScheme::ECDSA_NISTP521_SHA512,
            &[
                webpki::aws_lc_rs::ECDSA_P521_SHA512,
                webpki::aws_lc_rs::ECDSA_P384_SHA512,
                webpki::aws_lc_rs::ECDSA_P256_SHA512,
            ],
        ),
        (SignatureScheme::ED25519, &[webpki::ring::ED25519]),
        (
            SignatureScheme::RSA_PSS_SHA512,
            &[webpki::ring::RSA_PSS_2048_8192_SHA512_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PSS_SHA384,
            &[webpki::ring::RSA_PSS_2048_8192_SHA384_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PSS_SHA256,
            &[webpki::ring::RSA_PSS_2048_8192_SHA256_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA512,
            &[webpki::ring::RSA_PKCS1_2048_8192_SHA512],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA384,
            &[webpki::ring::RSA_PKCS1_2048_8192_SHA384],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA256,
            &[webpki::ring::RSA_PKCS1_2048_8192_SHA256],
        ),
    ],
};

/// A TLS client configuration presenting `identity` and trusting only `peer`.
///
/// TLS 1.2 and 1.3, ALPN `h2`.
///
/// # Errors
/// [`TlsError::Config`] if rustls refuses the key or certificate.
pub fn client_config(
    identity: &Identity,
    peer: CertificateDer<'static>,
) -> Result<ClientConfig, TlsError> {
    client_config_with(crypto_provider(), identity, peer)
}

fn client_config_with(
    provider: Arc<CryptoProvider>,
    identity: &Identity,
    peer: CertificateDer<'static>,
) -> Result<ClientConfig, TlsError> {
    let verifier = PinnedCertVerifier::new(peer, &provider);
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::ALL_VERSIONS)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_client_auth_cert(vec![identity.cert.clone()], identity.key())?;
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(config)
}

/// A TLS server configuration presenting `identity` and requiring `peer` as the client
/// certificate.
///
/// TLS 1.2 and 1.3, ALPN `h2`.
///
/// # Errors
/// [`TlsError::Config`] if rustls refuses the key or certificate.
pub fn server_config(
    identity: &Identity,
    peer: CertificateDer<'static>,
) -> Result<ServerConfig, TlsError> {
    server_config_with(crypto_provider(), identity, peer)
}

fn server_config_with(
    provider: Arc<CryptoProvider>,
    identity: &Identity,
    peer: CertificateDer<'static>,
) -> Result<ServerConfig, TlsError> {
    let verifier = PinnedCertVerifier::new(peer, &provider);
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::ALL_VERSIONS)?
        .with_client_cert_verifier(Arc::new(verifier))
        .with_single_cert(vec![identity.cert.clone()], identity.key())?;
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(config)
}

/// The server name to pass to a TLS client connecting to a plugin.
#[must_use]
pub fn server_name() -> ServerName<'static> {
    ServerName::DnsName(
        rustls_pki_types::DnsName::try_from(SERVER_NAME)
            // `localhost` is a valid DNS name.
            .expect("`localhost` is a valid DNS name"),
    )
}

/// Accepts exactly one certificate (compared byte for byte), as server or as client, and checks
/// the peer's handshake signatures with the provider's algorithms.
///
/// Names, validity dates, key usages and CA flags are deliberately not checked: the peer is
/// authenticated by holding the private key of the one certificate that was exchanged out of
/// band (environment and handshake line) for this launch.
pub struct PinnedCertVerifier {
    expected: CertificateDer<'static>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl fmt::Debug for PinnedCertVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedCertVerifier")
            .field("expected", &fingerprint(&self.expected))
            .finish_non_exhaustive()
    }
}

impl PinnedCertVerifier {
    /// Pins `expected`, verifying signatures with `provider`'s algorithms.
    #[must_use]
    pub fn new(expected: CertificateDer<'static>, provider: &CryptoProvider) -> Self {
        Self {
            expected,
            algorithms: provider.signature_verification_algorithms,
        }
    }

    fn check(&self, presented: &CertificateDer<'_>) -> Result<(), rustls::Error> {
        if presented.as_ref() == self.expected.as_ref() {
            Ok(())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    }
}

/// The handshake-signature half of both verifier traits (identical signatures in each): checked
/// with the provider's algorithms, whoever is pinned.
macro_rules! signature_checks {
    () => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.algorithms.supported_schemes()
        }
    };
}

impl ServerCertVerifier for PinnedCertVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.check(end_entity)
            .map(|()| ServerCertVerified::assertion())
    }

    signature_checks!();
}

impl ClientCertVerifier for PinnedCertVerifier {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.check(end_entity)
            .map(|()| ClientCertVerified::assertion())
    }

    signature_checks!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_certificates_are_distinct_p256_leaves_for_localhost() {
        let a = Identity::generate().unwrap();
        let b = Identity::generate().unwrap();
        assert_ne!(a.cert_der().as_ref(), b.cert_der().as_ref());
        assert_ne!(a.fingerprint(), b.fingerprint());
        // OID 1.2.840.10045.3.1.7 (prime256v1) appears in the SubjectPublicKeyInfo.
        let p256_oid = [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
        assert!(a.cert_der().windows(p256_oid.len()).any(|w| w == p256_oid));
        assert!(a.cert_der().windows(9).any(|w| w == b"localhost"));
    }

    #[test]
    fn pem_round_trips_and_rejects_zero_or_two_certificates() {
        let id = Identity::generate().unwrap();
        let pem = id.cert_pem();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----\n"));
        assert_eq!(
            parse_cert_pem(&pem).unwrap().as_ref(),
            id.cert_der().as_ref()
        );
        assert!(matches!(
            parse_cert_pem("nothing here"),
            Err(TlsError::NoCertificate)
        ));
        let two = format!("{pem}{pem}");
        assert!(matches!(
            parse_cert_pem(&two),
            Err(TlsError::MultipleCertificates(2))
        ));
    }

    #[test]
    fn handshake_field_decodes_back_to_the_certificate() {
        let id = Identity::generate().unwrap();
        let line = format!("1|1|unix|/s|grpc|{}", id.handshake_field());
        let hs = handshake::Handshake::parse(line.as_bytes()).unwrap();
        assert_eq!(hs.server_cert.as_deref(), Some(id.cert_der().as_ref()));
    }

    #[test]
    fn the_verifier_accepts_only_the_pinned_certificate() {
        let pinned = Identity::generate().unwrap();
        let other = Identity::generate().unwrap();
        let verifier = PinnedCertVerifier::new(pinned.cert_der().clone(), &crypto_provider());
        let name = server_name();
        assert!(
            verifier
                .verify_server_cert(pinned.cert_der(), &[], &name, &[], UnixTime::now())
                .is_ok()
        );
        assert!(
            verifier
                .verify_server_cert(other.cert_der(), &[], &name, &[], UnixTime::now())
                .is_err()
        );
        assert!(
            verifier
                .verify_client_cert(other.cert_der(), &[], UnixTime::now())
                .is_err()
        );
        assert!(
            verifier
                .verify_client_cert(pinned.cert_der(), &[], UnixTime::now())
                .is_ok()
        );
    }

    /// A certificate shaped like go-plugin's: P-521, ECDSA-SHA512, CA:TRUE.
    fn go_style_identity() -> Identity {
        let key_pair = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P521_SHA512).unwrap();
        let mut params = CertificateParams::new(vec![SERVER_NAME.to_owned()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, SERVER_NAME);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "HashiCorp");
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
            KeyUsagePurpose::KeyCertSign,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ClientAuth,
            ExtendedKeyUsagePurpose::ServerAuth,
        ];
        let cert = params.self_signed(&key_pair).unwrap();
        Identity {
            cert: cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(key_pair.serialize_der()),
        }
    }

    /// Runs a TLS handshake in memory; `Err` carries the first side's error.
    fn handshake_in_memory(
        client: ClientConfig,
        server: ServerConfig,
    ) -> Result<(), rustls::Error> {
        let mut client = rustls::ClientConnection::new(Arc::new(client), server_name())?;
        let mut server = rustls::ServerConnection::new(Arc::new(server))?;
        for _round in 0..10 {
            let mut buf = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut buf).unwrap();
            }
            let mut rd = &buf[..];
            while !rd.is_empty() {
                server.read_tls(&mut rd).unwrap();
            }
            server.process_new_packets()?;
            let mut buf = Vec::new();
            while server.wants_write() {
                server.write_tls(&mut buf).unwrap();
            }
            let mut rd = &buf[..];
            while !rd.is_empty() {
                client.read_tls(&mut rd).unwrap();
            }
            client.process_new_packets()?;
            if !client.is_handshaking() && !server.is_handshaking() {
                assert_eq!(client.alpn_protocol(), Some(ALPN_H2));
                return Ok(());
            }
        }
        panic!("the handshake did not finish in 10 rounds");
    }

    #[test]
    fn mutual_tls_succeeds_when_each_side_pins_the_other() {
        let host = Identity::generate().unwrap();
        let plugin = Identity::generate().unwrap();
        handshake_in_memory(
            client_config(&host, plugin.cert_der().clone()).unwrap(),
            server_config(&plugin, host.cert_der().clone()).unwrap(),
        )
        .unwrap();
    }

    #[test]
    fn go_plugin_p521_ca_certificates_are_accepted_both_ways() {
        let host = Identity::generate().unwrap();
        let go = go_style_identity();
        // The Go side signs with its P-521 key (Go's crypto; here aws-lc-rs, as ring cannot);
        // the tether side must verify it with `crypto_provider()`.
        let go_crypto = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        // tether host, Go plugin.
        handshake_in_memory(
            client_config(&host, go.cert_der().clone()).unwrap(),
            server_config_with(go_crypto.clone(), &go, host.cert_der().clone()).unwrap(),
        )
        .unwrap();
        // Go host, tether plugin.
        handshake_in_memory(
            client_config_with(go_crypto, &go, host.cert_der().clone()).unwrap(),
            server_config(&host, go.cert_der().clone()).unwrap(),
        )
        .unwrap();
    }

    #[test]
    fn a_server_presenting_another_certificate_than_announced_is_refused() {
        let host = Identity::generate().unwrap();
        let announced = Identity::generate().unwrap();
        let presented = Identity::generate().unwrap();
        let err = handshake_in_memory(
            client_config(&host, announced.cert_der().clone()).unwrap(),
            server_config(&presented, host.cert_der().clone()).unwrap(),
        )
        .unwrap_err();
        assert!(
            matches!(err, rustls::Error::InvalidCertificate(_)),
            "{err:?}"
        );
    }

    #[test]
    fn a_client_presenting_another_certificate_than_pinned_is_refused() {
        let host = Identity::generate().unwrap();
        let intruder = Identity::generate().unwrap();
        let plugin = Identity::generate().unwrap();
        let err = handshake_in_memory(
            client_config(&intruder, plugin.cert_der().clone()).unwrap(),
            server_config(&plugin, host.cert_der().clone()).unwrap(),
        )
        .unwrap_err();
        assert!(
            matches!(err, rustls::Error::InvalidCertificate(_)),
            "{err:?}"
        );
    }

    #[test]
    fn the_provider_verifies_p521_signatures() {
        let schemes = crypto_provider()
            .signature_verification_algorithms
            .supported_schemes();
        assert!(schemes.contains(&SignatureScheme::ECDSA_NISTP521_SHA512));
    }

    #[test]
    fn the_provider_verifies_every_scheme_aws_lc_rs_does_except_ml_dsa() {
        let ours = crypto_provider()
            .signature_verification_algorithms
            .supported_schemes();
        let aws: Vec<_> = rustls::crypto::aws_lc_rs::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
            .into_iter()
            .filter(|s| !format!("{s:?}").starts_with("ML_DSA"))
            .collect();
        assert_eq!(ours, aws);
    }

    #[test]
    fn p256_handshake_signatures_are_verified_by_ring_and_p521_ones_by_aws_lc_rs() {
        let first = |scheme| {
            let (_, algs) = VERIFICATION
                .mapping
                .iter()
                .find(|(s, _)| *s == scheme)
                .expect("scheme is mapped");
            format!("{:?}", algs[0])
        };
        assert!(first(SignatureScheme::ECDSA_NISTP256_SHA256).starts_with("RingAlgorithm"));
        assert!(first(SignatureScheme::ECDSA_NISTP521_SHA512).starts_with("AwsLcRsAlgorithm"));
    }
}
