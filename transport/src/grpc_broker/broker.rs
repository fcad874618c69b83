//! [`GrpcBroker`] itself: its state, its life cycle (new, connect, close) and the helpers both
//! modes share. Serving, dialling and the peer's stream build on it in their own files.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use crate::telemetry::TracedChannel;
use tether_proto::plugin::ConnInfo;
use tether_proto::plugin::conn_info::Knock;
use tokio::sync::{OnceCell, mpsc, oneshot, watch};

use super::config::GrpcBrokerConfig;
use super::served::{self, DetachedList};
use super::setup::BrokerSetup;
use super::table::ConnInfoTable;
use crate::dial::Alive;
use crate::error::GrpcBrokerError;
use crate::internal::lock;
use crate::mux::BrokerMode;
use crate::repeated::RepeatedWarning;

/// go-plugin's `GRPCBroker`: serve gRPC services to the peer on fresh ids, and dial the
/// services the peer serves. Cheap to clone; all clones are one broker.
///
/// A host gets one from `tether_broker::PluginClient::broker`, a plugin from
/// `tether_sdk::Plugin::broker`.
///
/// ```no_run
/// # async fn f(broker: tether_transport::GrpcBroker) -> Result<(), tether_transport::GrpcBrokerError> {
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
    pub(super) inner: Arc<Inner>,
}

/// The state all clones of a [`GrpcBroker`] share.
pub(super) struct Inner {
    pub(super) peer: String,
    pub(super) config: GrpcBrokerConfig,
    next_id: AtomicU32,
    outbound: Mutex<Option<mpsc::UnboundedSender<ConnInfo>>>,
    pub(super) outbound_rx: Mutex<Option<mpsc::UnboundedReceiver<ConnInfo>>>,
    /// Connection infos that arrived or are awaited; knocks for ids not served yet.
    pub(super) table: Mutex<ConnInfoTable>,
    setup: OnceLock<BrokerSetup>,
    pub(super) closed: watch::Sender<bool>,
    peer_stream: AtomicU8,
    /// Detached services: they stop when the broker closes.
    pub(super) detached: DetachedList,
    /// The plugin side's channel to the host services, once dialled.
    pub(super) host_services: OnceCell<TracedChannel>,
    /// Plugin side: the host said at launch that it serves no host services.
    pub(super) no_host_services: AtomicBool,
    /// Multiplexed mode: the dial waiting for the acknowledgement of its knock, by id.
    pub(super) acks: Mutex<HashMap<u32, oneshot::Sender<Knock>>>,
    /// The warnings the peer can cause once per message, each logged at most once per
    /// interval.
    pub(super) warnings: PeerWarnings,
}

/// The warnings a peer's broker messages can cause again and again.
pub(super) struct PeerWarnings {
    /// A `ConnInfo` dropped: too many unclaimed.
    pub(super) unclaimed_full: RepeatedWarning,
    /// A knock dropped: too many for ids not served.
    pub(super) knocks_full: RepeatedWarning,
    /// A knock on a connection that does not multiplex.
    pub(super) knock_unmultiplexed: RepeatedWarning,
}

impl PeerWarnings {
    fn new(peer: &str, interval: std::time::Duration) -> Self {
        Self {
            unclaimed_full: RepeatedWarning::new(
                "too many unclaimed broker ids; dropping this one",
                peer,
                interval,
            ),
            knocks_full: RepeatedWarning::new(
                "too many knocks for ids not served; dropping this one",
                peer,
                interval,
            ),
            knock_unmultiplexed: RepeatedWarning::new(
                "ignoring a multiplexing knock: this connection does not use multiplexing",
                peer,
                interval,
            ),
        }
    }

    /// Says how many of each were held back (the broker closes: nothing later would).
    fn flush(&self) {
        self.unclaimed_full.flush();
        self.knocks_full.flush();
        self.knock_unmultiplexed.flush();
    }
}

