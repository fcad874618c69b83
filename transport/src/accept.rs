//! Accepting connections: an accept loop that runs TLS handshakes concurrently, each bounded
//! by a timeout, and hands ready connections to tonic.

use std::convert::Infallible;
use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{Mutex, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::conn::{Conn, Io};
use crate::repeated::{Admit, AndMore, DEFAULT_REPEATED_WARNING_INTERVAL, RepeatedWarning};

/// How long one connection's TLS handshake may take before it is dropped.
///
/// Handshakes run concurrently, so a stuck client only costs its own connection; the limit
/// bounds how long such a connection holds resources.
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the accept loop pauses after `accept` fails (e.g. out of file descriptors) before
/// trying again, so a persistent error does not spin a core.
pub const DEFAULT_ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// A listening socket.
#[derive(Debug)]
#[non_exhaustive]
pub enum Listener {
    /// A unix domain socket.
    Unix(UnixListener),
    /// A TCP socket; accepted connections get `TCP_NODELAY`.
    Tcp(TcpListener),
    /// Streams of a multiplexed connection routed to one served broker id (or to the main
    /// server); made by [`Mux`](crate::Mux).
    Streams(StreamListener),
}

impl Listener {
    /// The next connection; `Ok(None)` when no more can come (a stream listener whose
    /// session ended).
    pub(crate) async fn accept_raw(&self) -> io::Result<Option<Box<dyn Io>>> {
        match self {
            Self::Unix(listener) => {
                let (stream, _) = listener.accept().await?;
                Ok(Some(Box::new(stream)))
            }
            Self::Tcp(listener) => {
                let (stream, _) = listener.accept().await?;
                // Without it, small gRPC frames wait for delayed ACKs (~40 ms per call).
                stream.set_nodelay(true)?;
                Ok(Some(Box::new(stream)))
            }
            Self::Streams(streams) => Ok(streams.accept().await),
        }
    }
}

/// The streams of a multiplexed connection routed to one served id (or the main server), as
/// a [`Listener`]; made by [`Mux`](crate::Mux).
pub struct StreamListener(Mutex<mpsc::UnboundedReceiver<Box<dyn Io>>>);

impl StreamListener {
    pub(crate) fn new(rx: mpsc::UnboundedReceiver<Box<dyn Io>>) -> Self {
        Self(Mutex::new(rx))
    }

    /// The next stream; `None` once no more can come.
    pub(crate) async fn accept(&self) -> Option<Box<dyn Io>> {
        self.0.lock().await.recv().await
    }
}

impl fmt::Debug for StreamListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamListener").finish_non_exhaustive()
    }
}

/// Settings of the accept loop.
#[derive(Clone)]
pub struct AcceptOptions {
    /// TLS acceptor when AutoMTLS is on; `None` serves plaintext.
    pub tls: Option<TlsAcceptor>,
    /// See [`DEFAULT_TLS_HANDSHAKE_TIMEOUT`].
    pub tls_handshake_timeout: Duration,
    /// See [`DEFAULT_ACCEPT_ERROR_BACKOFF`].
    pub error_backoff: Duration,
}

impl AcceptOptions {
    /// Options with the default timeouts, TLS when `tls` is set.
    #[must_use]
    pub fn new(tls: Option<TlsAcceptor>) -> Self {
        Self {
            tls,
            tls_handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            error_backoff: DEFAULT_ACCEPT_ERROR_BACKOFF,
        }
    }
}

impl fmt::Debug for AcceptOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcceptOptions")
            .field("tls", &self.tls.is_some())
            .field("tls_handshake_timeout", &self.tls_handshake_timeout)
            .field("error_backoff", &self.error_backoff)
            .finish()
    }
}

/// The connections tonic serves: ready to speak HTTP/2 (TLS already established, if on).
pub type Incoming = UnboundedReceiverStream<Result<Conn, Infallible>>;

/// Spawns the accept loop and returns the stream of ready connections. The loop (and the
/// listening socket) ends when the stream is dropped, which tonic does as soon as it stops
/// accepting. Must run inside a tokio runtime.
#[must_use]
pub fn accept(listener: Listener, options: AcceptOptions) -> Incoming {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(accept_loop(listener, options, tx));
    UnboundedReceiverStream::new(rx)
}

async fn accept_loop(
    listener: Listener,
    options: AcceptOptions,
    tx: mpsc::UnboundedSender<Result<Conn, Infallible>>,
) {
    // A client can fail its handshake once per connection it opens.
    let failed = Arc::new(RepeatedWarning::new(
        "TLS handshake failed or timed out; connection dropped",
        "a client",
        DEFAULT_REPEATED_WARNING_INTERVAL,
    ));
    loop {
        let accepted = tokio::select! {
            () = tx.closed() => return,
            accepted = listener.accept_raw() => accepted,
        };
        let stream = match accepted {
            Ok(Some(stream)) => stream,
            Ok(None) => return,
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
                if tx.send(Ok(Conn::from_box(stream))).is_err() {
                    return;
                }
            }
            // Handshakes run in their own tasks so that a slow or failing client never holds
            // up the next connection.
            Some(acceptor) => {
                let handshake = acceptor.accept(stream);
                let timeout = options.tls_handshake_timeout;
                let (tx, failed) = (tx.clone(), Arc::clone(&failed));
                tokio::spawn(async move {
                    let error = match tokio::time::timeout(timeout, handshake).await {
                        Ok(Ok(tls)) => {
                            // Fails only when the server stopped meanwhile; the connection is
                            // then simply dropped.
                            let _ = tx.send(Ok(Conn::new(tls)));
                            return;
                        }
                        Ok(Err(error)) => error.to_string(),
                        Err(_) => format!("no handshake within {timeout:?}"),
                    };
                    if let Admit::Log { held } = failed.admit(std::time::Instant::now()) {
                        tracing::warn!(%error, "{}{}", failed.what(), AndMore(held));
                    }
                });
            }
        }
    }
}
