//! go-plugin's multiplexed broker mode (`PLUGIN_MULTIPLEX_GRPC`): nothing is announced. The
//! dialler knocks for an id on the broker stream, the serving side acknowledges (once the id
//! is served), and the dialler opens a yamux stream that the [`Mux`] routes to the id.

use std::io::{self, ErrorKind};
use std::sync::Arc;
use std::time::Instant;

use tether_proto::plugin::ConnInfo;
use tether_proto::plugin::conn_info::Knock;
use tokio::sync::oneshot;
use tonic::transport::Channel;

use super::broker::{self, GrpcBroker};
use super::served::Endpoint;
use super::setup::BrokerSetup;
use super::table::{MAX_UNCLAIMED, Stored};
use crate::accept::Listener;
use crate::dial;
use crate::error::GrpcBrokerError;
use crate::internal::lock;
use crate::mux::{Mux, StreamOpener};
use crate::repeated::{Admit, AndMore};

/// Routes the streams knocked for `id` to a new listener, until the endpoint is dropped.
pub(super) fn listen(mux: &Mux, id: u32) -> (Listener, Endpoint) {
    let (route, listener) = mux.route(id);
    (listener, Endpoint::Route(route))
}

/// `id` is now served: acknowledges a knock for it that came before.
pub(super) fn answer_early_knock(broker: &GrpcBroker, mux: &Mux, id: u32) {
    if lock(&broker.inner.table).take_knock(id, broker::now()) {
        acknowledge(broker, mux, id);
    }
    tracing::debug!(
        peer = broker.inner.peer,
        id,
        "serving a multiplexed brokered id"
    );
}

/// A channel whose every connection is a knock, its acknowledgement and a yamux stream.
pub(super) async fn dial(
    broker: &GrpcBroker,
    setup: &BrokerSetup,
    mux: &Mux,
    id: u32,
) -> Result<Channel, GrpcBrokerError> {
    let weak = Arc::downgrade(&broker.inner);
    let mux = mux.clone();
    let opener: StreamOpener = Arc::new(move || {
        let (weak, mux) = (weak.clone(), mux.clone());
        Box::pin(async move {
            let broker = weak
                .upgrade()
                .map(|inner| GrpcBroker { inner })
                .ok_or_else(|| io::Error::new(ErrorKind::NotConnected, "the broker is closed"))?;
            let _one_at_a_time = mux.dial_lock().await;
            knock(&broker, id).await?;
            mux.open().await
        })
    });
    let config = &broker.inner.config;
    dial::connect_streams(
        opener,
        setup.tls.as_ref().map(|t| Arc::clone(&t.client)),
        broker.alive(),
        // The knock's own wait is bounded by the dial timeout.
        config.dial_timeout + config.connect_timeout,
    )
    .await
    .map_err(|source| GrpcBrokerError::Connect {
        peer: broker.inner.peer.clone(),
        id,
        target: "a stream of the multiplexed connection".to_owned(),
        source,
    })
}

/// Knocks for `id` and waits (at most the dial timeout) for the acknowledgement.
async fn knock(broker: &GrpcBroker, id: u32) -> io::Result<()> {
    let (tx, rx) = oneshot::channel();
    lock(&broker.inner.acks).insert(id, tx);
    broker
        .send(knock_message(id, false))
        .map_err(|e| io::Error::new(ErrorKind::NotConnected, e.to_string()))?;
    let timeout = broker.inner.config.dial_timeout;
    let answer = tokio::time::timeout(timeout, rx).await;
    lock(&broker.inner.acks).remove(&id);
    let peer = &broker.inner.peer;
    match answer {
        Ok(Ok(knock)) if knock.error.is_empty() => Ok(()),
        Ok(Ok(knock)) => Err(io::Error::new(
            ErrorKind::ConnectionRefused,
            format!(
                "{peer} refused the knock for broker id {id}: {}",
                knock.error
            ),
        )),
        Ok(Err(_)) => Err(io::Error::new(
            ErrorKind::NotConnected,
            "the broker is closed",
        )),
        Err(_) => Err(io::Error::new(
            ErrorKind::TimedOut,
            format!(
                "{peer} did not acknowledge the knock for broker id {id} within {timeout:?} ({}); check that it serves this id",
                broker.peer_stream()
            ),
        )),
    }
}

/// The next stream the peer opens is for `id`; tells the peer so.
fn acknowledge(broker: &GrpcBroker, mux: &Mux, id: u32) {
    mux.expect(id);
    if let Err(error) = broker.send(knock_message(id, true)) {
        tracing::debug!(peer = broker.inner.peer, id, %error, "cannot acknowledge a knock");
    }
}

/// A knock or an acknowledgement from the peer.
pub(super) fn receive_knock(broker: &GrpcBroker, id: u32, knock: Knock) {
    let peer = &broker.inner.peer;
    let Some(mux) = broker.mux_setup() else {
        let warning = &broker.inner.warnings.knock_unmultiplexed;
        if let Admit::Log { held } = warning.admit(Instant::now()) {
            tracing::warn!(peer, id, "{}{}", warning.what(), AndMore(held));
        }
        return;
    };
    if knock.ack {
        match lock(&broker.inner.acks).remove(&id) {
            Some(waiting) => {
                let _ = waiting.send(knock);
            }
            None => tracing::debug!(peer, id, "an unexpected knock acknowledgement"),
        }
        return;
    }
    if !knock.knock {
        tracing::debug!(peer, id, "ignoring an empty knock");
        return;
    }
    // The table stays locked while the route is checked, so that a serve in between sees
    // the knock (see `answer_early_knock`).
    let mut table = lock(&broker.inner.table);
    if mux.is_routed(id) {
        drop(table);
        acknowledge(broker, mux, id);
        return;
    }
    // Not served yet: kept until it is (as go-plugin does), within the same limits as
    // unclaimed connection infos; the dialler gives up after its own timeout.
    if table.knock(id, broker::now()) == Stored::Full {
        drop(table);
        let warning = &broker.inner.warnings.knocks_full;
        if let Admit::Log { held } = warning.admit(Instant::now()) {
            tracing::warn!(
                peer,
                id,
                limit = MAX_UNCLAIMED,
                "{}{}",
                warning.what(),
                AndMore(held)
            );
        }
    }
}

/// A knock for `id` (`ack` false) or its acknowledgement (`ack` true).
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
    use std::time::Duration;

    use tether_proto::handshake::Address;
    use tokio_stream::StreamExt as _;

    use super::*;
    use crate::accept::AcceptOptions;
    use crate::grpc_broker::config::GrpcBrokerConfig;
    use crate::grpc_broker::setup::ListenOn;

    fn broker(ttl: Duration) -> GrpcBroker {
        let config = GrpcBrokerConfig::new()
            .unclaimed_ttl(ttl)
            .dial_timeout(Duration::from_secs(1));
        GrpcBroker::new("the host", config)
    }

    #[tokio::test]
    async fn a_multiplexed_knock_that_comes_before_the_id_is_served_is_answered_once_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("main.sock");
        let listener = Listener::Unix(tokio::net::UnixListener::bind(&path).unwrap());
        let plugin_mux = Mux::new();
        let _main = plugin_mux.serve_first_connection(listener, AcceptOptions::new(None));
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
        while !lock(&plugin.inner.table).has_knock(3) {
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
        assert_eq!(lock(&plugin.inner.table).knock_count(), 0);
    }
}
