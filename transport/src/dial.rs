//! Connecting: a tonic channel over a unix socket or loopback TCP, with pinned mutual TLS when
//! a client configuration is given, driven by tether's own connector.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tether_proto::tls;
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::ClientConfig;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::conn::{Io, Target};
use crate::mux::StreamOpener;

/// Boxed error source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Says whether the peer may still be connected to; checked before every (re)connection.
pub type Alive = Arc<dyn Fn() -> bool + Send + Sync>;

/// Why the connector could not open a connection.
#[derive(Debug, thiserror::Error)]
enum ConnectFailure {
    #[error("{0}")]
    Io(#[source] io::Error),
    #[error("TLS handshake failed: {0}")]
    Tls(#[source] io::Error),
    #[error("the peer has exited")]
    Exited,
}

/// Opens one raw connection (no TLS) to `target`; TCP sockets get `TCP_NODELAY`.
///
/// # Errors
/// The error of `connect`.
pub async fn connect_raw(target: &Target) -> io::Result<Box<dyn Io>> {
    Ok(match target {
        Target::Unix(path) => Box::new(UnixStream::connect(path).await?),
        Target::Tcp(addr) => {
            let raw = TcpStream::connect(addr).await?;
            // Small gRPC frames must not wait for Nagle's algorithm.
            raw.set_nodelay(true)?;
            Box::new(raw)
        }
        Target::TcpVia(addr, sockets) => {
            let socket = std::net::TcpStream::from(sockets.make(addr.is_ipv6())?);
            socket.set_nonblocking(true)?;
            let raw = tokio::net::TcpSocket::from_std_stream(socket)
                .connect(*addr)
                .await?;
            raw.set_nodelay(true)?;
            Box::new(raw)
        }
    })
}

/// Opens one connection with `open`, with TLS when `tls` is set.
async fn open(
    open: &StreamOpener,
    tls: Option<&TlsConnector>,
    alive: &(dyn Fn() -> bool + Send + Sync),
) -> Result<TokioIo<Box<dyn Io>>, ConnectFailure> {
    if !alive() {
        return Err(ConnectFailure::Exited);
    }
    let raw = open().await.map_err(ConnectFailure::Io)?;
    let stream: Box<dyn Io> = match tls {
        None => raw,
        Some(tls) => Box::new(
            tls.connect(tls::server_name(), raw)
                .await
                .map_err(ConnectFailure::Tls)?,
        ),
    };
    Ok(TokioIo::new(stream))
}

/// Why a connection to the peer (the main one or a brokered one) could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The connection could not be opened.
    #[error("cannot connect: {0}")]
    Io(#[source] BoxError),
    /// The TLS handshake failed (usually: the peer presented another certificate).
    #[error("the TLS handshake failed: {0}")]
    Tls(#[source] io::Error),
    /// The peer exited.
    #[error("the peer has exited")]
    Exited,
    /// It took longer than the timeout.
    #[error("connecting took longer than {0:?}")]
    Timeout(Duration),
}

/// Connects to `target` now (so failures surface at once), with TLS when `tls` is set; the
/// returned channel reconnects the same way while `alive()` says the peer runs.
///
/// # Errors
/// A [`ConnectError`].
pub async fn connect(
    target: Target,
    tls: Option<Arc<ClientConfig>>,
    alive: Alive,
    timeout: Duration,
) -> Result<Channel, ConnectError> {
    let target = Arc::new(target);
    let opener: StreamOpener = Arc::new(move || {
        let target = Arc::clone(&target);
        Box::pin(async move { connect_raw(&target).await })
    });
    connect_streams(opener, tls, alive, timeout).await
}

/// Like [`connect`], over the byte streams `opener` makes (e.g. yamux streams of a
/// multiplexed connection): connects now, and reconnects with a new stream while `alive()`.
///
/// # Errors
/// A [`ConnectError`].
pub async fn connect_streams(
    opener: StreamOpener,
    tls: Option<Arc<ClientConfig>>,
    alive: Alive,
    timeout: Duration,
) -> Result<Channel, ConnectError> {
    let tls = tls.map(TlsConnector::from);
    let connector = tower::service_fn(move |_: Uri| {
        let (opener, tls, alive) = (Arc::clone(&opener), tls.clone(), Arc::clone(&alive));
        async move { open(&opener, tls.as_ref(), &*alive).await }
    });
    // The URI only fills the HTTP/2 `:authority`; the connector decides where to connect.
    let endpoint = Endpoint::from_static("http://localhost");
    match tokio::time::timeout(timeout, endpoint.connect_with_connector(connector)).await {
        Err(_) => Err(ConnectError::Timeout(timeout)),
        Ok(Ok(channel)) => Ok(channel),
        Ok(Err(e)) => Err(classify(e.into())),
    }
}

/// Finds the connector's own failure in a transport error's source chain.
fn classify(error: BoxError) -> ConnectError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&*error);
    while let Some(e) = source {
        if let Some(failure) = e.downcast_ref::<ConnectFailure>() {
            return match failure {
                ConnectFailure::Tls(e) => {
                    ConnectError::Tls(io::Error::new(e.kind(), e.to_string()))
                }
                ConnectFailure::Exited => ConnectError::Exited,
                ConnectFailure::Io(e) => {
                    ConnectError::Io(Box::new(io::Error::new(e.kind(), e.to_string())))
                }
            };
        }
        source = e.source();
    }
    ConnectError::Io(error)
}

#[cfg(test)]
mod tests {
    use tether_proto::tls::Identity;
    use tokio::net::{TcpListener, UnixListener};
    use tokio_rustls::TlsAcceptor;
    use tonic_health::ServingStatus;
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;

