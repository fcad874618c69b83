#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.
//! Two brokers wired to each other in memory, as a host and a plugin are over
//! `plugin.GRPCBroker/StartStream`: serving, dialling, timeouts, clean-up.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tether_proto::handshake::Address;
use tether_proto::tls::Identity;
use tether_transport::{
    AcceptOptions, BrokerMode, BrokerSetup, BrokerTls, GrpcBroker, GrpcBrokerConfig,
    GrpcBrokerError, ListenOn, Listener, Mux, Target,
};
use tokio_stream::StreamExt as _;
use tonic_health::ServingStatus;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

fn setup(tls: Option<(&Identity, &Identity)>, dir: &Path) -> BrokerSetup {
    let allowed = dir.to_owned();
    BrokerSetup {
        tls: tls.map(|(own, peer)| BrokerTls::new(own, peer.cert_der().clone()).unwrap()),
        listen: ListenOn::Unix(dir.to_owned()),
        policy: Arc::new(move |address: &Address| match address {
            Address::Unix(path) if path.starts_with(&allowed) => Ok(Target::Unix(path.clone())),
            _ => Err(format!("not inside {}", allowed.display())),
        }),
        mux: None,
    }
}

/// A host-side and a plugin-side broker whose streams are connected.
fn pair(tls: bool, dir: &Path, config: GrpcBrokerConfig) -> (GrpcBroker, GrpcBroker) {
    let host = GrpcBroker::new("plugin `test`", config.clone());
    let plugin = GrpcBroker::new("the host", config);
    if tls {
        let (h, p) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        host.connect(setup(Some((&h, &p)), dir));
        plugin.connect(setup(Some((&p, &h)), dir));
    } else {
        host.connect(setup(None, dir));
        plugin.connect(setup(None, dir));
    }
    let to_plugin = host.take_outbound().unwrap().map(Ok);
    let to_host = plugin.take_outbound().unwrap().map(Ok);
    let (h, p) = (host.clone(), plugin.clone());
    tokio::spawn(async move { p.run_inbound(to_plugin).await });
    tokio::spawn(async move { h.run_inbound(to_host).await });
    (host, plugin)
}

/// A host-side and a plugin-side broker over one multiplexed unix socket connection (made in
/// `dir`, like a plugin's main socket); their broker streams are connected in memory.
async fn mux_pair(tls: bool, dir: &Path, config: GrpcBrokerConfig) -> (GrpcBroker, GrpcBroker) {
    let path = dir.join("main.sock");
    let listener = Listener::Unix(tokio::net::UnixListener::bind(&path).unwrap());
    let plugin_mux = Mux::new();
    // The plugin's main server is not needed here; its connections are simply dropped.
    let _main = plugin_mux.serve_first_connection(listener, AcceptOptions::new(None));
    let host_mux = Mux::client(tokio::net::UnixStream::connect(&path).await.unwrap());
    let host = GrpcBroker::new("plugin `test`", config.clone());
    let plugin = GrpcBroker::new("the host", config);
    let ids = tls.then(|| (Identity::generate().unwrap(), Identity::generate().unwrap()));
    let mut host_setup = setup(ids.as_ref().map(|(h, p)| (h, p)), dir);
    host_setup.mux = Some(host_mux);
    let mut plugin_setup = setup(ids.as_ref().map(|(h, p)| (p, h)), dir);
    plugin_setup.mux = Some(plugin_mux);
    host.connect(host_setup);
    plugin.connect(plugin_setup);
    let to_plugin = host.take_outbound().unwrap().map(Ok);
    let to_host = plugin.take_outbound().unwrap().map(Ok);
    let (h, p) = (host.clone(), plugin.clone());
    tokio::spawn(async move { p.run_inbound(to_plugin).await });
    tokio::spawn(async move { h.run_inbound(to_host).await });
    (host, plugin)
}

async fn health()
-> tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health> {
    let (reporter, service) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("callback", ServingStatus::Serving)
        .await;
    service
}

async fn check(channel: tether_transport::telemetry::TracedChannel) -> Result<i32, tonic::Status> {
    let response = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: "callback".into(),
        })
        .await?;
    Ok(response.into_inner().status)
}

