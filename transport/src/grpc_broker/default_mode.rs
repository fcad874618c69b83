//! go-plugin's default broker mode: each served id gets its own listening socket, announced
//! to the peer as a `ConnInfo{service_id, network, address}`; a dial waits for that
//! announcement, checks the address against the [`AddressPolicy`](super::AddressPolicy) and
//! connects.

use std::sync::Arc;
use std::time::Instant;

use tether_proto::handshake::Address;
use tether_proto::plugin::ConnInfo;
use tonic::transport::Channel;

use super::broker::{self, GrpcBroker};
use super::served::Endpoint;
use super::setup::{BrokerSetup, ListenOn};
use super::table::{Claim, MAX_UNCLAIMED, Stored};
use crate::accept::Listener;
use crate::bind;
use crate::dial;
use crate::error::GrpcBrokerError;
use crate::internal::lock;
use crate::repeated::{Admit, AndMore};

/// A new listener for `id` as `listen` says, the address to announce, and the socket file to
/// remove when serving ends.
pub(super) fn listen(
    broker: &GrpcBroker,
    listen: &ListenOn,
    id: u32,
) -> Result<(Listener, Address, Option<Endpoint>), GrpcBrokerError> {
    let bind_error = |source| GrpcBrokerError::Bind {
        peer: broker.inner.peer.clone(),
        id,
        source,
    };
    match listen {
        ListenOn::Unix(dir) | ListenOn::UnixSeenAs { dir, .. } => {
            let bound = match listen {
                ListenOn::UnixSeenAs { binder, .. } => bind::unix_in_with(dir, binder),
                _ => bind::unix_in(dir),
            };
            let (listener, path) = bound.map_err(bind_error)?;
            let announced = match (listen, path.file_name()) {
                (ListenOn::UnixSeenAs { announced_dir, .. }, Some(name)) => {
                    announced_dir.join(name)
                }
                _ => path.to_path_buf(),
            };
            let address = Address::Unix(announced);
            Ok((
                Listener::Unix(listener),
                address,
                Some(Endpoint::Socket(path)),
            ))
        }
        ListenOn::Tcp { min, max } => {
            let listener = bind::tcp_in_range(*min, *max).map_err(bind_error)?;
            let address = Address::Tcp(listener.local_addr().map_err(bind_error)?);
            Ok((Listener::Tcp(listener), address, None))
        }
    }
}

/// Tells the peer that `id` is served at `address`.
pub(super) fn announce(
    broker: &GrpcBroker,
    id: u32,
    address: &Address,
) -> Result<(), GrpcBrokerError> {
    announce_quietly(broker, id, address)?;
    tracing::debug!(peer = broker.inner.peer, id, %address, "serving a brokered id");
    Ok(())
}

/// [`announce`] without the log line (for the periodic re-announcements).
pub(super) fn announce_quietly(
    broker: &GrpcBroker,
    id: u32,
    address: &Address,
) -> Result<(), GrpcBrokerError> {
    broker.send(ConnInfo {
        service_id: id,
        network: address.network().to_owned(),
        address: address.to_string(),
        knock: None,
    })
}

/// Connects to the peer's `id`: waits for its `ConnInfo`, checks the address, connects with
/// the pinned TLS identities.
pub(super) async fn dial(
    broker: &GrpcBroker,
    setup: &BrokerSetup,
    id: u32,
) -> Result<Channel, GrpcBrokerError> {
    let info = wait_conn_info(broker, id).await?;
    let peer = || broker.inner.peer.clone();
    let bad = |reason: String| GrpcBrokerError::BadAddress {
        peer: peer(),
        id,
        address: format!("{}:{}", info.network, info.address),
        reason,
    };
    let address = Address::parse(&info.network, &info.address).map_err(|e| bad(e.to_string()))?;
    let target = (setup.policy)(&address).map_err(bad)?;
    let target_text = target.to_string();
    dial::connect(
        target,
        setup.tls.as_ref().map(|t| Arc::clone(&t.client)),
        broker.alive(),
        broker.inner.config.connect_timeout,
    )
    .await
    .map_err(|source| GrpcBrokerError::Connect {
        peer: peer(),
        id,
        target: target_text,
        source,
    })
}

