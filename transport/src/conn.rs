//! The byte streams tether speaks gRPC over, and the addresses it connects to.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::yielding::ReadsYield;

/// An address a side agreed to connect to, after its own policy checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A unix socket.
    Unix(PathBuf),
    /// A (loopback) TCP address.
    Tcp(SocketAddr),
    /// A (loopback) TCP address in another network namespace: the peer's own, reached with
    /// sockets made there (e.g. by a helper process inside it).
    TcpVia(SocketAddr, Sockets),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unix(path) => write!(f, "unix:{}", path.display()),
            Self::Tcp(addr) | Self::TcpVia(addr, _) => write!(f, "tcp:{addr}"),
        }
    }
}

/// Where [`Target::TcpVia`] gets its sockets: a function making one unconnected TCP socket
/// (`SOCK_STREAM`) in the right network namespace, IPv6 when asked.
#[derive(Clone)]
pub struct Sockets(std::sync::Arc<dyn Fn(bool) -> io::Result<std::os::fd::OwnedFd> + Send + Sync>);

impl Sockets {
    /// Sockets made by `make` (its argument: whether IPv6).
    pub fn new(
        make: impl Fn(bool) -> io::Result<std::os::fd::OwnedFd> + Send + Sync + 'static,
    ) -> Self {
        Self(std::sync::Arc::new(make))
    }

    /// One new socket, IPv6 when `v6`.
    ///
    /// # Errors
    /// The maker's.
    pub fn make(&self, v6: bool) -> io::Result<std::os::fd::OwnedFd> {
        (self.0)(v6)
    }
}

impl fmt::Debug for Sockets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sockets")
    }
}

impl PartialEq for Sockets {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Sockets {}

/// A byte stream gRPC can run over: a unix or TCP stream, possibly wrapped in TLS.
pub trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

/// One accepted connection, ready for tonic's `serve_with_incoming` (TLS already established
/// when it is on).
pub struct Conn {
    io: ReadsYield<Box<dyn Io>>,
    cut: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// Whether `cut` has completed.
    is_cut: bool,
}

impl Conn {
    /// Wraps a stream.
    pub fn new(stream: impl Io) -> Self {
        Self::from_box(Box::new(stream))
    }

    pub(crate) fn from_box(stream: Box<dyn Io>) -> Self {
        Self {
            io: ReadsYield::new(stream),
            cut: None,
            is_cut: false,
        }
    }

    /// Cuts the connection once `cut` completes: from then on every read and write fails with
    /// `ConnectionAborted`, so the HTTP/2 connection ends and its peer sees its calls fail.
    ///
    /// tonic serves each connection in a task of its own, which outlives the server future:
    /// dropping that future does not end connections still open. This does.
    #[must_use]
    pub fn cut_when(mut self, cut: impl Future<Output = ()> + Send + 'static) -> Self {
        self.cut = Some(Box::pin(cut));
        self
    }

    /// Read side: polls the cut (registering for its wake-up) and `Some(error)` once it has
    /// happened. Only reads poll it: an HTTP/2 connection always has a read pending, so the
    /// cut is seen there without taking the cut's wake-up lock on every write.
    fn poll_cut(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        if let Some(cut) = self.cut.as_mut() {
            if cut.as_mut().poll(cx).is_pending() {
                return None;
            }
            self.cut = None;
            self.is_cut = true;
        }
        self.cut_error()
    }

    /// Write side: `Some(error)` once a read has seen the cut.
    fn cut_error(&self) -> Option<io::Error> {
        self.is_cut.then(|| {
            io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the server stopped; connection cut",
            )
        })
    }
}

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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
        if let Some(error) = self.poll_cut(cx) {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(error) = self.cut_error() {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(error) = self.cut_error() {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Some(error) = self.cut_error() {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}
