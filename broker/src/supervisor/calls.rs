//! Plugin-to-plugin calls through the host, granted: the `tether.plugins.v1.Plugins` host
//! service a [`Supervisor`] serves to each of its plugins (docs/PROTOCOL.md §10.3).
//!
//! Plugin A asks `Open{plugin: "b"}`; if the grants let A call B (`calls = ["b"]` under
//! `[plugins.a]`), the host starts B when it is not running and serves a *relay* on A's
//! broker: every gRPC request A makes there is forwarded to B's channel as it is (headers,
//! metadata, streams), under a [`Lease`](crate::Lease) of B held until the response ends, so
//! B is started again after a crash and not stopped as idle mid-call. A never learns B's
//! address, certificate, secrets or config; B sees its host's connection, as for any call.
//! One relay per callee and run of A, announced again for each `Open` (go-plugin uses up an
//! announcement with one dial).

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use tether_proto::plugins::plugins_server::{Plugins, PluginsServer};
use tether_proto::plugins::{OpenRequest, OpenResponse};
use tether_transport::{GrpcBroker, Served};
use tokio::sync::{Mutex, watch};
use tonic::codegen::Bytes;
use tonic::codegen::http;
use tonic::{Request, Response, Status};

use crate::supervisor::lease::Lease;
use crate::supervisor::{Inner, Supervisor};

/// The `Plugins` service for one run of plugin `caller`; its broker arrives once the launch
/// has connected (see [`calls_service`]).
struct Calls {
    caller: String,
    supervisor: Weak<Inner>,
    broker: watch::Receiver<Option<GrpcBroker>>,
    relays: Mutex<HashMap<String, Served>>,
}

/// The `Plugins` host service for a run of `caller`, and where to send its broker once the
/// plugin has started.
pub(super) fn calls_service(
    caller: &str,
    supervisor: &Arc<Inner>,
) -> (
    PluginsServer<impl Plugins>,
    watch::Sender<Option<GrpcBroker>>,
) {
    let (tx, rx) = watch::channel(None);
    let calls = Calls {
        caller: caller.to_owned(),
        supervisor: Arc::downgrade(supervisor),
        broker: rx,
        relays: Mutex::new(HashMap::new()),
    };
    (PluginsServer::new(calls), tx)
}

impl Calls {
    fn supervisor(&self) -> Result<Supervisor, Status> {
        self.supervisor
            .upgrade()
            .map(|inner| Supervisor { inner })
            .ok_or_else(|| Status::unavailable("the host is shutting down"))
    }

    async fn broker(&self) -> Result<GrpcBroker, Status> {
        let mut broker = self.broker.clone();
        let ready = broker
            .wait_for(Option::is_some)
            .await
            .map_err(|_| Status::unavailable("the host's broker for this plugin is gone"))?;
        ready
            .clone()
            .ok_or_else(|| Status::internal("the broker was announced empty"))
    }
}

#[tonic::async_trait]
impl Plugins for Calls {
    async fn open(&self, request: Request<OpenRequest>) -> Result<Response<OpenResponse>, Status> {
        let callee = request.into_inner().plugin;
        let caller = &self.caller;
        let supervisor = self.supervisor()?;
        if !supervisor.inner.slots.contains_key(&callee) {
            return Err(Status::not_found(format!(
                "plugin `{caller}` asked to call plugin {callee:?}, which is not in the host's catalog"
            )));
        }
        let grants = &supervisor.inner.options.grants;
        if !grants.allows_call(caller, &callee) {
            let refusal = grants.call_refusal(caller, &callee);
            tracing::warn!(plugin = caller, callee, "{refusal}");
            return Err(Status::permission_denied(refusal));
        }
        // Started now (lazily), so that a start failure is this call's answer.
        drop(
            supervisor
                .acquire(&callee)
                .await
                .map_err(|e| Status::unavailable(e.to_string()))?,
        );
        let broker = self.broker().await?;
        let mut relays = self.relays.lock().await;
        if let Some(served) = relays.get(&callee) {
            broker
                .announce_again(served)
                .map_err(|e| Status::unavailable(e.to_string()))?;
            return Ok(Response::new(OpenResponse {
                broker_id: served.id(),
            }));
        }
        let relay = Relay {
            supervisor: Weak::clone(&self.supervisor),
            callee: Arc::from(callee.as_str()),
        };
        let routes = tonic::service::Routes::from(axum::Router::new().fallback_service(relay));
        let served = broker
            .accept_and_serve_routes(broker.next_id(), routes)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let broker_id = served.id();
        tracing::debug!(plugin = caller, callee, broker_id, "relaying calls");
        relays.insert(callee, served);
        Ok(Response::new(OpenResponse { broker_id }))
    }
}

/// Forwards every request to the callee's channel under a lease.
#[derive(Clone)]
struct Relay {
    supervisor: Weak<Inner>,
    callee: Arc<str>,
}

type RelayFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<tonic::body::Body>, Infallible>> + Send>>;

impl tower::Service<http::Request<axum::body::Body>> for Relay {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = RelayFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<axum::body::Body>) -> RelayFuture {
        let relay = self.clone();
        Box::pin(async move {
            Ok(relay
                .forward(request)
                .await
                .unwrap_or_else(Status::into_http))
        })
    }
}

impl Relay {
    async fn forward(
        &self,
        request: http::Request<axum::body::Body>,
    ) -> Result<http::Response<tonic::body::Body>, Status> {
        let callee = &*self.callee;
        let inner = self
            .supervisor
            .upgrade()
            .ok_or_else(|| Status::unavailable("the host is shutting down"))?;
        let lease = Supervisor { inner }
            .acquire(callee)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let mut channel = lease.channel();
        let request = request.map(tonic::body::Body::new);
        let response = tower::ServiceExt::oneshot(&mut channel, request)
            .await
            .map_err(|e| Status::unavailable(format!("plugin `{callee}`: {e}")))?;
        Ok(response.map(|body| {
            tonic::body::Body::new(Leased {
                body,
                _lease: lease,
            })
        }))
    }
}

/// A response body that keeps the callee's lease until it ends.
struct Leased {
    body: tonic::body::Body,
    _lease: Lease,
}

impl http_body::Body for Leased {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Status>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
