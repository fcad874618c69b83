//! go-plugin's `GRPCBroker`, identical on the host and the plugin side, in both of go-plugin's
//! modes.
//!
//! Each side numbers its own ids ([`GrpcBroker::next_id`]); an id travels to the peer inside an
//! app message. In the default mode [`GrpcBroker::accept_and_serve`] opens a new listener,
//! announces it as a `ConnInfo{service_id, network, address}` on the
//! `plugin.GRPCBroker/StartStream` stream and serves gRPC there; the peer's
//! [`GrpcBroker::dial`] waits for that `ConnInfo` and connects. In the multiplexed mode
//! ([`BrokerSetup::mux`]) nothing is announced: the dialler knocks on the stream, the server
//! acknowledges, and the dialler opens a yamux stream that is routed to the id (see [`Mux`]).
//! Brokered connections use the same pinned TLS identities as the main connection; whichever
//! side accepts is the TLS server.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt;
use std::path::PathBuf;
use std::pin::pin;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tempfile::TempPath;
use tether_proto::handshake::Address;
use tether_proto::plugin::ConnInfo;
use tether_proto::plugin::conn_info::Knock;
use tether_proto::plugin::grpc_broker_client::GrpcBrokerClient;
use tether_proto::plugin::grpc_broker_server::{self, GrpcBrokerServer};
use tether_proto::rustls::pki_types::CertificateDer;
use tether_proto::tls::{self, Identity, TlsError};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ClientConfig;
use tokio_stream::{Stream, StreamExt as _};
use tonic::body::Body;
use tonic::codegen::Service;
use tonic::codegen::http::Request;
use tonic::server::NamedService;
use tonic::service::Routes;
use tonic::transport::Channel;

use crate::accept::{self, AcceptOptions, DEFAULT_ACCEPT_ERROR_BACKOFF, Listener};
use crate::conn::Target;
use crate::dial::{self, Alive};
use crate::error::BrokerError;
use crate::internal::lock;
use crate::mux::{BrokerMode, Mux, Route, StreamOpener};

/// How long [`GrpcBroker::dial`] waits for the peer's `ConnInfo` for an id (go-plugin: 5 s),
/// or in the multiplexed mode for the acknowledgement of its knock (go-plugin: 5 s). Override
/// with [`BrokerConfig::dial_timeout`].
pub const DEFAULT_DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a `ConnInfo` that arrived before anyone dialled its id is kept (go-plugin: 5 s);
/// in the multiplexed mode, how long a knock for an id not served yet waits for it. Override
/// with [`BrokerConfig::unclaimed_ttl`].
pub const DEFAULT_UNCLAIMED_TTL: Duration = Duration::from_secs(5);

/// At most this many unclaimed `ConnInfo`s (and, multiplexed, knocks for ids not served) are
/// kept; more are dropped (with a warning), so a peer cannot grow this side's memory by
/// announcing or knocking on ids nobody uses.
pub const MAX_UNCLAIMED: usize = 1024;

/// How long connecting to a brokered address, TLS included, may take. Override with
/// [`BrokerConfig::connect_timeout`].
pub const DEFAULT_BROKER_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// After a served id is stopped, how long its open connections may take to finish their calls
/// before they are cut. Override with [`BrokerConfig::stop_grace`].
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(1);

/// The broker id under which a tether host serves its *host services* (services every plugin
/// of that host can reach without being sent an id): the highest id, which go-plugin's
/// counters (starting at 1) never reach. Its connection info does not expire and may be dialled
/// any number of times. go-plugin hosts do not serve it.
pub const HOST_SERVICES_ID: u32 = u32::MAX;

/// Timeouts and limits of a [`GrpcBroker`].
///
/// ```
/// use std::time::Duration;
/// let config = tether_transport::BrokerConfig::new().dial_timeout(Duration::from_secs(1));
/// assert_eq!(config.dial_timeout_value(), Duration::from_secs(1));
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct BrokerConfig {
    dial_timeout: Duration,
    unclaimed_ttl: Duration,
    connect_timeout: Duration,
    stop_grace: Duration,
    tls_handshake_timeout: Duration,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl BrokerConfig {
    /// The defaults: [`DEFAULT_DIAL_TIMEOUT`], [`DEFAULT_UNCLAIMED_TTL`],
    /// [`DEFAULT_BROKER_CONNECT_TIMEOUT`], [`DEFAULT_STOP_GRACE`] and
    /// [`DEFAULT_TLS_HANDSHAKE_TIMEOUT`](crate::DEFAULT_TLS_HANDSHAKE_TIMEOUT).
    pub fn new() -> Self {
        Self {
            dial_timeout: DEFAULT_DIAL_TIMEOUT,
            unclaimed_ttl: DEFAULT_UNCLAIMED_TTL,
            connect_timeout: DEFAULT_BROKER_CONNECT_TIMEOUT,
            stop_grace: DEFAULT_STOP_GRACE,
            tls_handshake_timeout: accept::DEFAULT_TLS_HANDSHAKE_TIMEOUT,
        }
    }

    /// See [`DEFAULT_DIAL_TIMEOUT`].
    pub fn dial_timeout(mut self, timeout: Duration) -> Self {
        self.dial_timeout = timeout;
        self
    }

    /// The configured dial timeout.
    #[must_use]
    pub fn dial_timeout_value(&self) -> Duration {
        self.dial_timeout
    }

    /// See [`DEFAULT_UNCLAIMED_TTL`].
    pub fn unclaimed_ttl(mut self, ttl: Duration) -> Self {
        self.unclaimed_ttl = ttl;
        self
    }

    /// See [`DEFAULT_BROKER_CONNECT_TIMEOUT`].
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// See [`DEFAULT_STOP_GRACE`].
    pub fn stop_grace(mut self, grace: Duration) -> Self {
        self.stop_grace = grace;
        self
    }

    /// See [`DEFAULT_TLS_HANDSHAKE_TIMEOUT`](crate::DEFAULT_TLS_HANDSHAKE_TIMEOUT).
    pub fn tls_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.tls_handshake_timeout = timeout;
        self
    }
}

