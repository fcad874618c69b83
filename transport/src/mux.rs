//! go-plugin's multiplexed broker transport (go-plugin ≥ 1.6, `PLUGIN_MULTIPLEX_GRPC`): one raw
//! connection between host and plugin carries a yamux session, and every gRPC connection —
//! the main one and each brokered one, in both directions — is a yamux stream over it (TLS per
//! stream when AutoMTLS is on).
//!
//! The host is the yamux client, the plugin the yamux server. Which service an inbound stream
//! belongs to is agreed beforehand on `plugin.GRPCBroker/StartStream`: the dialling side sends
//! a *knock* (`ConnInfo{service_id, knock{knock: true}}`), the serving side remembers that the
//! next stream it accepts is for that id and answers `{knock, ack, error}`; only then does the
//! dialler open its stream. Diallers knock and open one at a time, so accepted streams are
//! routed in knock order; a stream that arrives without a knock goes to the main gRPC server
//! (plugin side), as in go-plugin.
//!
//! The yamux implementation is `tokio-yamux`, a port of `hashicorp/yamux` with its defaults
//! (256 KiB stream windows, keepalive ping every 30 s, 10 s write timeout).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};
use tokio_stream::StreamExt as _;
use tokio_yamux::{Config, Control, Session};

use crate::accept::{self, AcceptOptions, Incoming, Listener, StreamListener};
use crate::conn::Io;
use crate::internal::lock;
use crate::repeated::{Admit, AndMore, DEFAULT_REPEATED_WARNING_INTERVAL, RepeatedWarning};

/// Opens one byte stream for a gRPC connection (a yamux stream, after a knock when it is a
/// brokered one). Called again whenever the channel reconnects.
pub type StreamOpener =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = io::Result<Box<dyn Io>>> + Send>> + Send + Sync>;

/// How the broker of a connection works: go-plugin's default mode (a socket per brokered
/// connection) or its multiplexed mode (everything over one socket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BrokerMode {
    /// One listening socket per served broker id; the main connection is its own socket.
    Default,
    /// One socket carrying yamux: the main connection and every brokered one are streams.
    Multiplexed,
}

impl fmt::Display for BrokerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Default => "default",
            Self::Multiplexed => "multiplexed",
        })
    }
}

type StreamSender = mpsc::UnboundedSender<Box<dyn Io>>;

/// One yamux session between a host and a plugin, and the routing of the streams the peer
/// opens. Cheap to clone; all clones are one session.
///
/// The host makes one with [`Mux::client`] over its single connection to the plugin; a plugin
/// with [`Mux::serve_first_connection`] over its listener. [`GrpcBroker`](crate::GrpcBroker)
/// uses it when [`BrokerSetup::mux`](crate::BrokerSetup::mux) is set.
#[derive(Clone)]
pub struct Mux {
    inner: Arc<Inner>,
}

struct Inner {
    /// Opens streams; `None` until the session exists, and again once it has ended.
    control: watch::Sender<Option<Control>>,
    /// Served broker ids and where their streams go.
    routes: Mutex<HashMap<u32, StreamSender>>,
    /// Acknowledged knocks whose streams have not arrived yet, oldest first.
    knocked: Mutex<VecDeque<u32>>,
    /// Where streams without a knock go (the plugin's main gRPC server).
    default: Mutex<Option<StreamSender>>,
    /// Knock-and-open is one step per dialling side (the peer routes streams in knock order).
    dial_lock: tokio::sync::Mutex<()>,
    /// Set when the session has ended or was closed.
    ended: watch::Sender<bool>,
    /// Streams the peer opened without knocking, logged at most once per interval.
    unknocked: RepeatedWarning,
}

impl fmt::Debug for Mux {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mux")
            .field("started", &self.inner.control.borrow().is_some())
            .field("ended", &*self.inner.ended.borrow())
            .finish_non_exhaustive()
    }
}

impl Default for Mux {
    fn default() -> Self {
        Self::new()
    }
}

