//! Serving gRPC to the peer under a broker id, in either mode: the listener comes from the
//! mode, the serving (TLS accept loop, stop, grace, cut) is the same.

use std::pin::pin;
use std::sync::{Arc, Mutex};

use tether_proto::handshake::Address;
use tokio::sync::{Notify, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_stream::StreamExt as _;
use tonic::service::Routes;

use super::broker::GrpcBroker;
use super::served::{Served, SharedEndpoint};
use super::table::HOST_SERVICES_ID;
use super::{default_mode, multiplexed};
use crate::accept::{self, AcceptOptions, DEFAULT_ACCEPT_ERROR_BACKOFF, Listener};
use crate::error::GrpcBrokerError;
use crate::internal::lock;
use crate::mux::Mux;
use crate::service::GrpcService;
use crate::telemetry::trace_routes;

/// Default mode: after a plugin connected to the host services, how long the host waits before
/// announcing them again. go-plugin deletes a used announcement in a goroutine the dial wakes;
/// one sent before that ran would land in the used entry and be lost (or be read by a second,
/// concurrent dial, which then closes the entry twice: go-plugin panics).
pub const HOST_SERVICES_REANNOUNCE_DELAY: std::time::Duration =
    std::time::Duration::from_millis(100);

/// What tells the peer that an id is served, once it is.
enum Then<'a> {
    /// Default mode: announce the listener's address.
    Announce(Address),
    /// Multiplexed mode: acknowledge a knock that came before.
    AnswerEarlyKnock(&'a Mux),
}

impl GrpcBroker {
    /// Serves `service` to the peer under `id` until the returned [`Served`] is dropped (or
    /// [`detach`](Served::detach)ed: then until the broker closes).
    ///
    /// Opens a new listener (unix socket or loopback TCP, like the main connection), announces
    /// it to the peer and serves gRPC there, with TLS when AutoMTLS is on. In the multiplexed
    /// mode the id is served on streams of the one connection instead.
    ///
    /// # Errors
    /// [`GrpcBrokerError::NotConnected`], [`GrpcBrokerError::Closed`], [`GrpcBrokerError::Bind`].
    pub async fn accept_and_serve<S: GrpcService>(
        &self,
        id: u32,
        service: S,
    ) -> Result<Served, GrpcBrokerError> {
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
    ) -> Result<Served, GrpcBrokerError> {
        self.serve_routes(id, routes, None)
    }

    /// Serves `routes` under `id`; each accepted connection is told to `accepted`.
    fn serve_routes(
        &self,
        id: u32,
        routes: Routes,
        accepted: Option<Arc<Notify>>,
    ) -> Result<Served, GrpcBrokerError> {
        let setup = self.setup()?;
        let (listener, endpoint, then) = match &setup.mux {
            Some(mux) => {
                let (listener, route) = multiplexed::listen(mux, id);
                (listener, Some(route), Then::AnswerEarlyKnock(mux))
            }
            None => {
                let (listener, address, socket) = default_mode::listen(self, &setup.listen, id)?;
                (listener, socket, Then::Announce(address))
            }
        };
        let endpoint = Arc::new(Mutex::new(endpoint));
        let options = AcceptOptions {
            tls: setup.tls.as_ref().map(|t| t.server.clone()),
            tls_handshake_timeout: self.inner.config.tls_handshake_timeout,
            error_backoff: DEFAULT_ACCEPT_ERROR_BACKOFF,
        };
        let (stop, task) = self.spawn_server(id, routes, listener, options, &endpoint, accepted);
        let announced = match then {
            Then::Announce(address) => {
                default_mode::announce(self, id, &address)?;
                Some(address)
            }
            Then::AnswerEarlyKnock(mux) => {
                multiplexed::answer_early_knock(self, mux, id);
                None
            }
        };
        Ok(Served::new(
            id,
            announced,
            stop,
            endpoint,
            task,
            &self.inner.detached,
        ))
    }

    /// Tells the peer again where `served` is, so that it can dial the id once more: go-plugin
    /// uses up an announcement with one dial (and forgets it after 5 s), so a host that hands
    /// the same served id out again announces it again first. Nothing to do in the
    /// multiplexed mode (a dial knocks).
    ///
    /// # Errors
    /// [`GrpcBrokerError::Closed`].
    pub fn announce_again(&self, served: &Served) -> Result<(), GrpcBrokerError> {
        match served.announced() {
            Some(address) => default_mode::announce(self, served.id(), address),
            None => Ok(()),
        }
    }

    /// Host side: serves `routes` as the host services, under [`HOST_SERVICES_ID`], until the
    /// broker closes. Plugins reach them with [`host_services`](Self::host_services).
    ///
    /// # Errors
    /// As [`accept_and_serve`](Self::accept_and_serve).
    #[doc(hidden)]
    pub async fn serve_host_services(&self, routes: Routes) -> Result<(), GrpcBrokerError> {
        let accepted = Arc::new(Notify::new());
        let served = self.serve_routes(HOST_SERVICES_ID, routes, Some(Arc::clone(&accepted)))?;
        if let Some(address) = served.announced() {
            self.keep_announcing(address.clone(), accepted);
        }
        served.detach();
        Ok(())
    }

    /// Default mode: re-announces the host services at `address` until the broker closes, so
    /// that a go-plugin plugin (which forgets an announcement after 5 s or one dial) can dial
    /// them at any time: [`HOST_SERVICES_REANNOUNCE_DELAY`] after each accepted connection (a
    /// dial used the announcement up), else every
    /// [`DEFAULT_HOST_SERVICES_ANNOUNCE_INTERVAL`](super::DEFAULT_HOST_SERVICES_ANNOUNCE_INTERVAL)
    /// (it expired). Never while go-plugin still holds the last one: a second announcement
    /// would start a second expiry that later deletes a newer one a dial waits on.
    fn keep_announcing(&self, address: Address, accepted: Arc<Notify>) {
        let interval = self.inner.config.host_services_announce_interval;
        let weak = Arc::downgrade(&self.inner);
        let mut closed = self.inner.closed.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(interval) => {}
                    () = async {
                        accepted.notified().await;
                        tokio::time::sleep(HOST_SERVICES_REANNOUNCE_DELAY).await;
                    } => {}
                    _ = closed.wait_for(|c| *c) => return,
                }
                let Some(inner) = weak.upgrade() else { return };
                if default_mode::announce_quietly(&GrpcBroker { inner }, HOST_SERVICES_ID, &address)
                    .is_err()
                {
                    return;
                }
            }
        });
    }

    /// Serves `routes` on `listener` until the returned sender is used or dropped, or the
    /// broker closes; then open connections get the stop grace, are cut, and `endpoint` is
    /// dropped.
    fn spawn_server(
        &self,
        id: u32,
        routes: Routes,
        listener: Listener,
        options: AcceptOptions,
        endpoint: &SharedEndpoint,
        accepted: Option<Arc<Notify>>,
    ) -> (oneshot::Sender<()>, JoinHandle<()>) {
        let inner = &self.inner;
        let incoming = accept::accept(listener, options).map(move |conn| {
            if let Some(accepted) = &accepted {
                accepted.notify_one();
            }
            conn
        });

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
        let routes = trace_routes(routes, inner.config.telemetry.clone());
        let server = tonic::transport::Server::builder()
            .add_routes(routes)
            .serve_with_incoming_shutdown(incoming, shutdown);
        let grace = inner.config.stop_grace;
        let task_endpoint = Arc::clone(endpoint);
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
            drop(lock(&task_endpoint).take());
            drop(cut_tx);
        });
        (stop_tx, task)
    }
}