/// The TLS configurations of brokered connections: this side's identity, pinning the peer's
/// certificate, as TLS server (accepting) and as TLS client (dialling).
#[derive(Clone)]
pub struct BrokerTls {
    server: TlsAcceptor,
    client: Arc<ClientConfig>,
}

impl BrokerTls {
    /// Both configurations for `own` identity and the `peer`'s certificate.
    ///
    /// # Errors
    /// [`TlsError`] if rustls refuses the key or certificate.
    pub fn new(own: &Identity, peer: CertificateDer<'static>) -> Result<Self, TlsError> {
        Ok(Self {
            server: TlsAcceptor::from(Arc::new(tls::server_config(own, peer.clone())?)),
            client: Arc::new(tls::client_config(own, peer)?),
        })
    }
}

impl fmt::Debug for BrokerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerTls").finish_non_exhaustive()
    }
}

/// Where [`GrpcBroker::accept_and_serve`] listens.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ListenOn {
    /// A randomly named unix socket in this directory.
    Unix(PathBuf),
    /// The first free port of this range on 127.0.0.1.
    Tcp {
        /// Lowest port.
        min: u16,
        /// Highest port.
        max: u16,
    },
}

/// Decides whether an address the peer announced may be dialled, and where to connect.
pub type AddressPolicy = Arc<dyn Fn(&Address) -> Result<Target, String> + Send + Sync>;

/// What a broker needs once the connection to the peer exists.
#[derive(Clone)]
pub struct BrokerSetup {
    /// `None`: plaintext brokered connections (AutoMTLS off).
    pub tls: Option<BrokerTls>,
    /// Where to listen.
    pub listen: ListenOn,
    /// Which announced addresses to dial.
    pub policy: AddressPolicy,
    /// `Some`: go-plugin's multiplexed mode over this session (`listen` and `policy` are then
    /// unused); `None`: the default mode.
    pub mux: Option<Mux>,
}

impl fmt::Debug for BrokerSetup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerSetup")
            .field("tls", &self.tls.is_some())
            .field("listen", &self.listen)
            .field("mux", &self.mux.is_some())
            .finish_non_exhaustive()
    }
}

/// The state of the peer's `StartStream` stream, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum PeerStream {
    NotOpen = 0,
    Open = 1,
    Unsupported = 2,
    Ended = 3,
}

impl PeerStream {
    fn describe(self) -> &'static str {
        match self {
            Self::NotOpen => "the peer's broker stream is not open yet",
            Self::Open => "the peer's broker stream is open",
            Self::Unsupported => "the peer does not serve plugin.GRPCBroker",
            Self::Ended => "the peer's broker stream has ended",
        }
    }

    fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Open,
            2 => Self::Unsupported,
            3 => Self::Ended,
            _ => Self::NotOpen,
        }
    }
}