impl Mux {
    /// A session that starts once its connection arrives: the plugin side's, for
    /// [`serve_first_connection`](Self::serve_first_connection). (The host side uses
    /// [`client`](Self::client).)
    #[must_use]
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                control: watch::channel(None).0,
                routes: Mutex::new(HashMap::new()),
                knocked: Mutex::new(VecDeque::new()),
                default: Mutex::new(None),
                dial_lock: tokio::sync::Mutex::new(()),
                ended: watch::channel(false).0,
                unknocked: RepeatedWarning::new(
                    "the peer opened a stream without knocking; closed",
                    "the peer",
                    DEFAULT_REPEATED_WARNING_INTERVAL,
                ),
            }),
        }
    }

    /// Host side: a yamux client session over `io`, the one connection to the plugin.
    /// Must run inside a tokio runtime.
    #[must_use]
    pub fn client<T>(io: T) -> Self
    where
        T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let mux = Self::new();
        mux.start(Session::new_client(io, Config::default()));
        mux
    }

    /// Plugin side: accepts the first connection on `listener` as the yamux session (later
    /// connections are not accepted: the listener is closed) and returns the main gRPC
    /// server's connections — the streams the host opens without knocking — with TLS
    /// handshakes as `options` say. Must run inside a tokio runtime.
    #[must_use]
    pub fn serve_first_connection(&self, listener: Listener, options: AcceptOptions) -> Incoming {
        let (tx, rx) = mpsc::unbounded_channel();
        *lock(&self.inner.default) = Some(tx);
        let mux = self.clone();
        let mut ended = self.inner.ended.subscribe();
        tokio::spawn(async move {
            let accepted = tokio::select! {
                accepted = listener.accept_raw() => accepted,
                _ = ended.wait_for(|e| *e) => return,
            };
            match accepted {
                Ok(Some(io)) => {
                    drop(listener);
                    mux.start(Session::new_server(io, Config::default()));
                }
                Ok(None) => end(&mux.inner),
                Err(error) => {
                    tracing::warn!(%error, "accepting the host's multiplexed connection failed");
                    end(&mux.inner);
                }
            }
        });
        accept::accept(Listener::Streams(StreamListener::new(rx)), options)
    }

    fn start<T>(&self, session: Session<T>)
    where
        T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        self.inner.control.send_replace(Some(session.control()));
        tokio::spawn(drive(Arc::clone(&self.inner), session));
    }

    /// Opens a yamux stream (no knock: the main connection on the host side).
    ///
    /// # Errors
    /// When the session has ended.
    pub async fn open(&self) -> io::Result<Box<dyn Io>> {
        open(&self.inner).await
    }

    /// A [`StreamOpener`] for the main connection (host side): each call opens a stream.
    #[must_use]
    pub fn opener(&self) -> StreamOpener {
        let inner = Arc::downgrade(&self.inner);
        Arc::new(move || {
            let inner = inner.clone();
            Box::pin(async move {
                let inner = inner.upgrade().ok_or_else(ended)?;
                open(&inner).await
            })
        })
    }

    /// Serializes knock-and-open on this side (held by the caller for one dial).
    pub(crate) async fn dial_lock(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.inner.dial_lock.lock().await
    }

    /// Registers `id` as served: streams knocked for it go to the returned listener until the
    /// [`Route`] is dropped.
    pub(crate) fn route(&self, id: u32) -> (Route, Listener) {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.inner.routes).insert(id, tx);
        (
            Route {
                mux: Arc::downgrade(&self.inner),
                id,
            },
            Listener::Streams(StreamListener::new(rx)),
        )
    }

    /// Whether `id` is served.
    pub(crate) fn is_routed(&self, id: u32) -> bool {
        lock(&self.inner.routes).contains_key(&id)
    }

    /// The next stream the peer opens is for `id` (its knock is about to be acknowledged).
    pub(crate) fn expect(&self, id: u32) {
        lock(&self.inner.knocked).push_back(id);
    }

    /// Ends the session: the connection is closed, every stream and route ends.
    pub fn close(&self) {
        end(&self.inner);
    }

    /// Whether the session has ended (closed, or the peer went away).
    #[must_use]
    pub fn is_ended(&self) -> bool {
        *self.inner.ended.borrow()
    }
}

