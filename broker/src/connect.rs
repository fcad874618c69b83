//! From the announced address to a gRPC channel: the address policy, the transport (unix
//! socket or loopback TCP) and TLS, driven by the host's own connector.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tether_proto::handshake::Address;
use tether_proto::tls;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::ClientConfig;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::error::{AddressProblem, BoxError};

/// An address the host agreed to connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// A unix socket inside the private directory.
    Unix(PathBuf),
    /// A loopback TCP address.
    Tcp(SocketAddr),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unix(path) => write!(f, "unix:{}", path.display()),
            Self::Tcp(addr) => write!(f, "tcp:{addr}"),
        }
    }
}

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

/// Why the connector could not open a connection.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectFailure {
    /// Opening the socket failed.
    #[error("{0}")]
    Io(#[source] io::Error),
    /// The TLS handshake failed.
    #[error("TLS handshake failed: {0}")]
    Tls(#[source] io::Error),
    /// The plugin has exited; there is nothing to connect to.
    #[error("the plugin has exited")]
    Exited,
}

/// A byte stream to the plugin, plain or TLS, over a unix socket or TCP.
trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// Opens one connection to `target`, with TLS when `tls` is set.
async fn open(
    target: &Target,
    tls: Option<&TlsConnector>,
    running: &(dyn Fn() -> bool + Send + Sync),
) -> Result<TokioIo<Box<dyn Stream>>, ConnectFailure> {
    if !running() {
        return Err(ConnectFailure::Exited);
    }
    let stream: Box<dyn Stream> = match (target, tls) {
        (Target::Unix(path), None) => Box::new(
            UnixStream::connect(path)
                .await
                .map_err(ConnectFailure::Io)?,
        ),
        (Target::Unix(path), Some(tls)) => {
            let raw = UnixStream::connect(path)
                .await
                .map_err(ConnectFailure::Io)?;
            Box::new(
                tls.connect(tls::server_name(), raw)
                    .await
                    .map_err(ConnectFailure::Tls)?,
            )
        }
        (Target::Tcp(addr), tls) => {
            let raw = TcpStream::connect(addr).await.map_err(ConnectFailure::Io)?;
            // Small gRPC frames must not wait for Nagle's algorithm.
            raw.set_nodelay(true).map_err(ConnectFailure::Io)?;
            match tls {
                None => Box::new(raw),
                Some(tls) => Box::new(
                    tls.connect(tls::server_name(), raw)
                        .await
                        .map_err(ConnectFailure::Tls)?,
                ),
            }
        }
    };
    Ok(TokioIo::new(stream))
}

/// How [`connect`] failed.
#[derive(Debug)]
pub(crate) enum ConnectError {
    /// The connection could not be opened.
    Io(BoxError),
    /// The TLS handshake failed.
    Tls(io::Error),
    /// The plugin exited.
    Exited,
    /// It took longer than the timeout.
    Timeout,
}

/// Connects to `target` now (so failures surface at start), with TLS when `tls` is set; the
/// returned channel reconnects the same way while `running()` says the plugin runs.
pub(crate) async fn connect(
    target: Target,
    tls: Option<Arc<ClientConfig>>,
    running: Arc<dyn Fn() -> bool + Send + Sync>,
    timeout: Duration,
) -> Result<Channel, ConnectError> {
    let tls = tls.map(TlsConnector::from);
    let target = Arc::new(target);
    let connector = tower::service_fn(move |_: Uri| {
        let (target, tls, running) = (Arc::clone(&target), tls.clone(), Arc::clone(&running));
        async move { open(&target, tls.as_ref(), &*running).await }
    });
    // The URI only fills the HTTP/2 `:authority`; the connector decides where to connect.
    let endpoint = Endpoint::from_static("http://localhost");
    match tokio::time::timeout(timeout, endpoint.connect_with_connector(connector)).await {
        Err(_) => Err(ConnectError::Timeout),
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
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tether_proto::tls::Identity;
    use tokio::io::ReadBuf;
    use tokio::net::{TcpListener, UnixListener};
    use tokio_rustls::TlsAcceptor;
    use tonic_health::ServingStatus;

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

    /// A served stream, for `serve_with_incoming`.
    struct Served<T>(T);

    impl<T: AsyncRead + Unpin> AsyncRead for Served<T> {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_read(cx, buf)
        }
    }

    impl<T: AsyncWrite + Unpin> AsyncWrite for Served<T> {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            Pin::new(&mut self.0).poll_write(cx, buf)
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_flush(cx)
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_shutdown(cx)
        }
    }

    impl<T> tonic::transport::server::Connected for Served<T> {
        type ConnectInfo = ();
        fn connect_info(&self) -> Self::ConnectInfo {}
    }

    enum Listener {
        Tcp(TcpListener),
        Unix(UnixListener),
    }

    impl Listener {
        async fn accept(&self) -> io::Result<Box<dyn Stream>> {
            Ok(match self {
                Self::Tcp(l) => Box::new(l.accept().await?.0),
                Self::Unix(l) => Box::new(l.accept().await?.0),
            })
        }
    }

    /// Serves the health service (SERVING for "plugin") on `listener`, with TLS when
    /// `tls` is set.
    async fn serve_health(listener: Listener, tls: Option<TlsAcceptor>) {
        let (reporter, service) = tonic_health::server::health_reporter();
        reporter
            .set_service_status(tether_proto::HEALTH_SERVICE, ServingStatus::Serving)
            .await;
        let incoming = futures_util::stream::unfold((listener, tls), |(listener, tls)| async {
            let stream = match listener.accept().await {
                Ok(stream) => stream,
                Err(e) => return Some((Err(e), (listener, tls))),
            };
            let served: io::Result<Box<dyn Stream>> = match &tls {
                None => Ok(stream),
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(tls_stream) => Ok(Box::new(tls_stream)),
                    Err(e) => Err(e),
                },
            };
            Some((served.map(Served), (listener, tls)))
        });
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming),
        );
    }

    fn running() -> Arc<dyn Fn() -> bool + Send + Sync> {
        Arc::new(|| true)
    }

    fn tls_pair(host: &Identity, plugin: &Identity) -> (Arc<ClientConfig>, TlsAcceptor) {
        let client = tls::client_config(host, plugin.cert_der().clone()).unwrap();
        let server = tls::server_config(plugin, host.cert_der().clone()).unwrap();
        (Arc::new(client), TlsAcceptor::from(Arc::new(server)))
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
        let channel = connect(Target::Unix(path), Some(client), running(), TIMEOUT)
            .await
            .unwrap();
        crate::health::check(channel, TIMEOUT).await.unwrap();
    }

    #[tokio::test]
    async fn mutual_tls_over_loopback_tcp_reaches_the_health_service() {
        let (host, plugin) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        let (client, acceptor) = tls_pair(&host, &plugin);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        serve_health(Listener::Tcp(listener), Some(acceptor)).await;
        let channel = connect(Target::Tcp(addr), Some(client), running(), TIMEOUT)
            .await
            .unwrap();
        crate::health::check(channel, TIMEOUT).await.unwrap();
    }

    #[tokio::test]
    async fn plaintext_over_a_unix_socket_reaches_the_health_service() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.sock");
        serve_health(Listener::Unix(UnixListener::bind(&path).unwrap()), None).await;
        let channel = connect(Target::Unix(path), None, running(), TIMEOUT)
            .await
            .unwrap();
        crate::health::check(channel, TIMEOUT).await.unwrap();
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
        let err = connect(Target::Unix(path), Some(client), running(), TIMEOUT)
            .await
            .unwrap_err();
        assert!(matches!(err, ConnectError::Tls(_)), "{err:?}");
    }

    #[tokio::test]
    async fn no_connection_is_opened_once_the_plugin_has_exited() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.sock");
        serve_health(Listener::Unix(UnixListener::bind(&path).unwrap()), None).await;
        let err = connect(Target::Unix(path), None, Arc::new(|| false), TIMEOUT)
            .await
            .unwrap_err();
        assert!(matches!(err, ConnectError::Exited), "{err:?}");
    }
}
