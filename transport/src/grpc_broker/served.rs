//! [`Served`]: the handle of a service served to the peer under a broker id.

use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use tempfile::TempPath;
use tether_proto::handshake::Address;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::internal::lock;
use crate::mux::Route;

/// What a served id holds while it is served: its listening socket (removed on drop) or its
/// route on the multiplexed connection.
pub(super) enum Endpoint {
    Socket(#[allow(dead_code, reason = "held for its Drop, which deletes the socket")] TempPath),
    Route(#[allow(dead_code, reason = "held for its Drop, which ends the route")] Route),
}

/// A served id's endpoint, shared by its handle and its serving task (whichever ends first
/// drops it).
pub(super) type SharedEndpoint = Arc<Mutex<Option<Endpoint>>>;

/// A served id that lives until the broker closes: its stop sender and its endpoint.
type Detached = (oneshot::Sender<()>, SharedEndpoint);

/// The served ids that live until the broker closes.
pub(super) type DetachedList = Arc<Mutex<Vec<Detached>>>;

/// Stops every detached id of `list` (their sockets are removed).
pub(super) fn stop_detached(list: &DetachedList) {
    for (stop, socket) in lock(list).drain(..) {
        let _ = stop.send(());
        drop(lock(&socket).take());
    }
}

/// A service served to the peer under a broker id. Dropping it stops serving and removes the
/// listening socket at once; open connections get
/// [`GrpcBrokerConfig::stop_grace`](super::GrpcBrokerConfig::stop_grace) to finish their calls, then
/// they are cut (their peers see their calls fail).
#[must_use = "dropping it stops serving at once"]
pub struct Served {
    id: u32,
    /// Default mode: the address announced to the peer.
    announced: Option<Address>,
    stop: Option<oneshot::Sender<()>>,
    socket: SharedEndpoint,
    task: Option<JoinHandle<()>>,
    /// Where [`detach`](Self::detach) registers it; gone once the broker is.
    detached: Weak<Mutex<Vec<Detached>>>,
}

impl fmt::Debug for Served {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Served")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Served {
    /// The handle of `id`, served by `task` until `stop` is sent (or dropped).
    pub(super) fn new(
        id: u32,
        announced: Option<Address>,
        stop: oneshot::Sender<()>,
        socket: SharedEndpoint,
        task: JoinHandle<()>,
        detached: &DetachedList,
    ) -> Self {
        Self {
            id,
            announced,
            stop: Some(stop),
            socket,
            task: Some(task),
            detached: Arc::downgrade(detached),
        }
    }

    /// The broker id the service is served under.
    #[must_use]
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Default mode: the address announced to the peer (`None` in the multiplexed mode).
    pub(super) fn announced(&self) -> Option<&Address> {
        self.announced.as_ref()
    }

    /// Keeps serving until the broker closes (for services that live as long as the
    /// connection, like a host's services for its plugin); closing removes the socket.
    pub fn detach(mut self) {
        if let (Some(stop), Some(detached)) = (self.stop.take(), self.detached.upgrade()) {
            lock(&detached).push((stop, Arc::clone(&self.socket)));
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