/// What a served id holds while it is served: its listening socket (removed on drop) or its
/// route on the multiplexed connection.
enum Endpoint {
    Socket(#[allow(dead_code, reason = "held for its Drop, which deletes the socket")] TempPath),
    Route(#[allow(dead_code, reason = "held for its Drop, which ends the route")] Route),
}

/// A served id that lives until the broker closes.
type Detached = (oneshot::Sender<()>, Arc<Mutex<Option<Endpoint>>>);

/// A `ConnInfo` that arrived, or dials waiting for one.
enum Slot {
    Arrived { info: ConnInfo, at: Instant },
    Waiting(Vec<oneshot::Sender<ConnInfo>>),
}

/// go-plugin's `GRPCBroker`: serve gRPC services to the peer on fresh ids, and dial the
/// services the peer serves. Cheap to clone; all clones are one broker.
///
/// A host gets one from `tether_broker::PluginClient::broker`, a plugin from
/// `tether_sdk::Plugin::broker`.
///
/// ```no_run
/// # async fn f(broker: tether_transport::GrpcBroker) -> Result<(), tether_transport::BrokerError> {
/// # let service = tonic_health::server::health_reporter().1;
/// // Serve `service` to the peer for as long as `served` lives…
/// let id = broker.next_id();
/// let served = broker.accept_and_serve(id, service).await?;
/// // …send `id` to the peer in an app message; the peer calls `dial(id)`.
/// # let other_id = 1;
/// // Reach a service the peer serves under an id it sent:
/// let channel = broker.dial(other_id).await?;
/// # drop((served, channel)); Ok(()) }
/// ```
#[derive(Clone)]
pub struct GrpcBroker {
    inner: Arc<Inner>,
}

struct Inner {
    peer: String,
    config: BrokerConfig,
    next_id: AtomicU32,
    outbound: Mutex<Option<mpsc::UnboundedSender<ConnInfo>>>,
    outbound_rx: Mutex<Option<mpsc::UnboundedReceiver<ConnInfo>>>,
    slots: Mutex<HashMap<u32, Slot>>,
    setup: OnceLock<BrokerSetup>,
    closed: watch::Sender<bool>,
    peer_stream: AtomicU8,
    /// Detached services (stop sender, socket): they stop when the broker closes.
    detached: Mutex<Vec<Detached>>,
    /// The plugin side's channel to the host services, once dialled.
    host_services: tokio::sync::OnceCell<Channel>,
    /// Multiplexed mode: knocks for ids not served yet, with their arrival time.
    knocks: Mutex<HashMap<u32, Instant>>,
    /// Multiplexed mode: the dial waiting for the acknowledgement of its knock, by id.
    acks: Mutex<HashMap<u32, oneshot::Sender<Knock>>>,
}

impl fmt::Debug for GrpcBroker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcBroker")
            .field("peer", &self.inner.peer)
            .field("setup", &self.inner.setup.get())
            .field("closed", &*self.inner.closed.borrow())
            .finish_non_exhaustive()
    }
}