/// Stores a `ConnInfo` from the peer or hands it to the dials waiting for it.
pub(super) fn receive(broker: &GrpcBroker, info: ConnInfo) {
    let id = info.service_id;
    if lock(&broker.inner.table).arrive(info, broker::now()) == Stored::Full {
        let warning = &broker.inner.warnings.unclaimed_full;
        if let Admit::Log { held } = warning.admit(Instant::now()) {
            tracing::warn!(
                peer = broker.inner.peer,
                id,
                limit = MAX_UNCLAIMED,
                "{}{}",
                warning.what(),
                AndMore(held)
            );
        }
    }
}

/// The peer's `ConnInfo` for `id`: one that already arrived, or the next one, waiting at most
/// the dial timeout.
async fn wait_conn_info(broker: &GrpcBroker, id: u32) -> Result<ConnInfo, GrpcBrokerError> {
    let claim = lock(&broker.inner.table).claim(id, broker::now());
    let rx = match claim {
        Claim::Ready(info) => return Ok(info),
        Claim::Wait(rx) => rx,
    };
    let timeout = broker.inner.config.dial_timeout;
    let mut closed = broker.inner.closed.subscribe();
    tokio::select! {
        received = tokio::time::timeout(timeout, rx) => match received {
            Ok(Ok(info)) => Ok(info),
            // The sender was dropped: the broker was closed.
            Ok(Err(_)) => Err(broker.closed_error()),
            Err(_) => Err(GrpcBrokerError::NoConnInfo {
                peer: broker.inner.peer.clone(),
                id,
                timeout,
                stream: broker.peer_stream(),
            }),
        },
        _ = closed.wait_for(|c| *c) => Err(broker.closed_error()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::grpc_broker::config::GrpcBrokerConfig;

    fn info(id: u32) -> ConnInfo {
        ConnInfo {
            service_id: id,
            network: "unix".into(),
            address: format!("/tmp/x/{id}.sock"),
            knock: None,
        }
    }

    fn broker(ttl: Duration) -> GrpcBroker {
        let config = GrpcBrokerConfig::new()
            .unclaimed_ttl(ttl)
            .dial_timeout(Duration::from_secs(1));
        GrpcBroker::new("the host", config)
    }

    #[tokio::test(start_paused = true)]
    async fn a_conn_info_that_arrived_before_the_dial_is_claimed_within_its_ttl() {
        let broker = broker(Duration::from_secs(5));
        receive(&broker, info(3));
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(wait_conn_info(&broker, 3).await.unwrap().service_id, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unclaimed_conn_info_expires_after_its_ttl() {
        let broker = broker(Duration::from_secs(5));
        receive(&broker, info(3));
        tokio::time::advance(Duration::from_secs(6)).await;
        let err = wait_conn_info(&broker, 3).await.unwrap_err();
        assert!(
            matches!(err, GrpcBrokerError::NoConnInfo { id: 3, .. }),
            "{err:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn expired_entries_are_forgotten_when_new_ones_arrive() {
        let broker = broker(Duration::from_secs(5));
        for id in 0..10 {
            receive(&broker, info(id));
        }
        tokio::time::advance(Duration::from_secs(6)).await;
        receive(&broker, info(100));
        assert_eq!(lock(&broker.inner.table).len(), 1);
    }

    #[tokio::test]
    async fn unclaimed_entries_are_capped() {
        let broker = broker(Duration::from_secs(60));
        for id in 0..(MAX_UNCLAIMED as u32 + 10) {
            receive(&broker, info(id));
        }
        assert_eq!(lock(&broker.inner.table).len(), MAX_UNCLAIMED);
    }

    #[tokio::test]
    async fn a_waiting_dial_gets_the_conn_info_when_it_arrives() {
        let broker = broker(Duration::from_secs(5));
        let waiting = tokio::spawn({
            let broker = broker.clone();
            async move { wait_conn_info(&broker, 7).await }
        });
        // Wait until the dial has registered itself, then deliver.
        while !lock(&broker.inner.table).has_entry(7) {
            tokio::task::yield_now().await;
        }
        receive(&broker, info(7));
        assert_eq!(waiting.await.unwrap().unwrap().address, "/tmp/x/7.sock");
    }
}