/// The state of the peer's `StartStream` stream, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum PeerStream {
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
    /// `the host`). It works once `connect` has been called (by the host library or the SDK).
    #[must_use]
    pub fn new(peer: impl Into<String>, config: GrpcBrokerConfig) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let table = ConnInfoTable::new(config.unclaimed_ttl);
        let peer = peer.into();
        Self {
            inner: Arc::new(Inner {
                warnings: PeerWarnings::new(&peer, config.repeated_warning_interval),
                peer,
                config,
                next_id: AtomicU32::new(1),
                outbound: Mutex::new(Some(tx)),
                outbound_rx: Mutex::new(Some(rx)),
                table: Mutex::new(table),
                setup: OnceLock::new(),
                closed: watch::channel(false).0,
                peer_stream: AtomicU8::new(PeerStream::NotOpen as u8),
                detached: DetachedList::default(),
                host_services: OnceCell::new(),
                no_host_services: AtomicBool::new(false),
                acks: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Makes the broker usable: TLS, where to listen, which addresses to dial. Called by the
    /// host library and the SDK once the main connection exists; a second call is ignored.
    #[doc(hidden)]
    pub fn connect(&self, setup: BrokerSetup) {
        let _ = self.inner.setup.set(setup);
    }

    /// Plugin side: the host announced at launch that it serves no host services
    /// (`TETHER_HOST_SERVICES=none`); [`host_services`](Self::host_services) then fails at once
    /// with [`GrpcBrokerError::NoHostServices`]. Called by the SDK.
    #[doc(hidden)]
    pub fn set_no_host_services(&self) {
        self.inner.no_host_services.store(true, Ordering::Relaxed);
    }

    /// The broker mode of the connection: [`BrokerMode::Multiplexed`] when it was connected
    /// over a multiplexed session, else [`BrokerMode::Default`] (also before it is connected).
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

    /// Closes the broker: stops every served id (their sockets are removed), ends the stream
    /// to the peer, fails waiting and future dials.
    pub fn close(&self) {
        self.inner.closed.send_replace(true);
        lock(&self.inner.outbound).take();
        served::stop_detached(&self.inner.detached);
        lock(&self.inner.table).clear();
        lock(&self.inner.acks).clear();
        self.inner.warnings.flush();
    }

    /// Whether [`close`](Self::close) was called.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        *self.inner.closed.borrow()
    }

    /// The setup, once connected and while not closed.
    pub(super) fn setup(&self) -> Result<&BrokerSetup, GrpcBrokerError> {
        if self.is_closed() {
            return Err(self.closed_error());
        }
        self.inner
            .setup
            .get()
            .ok_or_else(|| GrpcBrokerError::NotConnected {
                peer: self.inner.peer.clone(),
            })
    }

    /// The setup of the multiplexed mode's session, if connected with one.
    pub(super) fn mux_setup(&self) -> Option<&crate::mux::Mux> {
        self.inner.setup.get().and_then(|s| s.mux.as_ref())
    }

    /// [`GrpcBrokerError::Closed`] for this broker's peer.
    pub(super) fn closed_error(&self) -> GrpcBrokerError {
        GrpcBrokerError::Closed {
            peer: self.inner.peer.clone(),
        }
    }

    /// Whether brokered connections may still (re)connect: until the broker closes.
    pub(super) fn alive(&self) -> Alive {
        let closed = self.inner.closed.subscribe();
        Arc::new(move || !*closed.borrow())
    }

    pub(super) fn set_peer_stream(&self, state: PeerStream) {
        self.inner.peer_stream.store(state as u8, Ordering::Relaxed);
    }

    /// The state of the peer's broker stream, as a hint for error messages.
    pub(super) fn peer_stream(&self) -> &'static str {
        PeerStream::from_u8(self.inner.peer_stream.load(Ordering::Relaxed)).describe()
    }

    /// Sends `info` to the peer on the broker stream.
    pub(super) fn send(&self, info: ConnInfo) -> Result<(), GrpcBrokerError> {
        let outbound = lock(&self.inner.outbound);
        outbound
            .as_ref()
            .ok_or_else(|| self.closed_error())?
            .send(info)
            .map_err(|_| self.closed_error())
    }
}

/// The broker's clock: tokio's (so that tests with paused time control it), as a plain
/// [`Instant`] for the sans-IO [`ConnInfoTable`].
pub(super) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}
