//! Misbehaving plugin: announces one certificate in its handshake but presents another one
//! over TLS (as a plugin whose key was swapped, or a process impersonating it, would). The
//! host's pinned verifier must refuse the connection.

use std::sync::Arc;

use tether_proto::handshake::{Address, CORE_PROTOCOL_VERSION, Handshake, Protocol};
use tether_proto::{env, tls};
use tether_tests::misbehave::{print_line, socket_path};
use tokio::net::UnixListener;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let host_pem = std::env::var(env::CLIENT_CERT).expect("the host sets PLUGIN_CLIENT_CERT");
    let host_cert = tls::parse_cert_pem(&host_pem).expect("the host's certificate is valid PEM");
    let presented = tls::Identity::generate().expect("certificate generation works");
    let announced = tls::Identity::generate().expect("certificate generation works");
    let config = tls::server_config(&presented, host_cert).expect("valid TLS configuration");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));

    let path = socket_path();
    let listener = UnixListener::bind(&path).expect("the socket directory is writable");
    print_line(
        &Handshake {
            core_version: CORE_PROTOCOL_VERSION,
            app_version: 1,
            address: Address::Unix(path),
            protocol: Protocol::Grpc,
            server_cert: Some(announced.cert_der().to_vec()),
            multiplex: None,
        }
        .to_string(),
    );
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        match acceptor.accept(stream).await {
            Ok(_) => eprintln!("wrong-certificate: a client accepted the wrong certificate"),
            Err(e) => eprintln!("wrong-certificate: TLS handshake failed as expected: {e}"),
        }
    }
}