fn ended() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        "the multiplexed connection has ended",
    )
}

async fn open(inner: &Inner) -> io::Result<Box<dyn Io>> {
    let mut control = inner.control.subscribe();
    let mut control = {
        let mut ended_rx = inner.ended.subscribe();
        tokio::select! {
            c = control.wait_for(Option::is_some) => c.map_err(|_| ended())?.clone().ok_or_else(ended)?,
            _ = ended_rx.wait_for(|e| *e) => return Err(ended()),
        }
    };
    let stream = control
        .open_stream()
        .await
        .map_err(|e| io::Error::new(io::ErrorKind::ConnectionAborted, format!("{e:?}")))?;
    Ok(Box::new(stream))
}

fn end(inner: &Inner) {
    inner.ended.send_replace(true);
    inner.control.send_replace(None);
    lock(&inner.routes).clear();
    lock(&inner.default).take();
    lock(&inner.knocked).clear();
}

/// Polls the session (which moves all its streams' data) and routes inbound streams, until
/// the session ends or is closed; then drops the connection.
async fn drive<T>(inner: Arc<Inner>, mut session: Session<T>)
where
    T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let mut ended = inner.ended.subscribe();
    loop {
        let next = tokio::select! {
            _ = ended.wait_for(|e| *e) => break,
            next = session.next() => next,
        };
        match next {
            Some(Ok(stream)) => deliver(&inner, Box::new(stream)),
            Some(Err(error)) => {
                tracing::debug!(%error, "the multiplexed connection failed");
                break;
            }
            None => {
                tracing::debug!("the multiplexed connection ended");
                break;
            }
        }
    }
    end(&inner);
}

/// Routes a stream the peer opened: to the id of the oldest acknowledged knock, else to the
/// main server.
fn deliver(inner: &Inner, stream: Box<dyn Io>) {
    let knocked = lock(&inner.knocked).pop_front();
    let sent = match knocked {
        Some(id) => match lock(&inner.routes).get(&id) {
            Some(tx) => tx.send(stream).is_ok(),
            None => {
                tracing::debug!(id, "a stream arrived for a broker id no longer served");
                false
            }
        },
        None => match &*lock(&inner.default) {
            Some(tx) => tx.send(stream).is_ok(),
            None => {
                if let Admit::Log { held } = inner.unknocked.admit(std::time::Instant::now()) {
                    tracing::warn!("{}{}", inner.unknocked.what(), AndMore(held));
                }
                false
            }
        },
    };
    if !sent {
        tracing::debug!(?knocked, "an inbound multiplexed stream was dropped");
    }
}

/// A served broker id on a [`Mux`]; dropping it stops routing streams to it.
pub(crate) struct Route {
    mux: Weak<Inner>,
    id: u32,
}

impl Drop for Route {
    fn drop(&mut self) {
        if let Some(inner) = self.mux.upgrade() {
            lock(&inner.routes).remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    #[tokio::test]
    async fn streams_without_a_knock_reach_the_main_server_and_knocked_ones_their_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.sock");
        let listener = Listener::Unix(tokio::net::UnixListener::bind(&path).unwrap());
        let server = Mux::new();
        let mut main = server.serve_first_connection(listener, AcceptOptions::new(None));
        let (_route, served) = server.route(7);

        let client = Mux::client(tokio::net::UnixStream::connect(&path).await.unwrap());
        let mut first = client.open().await.unwrap();
        first.write_all(b"main").await.unwrap();
        let mut conn = main.next().await.unwrap().unwrap();
        let mut buf = [0; 4];
        conn.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"main");

        server.expect(7);
        let mut second = client.open().await.unwrap();
        second.write_all(b"id 7").await.unwrap();
        let Listener::Streams(served) = served else {
            panic!("not a stream listener")
        };
        let mut routed = served.accept().await.unwrap();
        routed.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"id 7");

        // Closing one side ends the other: its routes end too.
        client.close();
        let mut ended = server.inner.ended.subscribe();
        ended.wait_for(|e| *e).await.unwrap();
        assert!(served.accept().await.is_none());
    }
}