impl GrpcBroker {
    /// A broker talking to `peer` (a description used in errors and logs: `plugin \`kv\``,
    /// `the host`). It works once [`connect`](Self::connect) has been called.
    #[must_use]
    pub fn new(peer: impl Into<String>, config: BrokerConfig) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            inner: Arc::new(Inner {
                peer: peer.into(),
                config,
                next_id: AtomicU32::new(1),
                outbound: Mutex::new(Some(tx)),
                outbound_rx: Mutex::new(Some(rx)),
                slots: Mutex::new(HashMap::new()),
                setup: OnceLock::new(),
                closed: watch::channel(false).0,
                peer_stream: AtomicU8::new(PeerStream::NotOpen as u8),
                detached: Mutex::new(Vec::new()),
                host_services: tokio::sync::OnceCell::new(),
                knocks: Mutex::new(HashMap::new()),
                acks: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Makes the broker usable: TLS, where to listen, which addresses to dial. Called by the
    /// host library and the SDK once the main connection exists; a second call is ignored.
    pub fn connect(&self, setup: BrokerSetup) {
        let _ = self.inner.setup.set(setup);
    }

    /// The broker mode of the connection: [`BrokerMode::Multiplexed`] when it was connected
    /// with a [`Mux`], else [`BrokerMode::Default`] (also before [`connect`](Self::connect)).
    #[must_use]
    pub fn mode(&self) -> BrokerMode {
        match self.inner.setup.get() {
            Some(BrokerSetup { mux: Some(_), .. }) => BrokerMode::Multiplexed,
            _ => BrokerMode::Default,
        }
    }

    /// A fresh id for [`accept_and_serve`](Self::accept_and_serve): 1, 2, 3, … (each side
    /// numbers its own ids, as in go-plugin).
    #[must_use]
    pub fn next_id(&self) -> u32 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Serves `service` to the peer under `id` until the returned [`Served`] is dropped (or
    /// [`detach`](Served::detach)ed: then until the broker closes).
    ///
    /// Opens a new listener (unix socket or loopback TCP, like the main connection), announces
    /// it to the peer and serves gRPC there, with TLS when AutoMTLS is on.
    ///
    /// # Errors
    /// [`BrokerError::NotConnected`], [`BrokerError::Closed`], [`BrokerError::Bind`].
    pub async fn accept_and_serve<S>(&self, id: u32, service: S) -> Result<Served, BrokerError>
    where
        S: Service<Request<Body>, Error = Infallible>
            + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Response: axum::response::IntoResponse,
        S::Future: Send + 'static,
    {
        self.accept_and_serve_routes(id, Routes::new(service)).await
    }

    /// Like [`accept_and_serve`](Self::accept_and_serve), for several services on one id.
    ///
    /// # Errors
    /// As [`accept_and_serve`](Self::accept_and_serve).
    pub async fn accept_and_serve_routes(
        &self,
        id: u32,
        routes: Routes,
    ) -> Result<Served, BrokerError> {
        let setup = self.setup()?;
        let inner = &self.inner;
        let bind_error = |source| BrokerError::Bind {
            peer: inner.peer.clone(),
            id,
            source,
        };
        let (listener, address, socket) = match (&setup.mux, &setup.listen) {
            (Some(mux), _) => {
                let (route, listener) = mux.route(id);
                (listener, None, Some(Endpoint::Route(route)))
            }
            (None, ListenOn::Unix(dir)) => {
                let (listener, path) = crate::bind::unix_in(dir).map_err(bind_error)?;
                let address = Address::Unix(path.to_path_buf());
                (
                    Listener::Unix(listener),
                    Some(address),
                    Some(Endpoint::Socket(path)),
                )
            }
            (None, ListenOn::Tcp { min, max }) => {
                let listener = crate::bind::tcp_in_range(*min, *max).map_err(bind_error)?;
                let address = Address::Tcp(listener.local_addr().map_err(bind_error)?);
                (Listener::Tcp(listener), Some(address), None)
            }
        };
        let socket = Arc::new(Mutex::new(socket));
        let incoming = accept::accept(
            listener,
            AcceptOptions {
                tls: setup.tls.as_ref().map(|t| t.server.clone()),
                tls_handshake_timeout: inner.config.tls_handshake_timeout,
                error_backoff: DEFAULT_ACCEPT_ERROR_BACKOFF,
            },
        );

        // Connections outlive the server future (tonic runs each in its own task): each is cut
        // when the serving task below ends, which drops `cut_tx`.
        let (cut_tx, cut_rx) = watch::channel(());
        let incoming = incoming.map(move |conn| {
            let mut cut = cut_rx.clone();
            conn.map(|conn| {
                conn.cut_when(async move {
                    // Never sent on: returns once the sender is dropped.
                    while cut.changed().await.is_ok() {}
                })
            })
        });

        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let mut closed = inner.closed.subscribe();
        let (began_tx, began_rx) = oneshot::channel::<()>();
        let shutdown = async move {
            tokio::select! {
                _ = stop_rx => {}
                // An error means the broker is gone: stop too.
                _ = closed.wait_for(|c| *c) => {}
            }
            let _ = began_tx.send(());
        };
        let server = tonic::transport::Server::builder()
            .add_routes(routes)
            .serve_with_incoming_shutdown(incoming, shutdown);
        let grace = inner.config.stop_grace;
        let task_socket = Arc::clone(&socket);
        let peer = inner.peer.clone();
        let task = tokio::spawn(async move {
            let mut server = pin!(server);
            tokio::select! {
                result = &mut server => {
                    if let Err(error) = result {
                        tracing::warn!(peer, id, %error, "brokered gRPC server failed");
                    }
                }
                () = async {
                    if began_rx.await.is_ok() {
                        tokio::time::sleep(grace).await;
                    } else {
                        std::future::pending::<()>().await;
                    }
                } => {
                    tracing::debug!(peer, id, ?grace, "brokered connections still open after the stop grace; cut");
                }
            }
            drop(lock(&task_socket).take());
            drop(cut_tx);
        });

        if let Some(address) = address {
            let info = ConnInfo {
                service_id: id,
                network: address.network().to_owned(),
                address: address.to_string(),
                knock: None,
            };
            self.send(info)?;
            tracing::debug!(peer = inner.peer, id, %address, "serving a brokered id");
        } else if let Some(mux) = &setup.mux {
            // A knock may have come before this id was served.
            let waiting = lock(&inner.knocks).remove(&id);
            if waiting.is_some_and(|at| at.elapsed() < inner.config.unclaimed_ttl) {
                self.acknowledge(mux, id);
            }
            tracing::debug!(peer = inner.peer, id, "serving a multiplexed brokered id");
        }
        Ok(Served {
            id,
            stop: Some(stop_tx),
            socket,
            task: Some(task),
            broker: Arc::downgrade(&self.inner),
        })
    }

    /// Connects to the service the peer serves under `id`: waits (at most
    /// [`BrokerConfig::dial_timeout`]) for the peer's `ConnInfo`, checks the address and
    /// connects with the pinned TLS identities.
    ///
    /// # Errors
    /// [`BrokerError::NotConnected`], [`BrokerError::Closed`], [`BrokerError::NoConnInfo`],
    /// [`BrokerError::BadAddress`], [`BrokerError::Connect`].
    pub async fn dial(&self, id: u32) -> Result<Channel, BrokerError> {
        let setup = self.setup()?;
        if let Some(mux) = &setup.mux {
            return self.dial_multiplexed(setup, mux, id).await;
        }
        let info = self.wait_conn_info(id).await?;
        let peer = || self.inner.peer.clone();
        let bad = |reason: String| BrokerError::BadAddress {
            peer: peer(),
            id,
            address: format!("{}:{}", info.network, info.address),
            reason,
        };
        let address =
            Address::parse(&info.network, &info.address).map_err(|e| bad(e.to_string()))?;
        let target = (setup.policy)(&address).map_err(bad)?;
        let closed = self.inner.closed.subscribe();
        let alive: Alive = Arc::new(move || !*closed.borrow());
        let target_text = target.to_string();
        dial::connect(
            target,
            setup.tls.as_ref().map(|t| Arc::clone(&t.client)),
            alive,
            self.inner.config.connect_timeout,
        )
        .await
        .map_err(|source| BrokerError::Connect {
            peer: peer(),
            id,
            target: target_text,
            source,
        })
    }

    /// Multiplexed mode: a channel whose every connection is a knock, its acknowledgement and
    /// a yamux stream.
    async fn dial_multiplexed(
        &self,
        setup: &BrokerSetup,
        mux: &Mux,
        id: u32,
    ) -> Result<Channel, BrokerError> {
        let broker = Arc::downgrade(&self.inner);
        let mux = mux.clone();
        let opener: StreamOpener = Arc::new(move || {
            let (broker, mux) = (broker.clone(), mux.clone());
            Box::pin(async move {
                let broker = broker
                    .upgrade()
                    .map(|inner| GrpcBroker { inner })
                    .ok_or_else(|| {
                        std::io::Error::new(
                            std::io::ErrorKind::NotConnected,
                            "the broker is closed",
                        )
                    })?;
                let _one_at_a_time = mux.dial_lock().await;
                broker.knock(id).await?;
                mux.open().await
            })
        });
        let closed = self.inner.closed.subscribe();
        let alive: Alive = Arc::new(move || !*closed.borrow());
        dial::connect_streams(
            opener,
            setup.tls.as_ref().map(|t| Arc::clone(&t.client)),
            alive,
            // The knock's own wait is bounded by the dial timeout.
            self.inner.config.dial_timeout + self.inner.config.connect_timeout,
        )
        .await
        .map_err(|source| BrokerError::Connect {
            peer: self.inner.peer.clone(),
            id,
            target: "a stream of the multiplexed connection".to_owned(),
            source,
        })
    }

    /// Knocks for `id` and waits (at most the dial timeout) for the acknowledgement.
    async fn knock(&self, id: u32) -> std::io::Result<()> {
        use std::io::{Error, ErrorKind};
        let (tx, rx) = oneshot::channel();
        lock(&self.inner.acks).insert(id, tx);
        self.send(knock_message(id, false))
            .map_err(|e| Error::new(ErrorKind::NotConnected, e.to_string()))?;
        let timeout = self.inner.config.dial_timeout;
        let answer = tokio::time::timeout(timeout, rx).await;
        lock(&self.inner.acks).remove(&id);
        match answer {
            Ok(Ok(knock)) if knock.error.is_empty() => Ok(()),
            Ok(Ok(knock)) => Err(Error::new(
                ErrorKind::ConnectionRefused,
                format!(
                    "{} refused the knock for broker id {id}: {}",
                    self.inner.peer, knock.error
                ),
            )),
            Ok(Err(_)) => Err(Error::new(ErrorKind::NotConnected, "the broker is closed")),
            Err(_) => Err(Error::new(
                ErrorKind::TimedOut,
                format!(
                    "{} did not acknowledge the knock for broker id {id} within {timeout:?} ({}); check that it serves this id",
                    self.inner.peer,
                    PeerStream::from_u8(self.inner.peer_stream.load(Ordering::Relaxed)).describe()
                ),
            )),
        }
    }

    /// Multiplexed mode: the next stream the peer opens is for `id`; tells the peer so.
    fn acknowledge(&self, mux: &Mux, id: u32) {
        mux.expect(id);
        if let Err(error) = self.send(knock_message(id, true)) {
            tracing::debug!(peer = self.inner.peer, id, %error, "cannot acknowledge a knock");
        }
    }

    /// Multiplexed mode: a knock or an acknowledgement from the peer.
    fn receive_knock(&self, id: u32, knock: Knock) {
        let Some(mux) = self.inner.setup.get().and_then(|s| s.mux.as_ref()) else {
            tracing::warn!(
                peer = self.inner.peer,
                id,
                "ignoring a multiplexing knock: this connection does not use multiplexing"
            );
            return;
        };
        if knock.ack {
            match lock(&self.inner.acks).remove(&id) {
                Some(waiting) => {
                    let _ = waiting.send(knock);
                }
                None => {
                    tracing::debug!(
                        peer = self.inner.peer,
                        id,
                        "an unexpected knock acknowledgement"
                    );
                }
            }
            return;
        }
        if !knock.knock {
            tracing::debug!(peer = self.inner.peer, id, "ignoring an empty knock");
            return;
        }
        let mut knocks = lock(&self.inner.knocks);
        if mux.is_routed(id) {
            drop(knocks);
            self.acknowledge(mux, id);
            return;
        }
        // Not served yet: kept until it is (as go-plugin does), within the same limits as
        // unclaimed connection infos; the dialler gives up after its own timeout.
        let ttl = self.inner.config.unclaimed_ttl;
        knocks.retain(|_, at| at.elapsed() < ttl);
        if knocks.len() >= MAX_UNCLAIMED {
            tracing::warn!(
                peer = self.inner.peer,
                id,
                limit = MAX_UNCLAIMED,
                "too many knocks for ids not served; dropping this one"
            );
            return;
        }
        knocks.insert(id, Instant::now());
    }

    /// Host side: serves `routes` as the host services, under [`HOST_SERVICES_ID`], until the
    /// broker closes. Plugins reach them with [`host_services`](Self::host_services).
    ///
    /// # Errors
    /// As [`accept_and_serve`](Self::accept_and_serve).
    pub async fn serve_host_services(&self, routes: Routes) -> Result<(), BrokerError> {
        self.accept_and_serve_routes(HOST_SERVICES_ID, routes)
            .await?
            .detach();
        Ok(())
    }

    /// Plugin side: a channel to the services the host serves to all its plugins (a tether
    /// host's `host_service`s), without being sent an id. Dialled on first use (waiting up to
    /// [`BrokerConfig::dial_timeout`] for the host's announcement), then shared.
    ///
    /// # Errors
    /// As [`dial`](Self::dial); [`BrokerError::NoConnInfo`] when the host serves none (go-plugin
    /// hosts never do).
    pub async fn host_services(&self) -> Result<Channel, BrokerError> {
        self.inner
            .host_services
            .get_or_try_init(|| self.dial(HOST_SERVICES_ID))
            .await
            .cloned()
    }

    /// Closes the broker: stops every served id (their sockets are removed), ends the stream
    /// to the peer, fails waiting and future dials.
    pub fn close(&self) {
        self.inner.closed.send_replace(true);
        lock(&self.inner.outbound).take();
        for (stop, socket) in lock(&self.inner.detached).drain(..) {
            let _ = stop.send(());
            drop(lock(&socket).take());
        }
        lock(&self.inner.slots).clear();
        lock(&self.inner.acks).clear();
        lock(&self.inner.knocks).clear();
    }

    /// Whether [`close`](Self::close) was called.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        *self.inner.closed.borrow()
    }

    /// The `ConnInfo`s this side sends to the peer, once: the host sends them as the request
    /// stream of `StartStream`, a plugin as its response stream. Ends when the broker closes.
    /// `None` after the first call.
    pub fn take_outbound(&self) -> Option<impl Stream<Item = ConnInfo> + Send + 'static> {
        lock(&self.inner.outbound_rx)
            .take()
            .map(tokio_stream::wrappers::UnboundedReceiverStream::new)
    }

    /// Routes the `ConnInfo`s the peer sends to waiting and future dials, until `stream` ends
    /// or the broker closes.
    pub async fn run_inbound<S>(&self, stream: S)
    where
        S: Stream<Item = Result<ConnInfo, tonic::Status>> + Send,
    {
        self.set_peer_stream(PeerStream::Open);
        let mut stream = pin!(stream);
        let mut closed = self.inner.closed.subscribe();
        loop {
            let next = tokio::select! {
                _ = closed.wait_for(|c| *c) => break,
                next = stream.next() => next,
            };
            match next {
                Some(Ok(info)) => self.receive(info),
                Some(Err(status)) => {
                    tracing::debug!(peer = self.inner.peer, %status, "the broker stream ended");
                    break;
                }
                None => break,
            }
        }
        self.set_peer_stream(PeerStream::Ended);
    }

    /// Host side: opens `plugin.GRPCBroker/StartStream` on the plugin's `channel` and routes
    /// what arrives, in a background task. A plugin without the service is noted (dials then
    /// say so) and otherwise ignored.
    pub fn open_stream(&self, channel: Channel) {
        let Some(outbound) = self.take_outbound() else {
            return;
        };
        let broker = self.clone();
        tokio::spawn(async move {
            let mut client = GrpcBrokerClient::new(channel);
            let mut closed = broker.inner.closed.subscribe();
            // go-plugin answers with headers only when it first sends, so this can wait long;
            // our requests flow meanwhile.
            let opened = tokio::select! {
                opened = client.start_stream(outbound) => opened,
                _ = closed.wait_for(|c| *c) => return,
            };
            match opened {
                Ok(response) => broker.run_inbound(response.into_inner()).await,
                Err(status) if status.code() == tonic::Code::Unimplemented => {
                    tracing::debug!(
                        peer = broker.inner.peer,
                        "the plugin does not serve plugin.GRPCBroker; callbacks are unavailable"
                    );
                    broker.set_peer_stream(PeerStream::Unsupported);
                }
                Err(status) => {
                    tracing::debug!(peer = broker.inner.peer, %status, "the broker stream ended");
                    broker.set_peer_stream(PeerStream::Ended);
                }
            }
        });
    }

    /// Plugin side: the `plugin.GRPCBroker` service to serve to the host.
    #[must_use]
    pub fn service(&self) -> GrpcBrokerServer<impl grpc_broker_server::GrpcBroker> {
        GrpcBrokerServer::new(BrokerService(self.clone()))
    }

    fn setup(&self) -> Result<&BrokerSetup, BrokerError> {
        if self.is_closed() {
            return Err(BrokerError::Closed {
                peer: self.inner.peer.clone(),
            });
        }
        self.inner
            .setup
            .get()
            .ok_or_else(|| BrokerError::NotConnected {
                peer: self.inner.peer.clone(),
            })
    }

    fn set_peer_stream(&self, state: PeerStream) {
        self.inner.peer_stream.store(state as u8, Ordering::Relaxed);
    }

    fn send(&self, info: ConnInfo) -> Result<(), BrokerError> {
        let closed = || BrokerError::Closed {
            peer: self.inner.peer.clone(),
        };
        let outbound = lock(&self.inner.outbound);
        outbound
            .as_ref()
            .ok_or_else(closed)?
            .send(info)
            .map_err(|_| closed())
    }

    /// Stores or delivers a `ConnInfo` from the peer.
    fn receive(&self, info: ConnInfo) {
        if let Some(knock) = info.knock {
            self.receive_knock(info.service_id, knock);
            return;
        }
        let now = Instant::now();
        let ttl = self.inner.config.unclaimed_ttl;
        let mut slots = lock(&self.inner.slots);
        // Forget expired and abandoned entries first.
        slots.retain(|id, slot| match slot {
            Slot::Arrived { at, .. } => *id == HOST_SERVICES_ID || now.duration_since(*at) < ttl,
            Slot::Waiting(waiters) => {
                waiters.retain(|w| !w.is_closed());
                !waiters.is_empty()
            }
        });
        let id = info.service_id;
        match slots.remove(&id) {
            Some(Slot::Waiting(waiters)) => {
                for waiter in waiters {
                    let _ = waiter.send(info.clone());
                }
            }
            Some(Slot::Arrived { .. }) | None => {
                if slots.len() >= MAX_UNCLAIMED {
                    tracing::warn!(
                        peer = self.inner.peer,
                        id,
                        limit = MAX_UNCLAIMED,
                        "too many unclaimed broker ids; dropping this one"
                    );
                    return;
                }
                slots.insert(id, Slot::Arrived { info, at: now });
            }
        }
    }

    async fn wait_conn_info(&self, id: u32) -> Result<ConnInfo, BrokerError> {
        let rx = {
            let mut slots = lock(&self.inner.slots);
            match slots.remove(&id) {
                // The host services' info stays for later dials.
                Some(Slot::Arrived { info, at }) if id == HOST_SERVICES_ID => {
                    slots.insert(
                        id,
                        Slot::Arrived {
                            info: info.clone(),
                            at,
                        },
                    );
                    return Ok(info);
                }
                Some(Slot::Arrived { info, at })
                    if at.elapsed() < self.inner.config.unclaimed_ttl =>
                {
                    return Ok(info);
                }
                Some(Slot::Waiting(mut waiters)) => {
                    let (tx, rx) = oneshot::channel();
                    waiters.push(tx);
                    slots.insert(id, Slot::Waiting(waiters));
                    rx
                }
                Some(Slot::Arrived { .. }) | None => {
                    let (tx, rx) = oneshot::channel();
                    slots.insert(id, Slot::Waiting(vec![tx]));
                    rx
                }
            }
        };
        let timeout = self.inner.config.dial_timeout;
        let mut closed = self.inner.closed.subscribe();
        tokio::select! {
            received = tokio::time::timeout(timeout, rx) => match received {
                Ok(Ok(info)) => Ok(info),
                // The sender was dropped: the broker was closed.
                Ok(Err(_)) => Err(BrokerError::Closed { peer: self.inner.peer.clone() }),
                Err(_) => Err(BrokerError::NoConnInfo {
                    peer: self.inner.peer.clone(),
                    id,
                    timeout,
                    stream: PeerStream::from_u8(self.inner.peer_stream.load(Ordering::Relaxed))
                        .describe(),
                }),
            },
            _ = closed.wait_for(|c| *c) => Err(BrokerError::Closed { peer: self.inner.peer.clone() }),
        }
    }
}

/// A service served to the peer under a broker id. Dropping it stops serving and removes the
/// listening socket at once; open connections get [`BrokerConfig::stop_grace`] to finish their
/// calls, then they are cut (their peers see their calls fail).
#[must_use = "dropping it stops serving at once"]
pub struct Served {
    id: u32,
    stop: Option<oneshot::Sender<()>>,
    socket: Arc<Mutex<Option<Endpoint>>>,
    task: Option<tokio::task::JoinHandle<()>>,
    broker: std::sync::Weak<Inner>,
}

impl fmt::Debug for Served {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Served")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Served {
    /// The broker id the service is served under.
    #[must_use]
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Keeps serving until the broker closes (for services that live as long as the
    /// connection, like a host's services for its plugin); closing removes the socket.
    pub fn detach(mut self) {
        if let (Some(stop), Some(broker)) = (self.stop.take(), self.broker.upgrade()) {
            lock(&broker.detached).push((stop, Arc::clone(&self.socket)));
        }
        self.task.take();
    }

    /// Stops serving and waits until the server has ended (at most the stop grace after its
    /// last calls).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        drop(lock(&self.socket).take());
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
            drop(lock(&self.socket).take());
        }
    }
}

