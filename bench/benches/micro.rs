//! Micro-benchmarks: the handshake codec and AutoMTLS certificate generation.
//!
//! `cargo bench -p tether-bench` (divan). These are the per-launch CPU costs a plugin start
//! pays before any IO: the plugin generates an identity and encodes its handshake line, the
//! host generates an identity and parses the line.
#![allow(missing_docs)]

use std::hint::black_box;

use tether_proto::handshake::{Address, CORE_PROTOCOL_VERSION, Handshake, Protocol};
use tether_proto::tls::Identity;

fn main() {
    divan::main();
}

/// A handshake line as a tether plugin prints it under AutoMTLS (certificate included).
fn sample_line() -> String {
    let identity = Identity::generate().expect("generating a certificate works");
    Handshake {
        core_version: CORE_PROTOCOL_VERSION,
        app_version: 1,
        address: Address::Unix("/tmp/tether-Xy12ab/plugin.sock".into()),
        protocol: Protocol::Grpc,
        server_cert: Some(identity.cert_der().to_vec()),
        multiplex: None,
    }
    .to_string()
}

mod handshake {
    use super::*;

    #[divan::bench]
    fn parse_with_certificate(bencher: divan::Bencher) {
        let line = sample_line();
        bencher.bench(|| Handshake::parse(black_box(line.as_bytes())));
    }

    #[divan::bench]
    fn parse_plaintext(bencher: divan::Bencher) {
        let line = "1|1|unix|/tmp/plugin1890126878|grpc|";
        bencher.bench(|| Handshake::parse(black_box(line.as_bytes())));
    }

    #[divan::bench]
    fn encode_with_certificate(bencher: divan::Bencher) {
        let handshake = Handshake::parse(sample_line().as_bytes()).expect("our own line parses");
        bencher.bench(|| black_box(&handshake).to_string());
    }
}

mod tls {
    use super::*;

    /// A P-256 key pair and self-signed certificate, as each side makes per launch.
    #[divan::bench(sample_count = 50)]
    fn identity_generate() -> Identity {
        Identity::generate().expect("generating a certificate works")
    }

    /// The PEM the host puts in `PLUGIN_CLIENT_CERT`.
    #[divan::bench]
    fn cert_pem(bencher: divan::Bencher) {
        let identity = Identity::generate().expect("generating a certificate works");
        bencher.bench(|| black_box(&identity).cert_pem());
    }
}