fn sockets_in(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

#[tokio::test]
async fn a_service_served_by_either_side_is_reached_by_the_other_over_mutual_tls() {
    let dir = tempfile::tempdir().unwrap();
    let (host, plugin) = pair(true, dir.path(), GrpcBrokerConfig::new());

    let id = host.next_id();
    let _served = host.accept_and_serve(id, health().await).await.unwrap();
    let channel = plugin.dial(id).await.unwrap();
    assert_eq!(check(channel).await.unwrap(), ServingStatus::Serving as i32);

    let id = plugin.next_id();
    let _served = plugin.accept_and_serve(id, health().await).await.unwrap();
    let channel = host.dial(id).await.unwrap();
    assert_eq!(check(channel).await.unwrap(), ServingStatus::Serving as i32);
}

#[tokio::test]
async fn plaintext_brokers_serve_and_dial_too() {
    let dir = tempfile::tempdir().unwrap();
    let (host, plugin) = pair(false, dir.path(), GrpcBrokerConfig::new());
    let id = plugin.next_id();
    let _served = plugin.accept_and_serve(id, health().await).await.unwrap();
    let channel = host.dial(id).await.unwrap();
    assert_eq!(check(channel).await.unwrap(), ServingStatus::Serving as i32);
}

#[tokio::test]
async fn each_side_numbers_its_own_ids_from_one() {
    let dir = tempfile::tempdir().unwrap();
    let (host, plugin) = pair(false, dir.path(), GrpcBrokerConfig::new());
    assert_eq!((host.next_id(), host.next_id()), (1, 2));
    assert_eq!(plugin.next_id(), 1);
}

#[tokio::test]
async fn a_dial_for_an_id_nobody_serves_fails_after_the_dial_timeout_naming_the_id() {
    let dir = tempfile::tempdir().unwrap();
    let config = GrpcBrokerConfig::new().dial_timeout(Duration::from_millis(50));
    let (_host, plugin) = pair(true, dir.path(), config);
    let err = plugin.dial(42).await.unwrap_err();
    assert!(
        matches!(err, GrpcBrokerError::NoConnInfo { id: 42, timeout, .. } if timeout == Duration::from_millis(50)),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("broker id 42"), "{message}");
    assert!(message.contains("accept_and_serve"), "{message}");
}

#[tokio::test]
async fn dropping_the_served_handle_removes_the_socket_and_refuses_new_connections() {
    let dir = tempfile::tempdir().unwrap();
    let (host, plugin) = pair(true, dir.path(), GrpcBrokerConfig::new());
    let id = host.next_id();
    let served = host.accept_and_serve(id, health().await).await.unwrap();
    assert_eq!(sockets_in(dir.path()), 1);
    let channel = plugin.dial(id).await.unwrap();
    assert!(check(channel).await.is_ok());
    served.stop().await;
    assert_eq!(sockets_in(dir.path()), 0);

    // A second announcement under a new id is needed to reach the service again.
    let id = host.next_id();
    drop(host.accept_and_serve(id, health().await).await.unwrap());
    assert_eq!(sockets_in(dir.path()), 0);
    let err = plugin.dial(id).await.unwrap_err();
    assert!(matches!(err, GrpcBrokerError::Connect { .. }), "{err:?}");
}

#[tokio::test]
async fn an_announced_address_outside_the_policy_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let host = GrpcBroker::new("plugin `test`", GrpcBrokerConfig::new());
    let plugin = GrpcBroker::new("the host", GrpcBrokerConfig::new());
    // The host listens somewhere the plugin's policy does not allow.
    host.connect(setup(None, elsewhere.path()));
    plugin.connect(setup(None, dir.path()));
    let to_plugin = host.take_outbound().unwrap().map(Ok);
    let p = plugin.clone();
    tokio::spawn(async move { p.run_inbound(to_plugin).await });

    let id = host.next_id();
    let _served = host.accept_and_serve(id, health().await).await.unwrap();
    let err = plugin.dial(id).await.unwrap_err();
    assert!(
        matches!(err, GrpcBrokerError::BadAddress { id: 1, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn closing_the_broker_stops_served_ids_and_fails_waiting_dials() {
    let dir = tempfile::tempdir().unwrap();
    let (host, plugin) = pair(true, dir.path(), GrpcBrokerConfig::new());
    let id = host.next_id();
    host.accept_and_serve(id, health().await)
        .await
        .unwrap()
        .detach();
    assert_eq!(sockets_in(dir.path()), 1);

    let waiting = tokio::spawn({
        let host = host.clone();
        async move { host.dial(99).await }
    });
    tokio::task::yield_now().await;
    host.close();
    let err = waiting.await.unwrap().unwrap_err();
    assert!(matches!(err, GrpcBrokerError::Closed { .. }), "{err:?}");
    assert!(matches!(
        host.accept_and_serve(host.next_id(), health().await).await,
        Err(GrpcBrokerError::Closed { .. })
    ));
    assert_eq!(sockets_in(dir.path()), 0);
    drop(plugin);
}

#[tokio::test]
async fn a_broker_used_before_it_is_connected_says_so() {
    let broker = GrpcBroker::new("the host", GrpcBrokerConfig::new());
    let err = broker.dial(1).await.unwrap_err();
    assert!(
        matches!(err, GrpcBrokerError::NotConnected { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn host_services_are_reached_without_an_id_and_do_not_expire() {
    let dir = tempfile::tempdir().unwrap();
    let config = GrpcBrokerConfig::new().unclaimed_ttl(Duration::ZERO);
    let (host, plugin) = pair(true, dir.path(), config);
    host.serve_host_services(tonic::service::Routes::new(health().await))
        .await
        .unwrap();
    // An ordinary id announced now would already have expired (TTL zero); this one does not.
    let first = plugin.host_services().await.unwrap();
    assert_eq!(check(first).await.unwrap(), ServingStatus::Serving as i32);
    let again = plugin.host_services().await.unwrap();
    assert_eq!(check(again).await.unwrap(), ServingStatus::Serving as i32);
    // Per-call ids still work next to them, and are numbered from 1.
    let id = host.next_id();
    assert_eq!(id, 1);
    let _served = host.accept_and_serve(id, health().await).await.unwrap();
    assert!(check(plugin.dial(id).await.unwrap()).await.is_ok());
}

#[tokio::test]
async fn asking_for_host_services_a_host_does_not_serve_fails_with_the_dial_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let config = GrpcBrokerConfig::new().dial_timeout(Duration::from_millis(50));
    let (_host, plugin) = pair(true, dir.path(), config);
    let err = plugin.host_services().await.unwrap_err();
    assert!(
        matches!(
            err,
            GrpcBrokerError::NoConnInfo {
                id: tether_transport::HOST_SERVICES_ID,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn multiplexed_brokers_reach_each_other_over_mutual_tls_without_new_sockets() {
    let dir = tempfile::tempdir().unwrap();
    let (host, plugin) = mux_pair(true, dir.path(), GrpcBrokerConfig::new()).await;
    assert_eq!(host.mode(), BrokerMode::Multiplexed);
    assert_eq!(plugin.mode(), BrokerMode::Multiplexed);

    let id = host.next_id();
    let _served = host.accept_and_serve(id, health().await).await.unwrap();
    let channel = plugin.dial(id).await.unwrap();
    assert_eq!(check(channel).await.unwrap(), ServingStatus::Serving as i32);

    let id = plugin.next_id();
    let _served = plugin.accept_and_serve(id, health().await).await.unwrap();
    let channel = host.dial(id).await.unwrap();
    assert_eq!(check(channel).await.unwrap(), ServingStatus::Serving as i32);

    // Only the main socket: no broker listener was made.
    assert_eq!(sockets_in(dir.path()), 1);
}

#[tokio::test]
async fn a_multiplexed_dial_for_an_id_nobody_serves_fails_after_the_dial_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let config = GrpcBrokerConfig::new().dial_timeout(Duration::from_millis(100));
    let (host, _plugin) = mux_pair(true, dir.path(), config).await;
    let err = host.dial(42).await.unwrap_err();
    assert!(
        matches!(err, GrpcBrokerError::Connect { id: 42, .. }),
        "{err:?}"
    );
    let message = format!("{err}: {}", std::error::Error::source(&err).unwrap());
    assert!(message.contains("knock for broker id 42"), "{message}");
}

#[tokio::test]
async fn multiplexed_host_services_are_reached_without_an_id() {
    let dir = tempfile::tempdir().unwrap();
    let (host, plugin) = mux_pair(true, dir.path(), GrpcBrokerConfig::new()).await;
    host.serve_host_services(tonic::service::Routes::new(health().await))
        .await
        .unwrap();
    for _ in 0..2 {
        let channel = plugin.host_services().await.unwrap();
        assert_eq!(check(channel).await.unwrap(), ServingStatus::Serving as i32);
    }
    assert_eq!(sockets_in(dir.path()), 1);
}
