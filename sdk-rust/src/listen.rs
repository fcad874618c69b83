//! The socket the host connects to: binding it, accepting connections (with concurrent TLS
//! handshakes when AutoMTLS is on) and removing it again.

use std::convert::Infallible;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tempfile::{TempDir, TempPath};
use tether_proto::handshake::Address;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::env::{Launch, PortRange};
use crate::error::Error;
use crate::settings::Transport;

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

/// A listening socket.
#[derive(Debug)]
pub(crate) enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

/// Binds the listener the handshake will announce. Must run inside a tokio runtime.
pub(crate) fn bind(transport: Transport, launch: &Launch) -> Result<Bound, Error> {
    match transport {
        Transport::Unix => match &launch.socket_dir {
            Some(dir) => bind_unix_in_host_dir(dir),
            None => bind_unix_in_private_dir(&std::env::temp_dir()),
        },
        Transport::Tcp => bind_tcp(launch.ports),
    }
}

/// The host's directory may be shared with other plugins (go-plugin hosts let users choose
/// it), so the socket gets a fresh random name there.
fn bind_unix_in_host_dir(dir: &Path) -> Result<Bound, Error> {
    let socket = tempfile::Builder::new()
        .prefix("plugin-")
        .suffix(".sock")
        .make_in(dir, |path| UnixListener::bind(path))
        .map_err(|source| Error::BindUnix {
            dir: dir.to_owned(),
            source,
        })?;
    let (listener, path) = socket.into_parts();
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
    let mut last_error = None;
    for port in ports.min..=ports.max {
        let bound = std::net::TcpListener::bind(("127.0.0.1", port))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .and_then(TcpListener::from_std);
        match bound {
            Ok(listener) => {
                let address =
                    Address::Tcp(listener.local_addr().map_err(|source| Error::BindTcp {
                        min: ports.min,
                        max: ports.max,
                        source,
                    })?);
                return Ok(Bound {
                    listener: Listener::Tcp(listener),
                    address,
                    cleanup: Cleanup::Nothing,
                });
            }
            Err(e) => last_error = Some(e),
        }
    }
    Err(Error::BindTcp {
        min: ports.min,
        max: ports.max,
        // The range is never empty (min <= max is checked when parsing), so the loop ran.
        source: last_error.unwrap_or_else(|| io::Error::other("empty port range")),
    })
}

/// Settings of the accept loop.
#[derive(Clone)]
pub(crate) struct AcceptOptions {
    pub(crate) tls: Option<TlsAcceptor>,
    pub(crate) tls_handshake_timeout: Duration,
    pub(crate) error_backoff: Duration,
}

impl std::fmt::Debug for AcceptOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcceptOptions")
            .field("tls", &self.tls.is_some())
            .field("tls_handshake_timeout", &self.tls_handshake_timeout)
            .field("error_backoff", &self.error_backoff)
            .finish()
    }
}

/// The connections tonic serves: ready to speak HTTP/2 (TLS already established, if on).
pub(crate) type Incoming = UnboundedReceiverStream<Result<Conn, Infallible>>;

/// Spawns the accept loop and returns the stream of ready connections. The loop (and the
/// listening socket) ends when the stream is dropped, which tonic does as soon as it stops
/// accepting.
pub(crate) fn accept(listener: Listener, options: AcceptOptions) -> Incoming {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(accept_loop(listener, options, tx));
    UnboundedReceiverStream::new(rx)
}

async fn accept_loop(
    listener: Listener,
    options: AcceptOptions,
    tx: mpsc::UnboundedSender<Result<Conn, Infallible>>,
) {
    loop {
        let accepted = tokio::select! {
            () = tx.closed() => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok(stream) => stream,
            Err(error) => {
                tracing::warn!(%error, "accepting a connection failed");
                tokio::select! {
                    () = tx.closed() => return,
                    () = tokio::time::sleep(options.error_backoff) => continue,
                }
            }
        };
        match &options.tls {
            None => {
                if tx.send(Ok(Conn(stream))).is_err() {
                    return;
                }
            }
            // Handshakes run in their own tasks so that a slow or failing client never holds
            // up the next connection.
            Some(acceptor) => {
                let handshake = acceptor.accept(stream);
                let timeout = options.tls_handshake_timeout;
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(timeout, handshake).await {
                        Ok(Ok(tls)) => {
                            // Fails only when the server stopped meanwhile; the connection is
                            // then simply dropped.
                            let _ = tx.send(Ok(Conn(Box::new(tls))));
                        }
                        Ok(Err(error)) => {
                            tracing::warn!(%error, "TLS handshake failed; connection dropped");
                        }
                        Err(_) => {
                            tracing::warn!(?timeout, "TLS handshake timed out; connection dropped")
                        }
                    }
                });
            }
        }
    }
}

impl Listener {
    async fn accept(&self) -> io::Result<Box<dyn Io>> {
        match self {
            Self::Unix(listener) => {
                let (stream, _) = listener.accept().await?;
                Ok(Box::new(stream))
            }
            Self::Tcp(listener) => {
                let (stream, _) = listener.accept().await?;
                // Without it, small gRPC frames wait for delayed ACKs (~40 ms per call).
                stream.set_nodelay(true)?;
                Ok(Box::new(stream))
            }
        }
    }
}

/// A byte stream tonic can serve: a unix or TCP stream, possibly wrapped in TLS.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

/// One accepted connection, as handed to tonic.
pub(crate) struct Conn(Box<dyn Io>);

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").finish_non_exhaustive()
    }
}

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
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