/// The plugin side's `plugin.GRPCBroker` service.
struct BrokerService(GrpcBroker);

#[tonic::async_trait]
impl grpc_broker_server::GrpcBroker for BrokerService {
    type StartStreamStream =
        std::pin::Pin<Box<dyn Stream<Item = Result<ConnInfo, tonic::Status>> + Send + 'static>>;

    async fn start_stream(
        &self,
        request: tonic::Request<tonic::Streaming<ConnInfo>>,
    ) -> Result<tonic::Response<Self::StartStreamStream>, tonic::Status> {
        let Some(outbound) = self.0.take_outbound() else {
            return Err(tonic::Status::already_exists(
                "the broker stream is already open",
            ));
        };
        let broker = self.0.clone();
        let inbound = request.into_inner();
        tokio::spawn(async move { broker.run_inbound(inbound).await });
        Ok(tonic::Response::new(Box::pin(outbound.map(Ok))))
    }
}

/// Multiplexed mode: a knock for `id` (`ack` false) or its acknowledgement (`ack` true).
fn knock_message(id: u32, ack: bool) -> ConnInfo {
    ConnInfo {
        service_id: id,
        network: String::new(),
        address: String::new(),
        knock: Some(Knock {
            knock: true,
            ack,
            error: String::new(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: u32) -> ConnInfo {
        ConnInfo {
            service_id: id,
            network: "unix".into(),
            address: format!("/tmp/x/{id}.sock"),
            knock: None,
        }
    }

    fn broker(ttl: Duration) -> GrpcBroker {
        let config = BrokerConfig::new()
            .unclaimed_ttl(ttl)
            .dial_timeout(Duration::from_secs(1));
        GrpcBroker::new("the host", config)
    }

    #[tokio::test(start_paused = true)]
    async fn a_conn_info_that_arrived_before_the_dial_is_claimed_within_its_ttl() {
        let broker = broker(Duration::from_secs(5));
        broker.receive(info(3));
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(broker.wait_conn_info(3).await.unwrap().service_id, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unclaimed_conn_info_expires_after_its_ttl() {
        let broker = broker(Duration::from_secs(5));
        broker.receive(info(3));
        tokio::time::advance(Duration::from_secs(6)).await;
        let err = broker.wait_conn_info(3).await.unwrap_err();
        assert!(
            matches!(err, BrokerError::NoConnInfo { id: 3, .. }),
            "{err:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn expired_entries_are_forgotten_when_new_ones_arrive() {
        let broker = broker(Duration::from_secs(5));
        for id in 0..10 {
            broker.receive(info(id));
        }
        tokio::time::advance(Duration::from_secs(6)).await;
        broker.receive(info(100));
        assert_eq!(lock(&broker.inner.slots).len(), 1);
    }

    #[tokio::test]
    async fn unclaimed_entries_are_capped() {
        let broker = broker(Duration::from_secs(60));
        for id in 0..(MAX_UNCLAIMED as u32 + 10) {
            broker.receive(info(id));
        }
        assert_eq!(lock(&broker.inner.slots).len(), MAX_UNCLAIMED);
    }

    #[tokio::test]
    async fn a_multiplexed_knock_that_comes_before_the_id_is_served_is_answered_once_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("main.sock");
        let listener = Listener::Unix(tokio::net::UnixListener::bind(&path).unwrap());
        let plugin_mux = Mux::new();
        let _main = plugin_mux.serve_first_connection(listener, crate::AcceptOptions::new(None));
        let host_mux = Mux::client(tokio::net::UnixStream::connect(&path).await.unwrap());
        let setup = |mux| BrokerSetup {
            tls: None,
            listen: ListenOn::Unix(dir.path().to_owned()),
            policy: Arc::new(|_: &Address| Err("unused".to_owned())),
            mux: Some(mux),
        };
        let (host, plugin) = (
            broker(Duration::from_secs(5)),
            broker(Duration::from_secs(5)),
        );
        host.connect(setup(host_mux));
        plugin.connect(setup(plugin_mux));
        let to_plugin = host.take_outbound().unwrap().map(Ok);
        let to_host = plugin.take_outbound().unwrap().map(Ok);
        let (h, p) = (host.clone(), plugin.clone());
        tokio::spawn(async move { p.run_inbound(to_plugin).await });
        tokio::spawn(async move { h.run_inbound(to_host).await });

        let dial = tokio::spawn({
            let host = host.clone();
            async move { host.dial(3).await }
        });
        while !lock(&plugin.inner.knocks).contains_key(&3) {
            tokio::task::yield_now().await;
        }
        let (_reporter, health) = tonic_health::server::health_reporter();
        let _served = plugin.accept_and_serve(3, health).await.unwrap();
        let channel = dial.await.unwrap().unwrap();
        let response = tonic_health::pb::health_client::HealthClient::new(channel)
            .check(tonic_health::pb::HealthCheckRequest::default())
            .await
            .unwrap();
        assert_eq!(
            response.into_inner().status,
            tonic_health::ServingStatus::Serving as i32
        );
        assert!(lock(&plugin.inner.knocks).is_empty());
    }

    #[tokio::test]
    async fn a_waiting_dial_gets_the_conn_info_when_it_arrives() {
        let broker = broker(Duration::from_secs(5));
        let waiting = tokio::spawn({
            let broker = broker.clone();
            async move { broker.wait_conn_info(7).await }
        });
        // Wait until the dial has registered itself, then deliver.
        while !lock(&broker.inner.slots).contains_key(&7) {
            tokio::task::yield_now().await;
        }
        broker.receive(info(7));
        assert_eq!(waiting.await.unwrap().unwrap().address, "/tmp/x/7.sock");
    }
}