    use super::*;
    use crate::accept::{AcceptOptions, Listener, accept};

    /// Serves the health service (SERVING for "plugin") on `listener`.
    async fn serve_health(listener: Listener, tls: Option<TlsAcceptor>) {
        let (reporter, service) = tonic_health::server::health_reporter();
        reporter
            .set_service_status(tether_proto::HEALTH_SERVICE, ServingStatus::Serving)
            .await;
        let incoming = accept(listener, AcceptOptions::new(tls));
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming),
        );
    }

    async fn check(channel: Channel) {
        let response = HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: tether_proto::HEALTH_SERVICE.into(),
            })
            .await
            .unwrap();
        assert_eq!(response.into_inner().status, ServingStatus::Serving as i32);
    }

    fn alive() -> Alive {
        Arc::new(|| true)
    }

    fn tls_pair(client: &Identity, server: &Identity) -> (Arc<ClientConfig>, TlsAcceptor) {
        let c = tls::client_config(client, server.cert_der().clone()).unwrap();
        let s = tls::server_config(server, client.cert_der().clone()).unwrap();
        (Arc::new(c), TlsAcceptor::from(Arc::new(s)))
    }

    const TIMEOUT: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn mutual_tls_over_a_unix_socket_reaches_the_health_service() {
        let (host, plugin) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        let (client, acceptor) = tls_pair(&host, &plugin);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.sock");
        serve_health(
            Listener::Unix(UnixListener::bind(&path).unwrap()),
            Some(acceptor),
        )
        .await;
        let channel = connect(Target::Unix(path), Some(client), alive(), TIMEOUT)
            .await
            .unwrap();
        check(channel).await;
    }

    #[tokio::test]
    async fn mutual_tls_over_loopback_tcp_reaches_the_health_service() {
        let (host, plugin) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        let (client, acceptor) = tls_pair(&host, &plugin);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        serve_health(Listener::Tcp(listener), Some(acceptor)).await;
        let channel = connect(Target::Tcp(addr), Some(client), alive(), TIMEOUT)
            .await
            .unwrap();
        check(channel).await;
    }

    #[tokio::test]
    async fn plaintext_over_a_unix_socket_reaches_the_health_service() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.sock");
        serve_health(Listener::Unix(UnixListener::bind(&path).unwrap()), None).await;
        let channel = connect(Target::Unix(path), None, alive(), TIMEOUT)
            .await
            .unwrap();
        check(channel).await;
    }

    #[tokio::test]
    async fn a_server_presenting_another_certificate_fails_as_a_tls_error() {
        let (host, plugin) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        let impostor = Identity::generate().unwrap();
        let (_, acceptor) = tls_pair(&host, &impostor);
        let (client, _) = tls_pair(&host, &plugin);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.sock");
        serve_health(
            Listener::Unix(UnixListener::bind(&path).unwrap()),
            Some(acceptor),
        )
        .await;
        let err = connect(Target::Unix(path), Some(client), alive(), TIMEOUT)
            .await
            .unwrap_err();
        assert!(matches!(err, ConnectError::Tls(_)), "{err:?}");
    }

    #[tokio::test]
    async fn no_connection_is_opened_once_the_peer_has_exited() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.sock");
        serve_health(Listener::Unix(UnixListener::bind(&path).unwrap()), None).await;
        let err = connect(Target::Unix(path), None, Arc::new(|| false), TIMEOUT)
            .await
            .unwrap_err();
        assert!(matches!(err, ConnectError::Exited), "{err:?}");
    }
}
