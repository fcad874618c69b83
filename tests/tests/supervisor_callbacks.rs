//! Callbacks from an unmodified go-plugin v1.8 plugin into a catalog host (`Supervisor`), in
//! both broker modes: go-plugin's `examples/bidirectional` counter plugin dials the broker id
//! its `Put` carries (`broker.Dial(add_server)`), so the host can hand it either a per-call id
//! it serves through `Lease::broker` (`AcceptAndServe` on the host, `Dial` in the plugin) or
//! the host-services id (4294967295, docs/PROTOCOL.md §10.1), where the host serves `AddHelper`
//! to every plugin.
//!
//! go-plugin forgets a connection info 5 s after it arrived (or after one dial used it); the
//! host-services id must still be reachable later and more than once. So the calls here come
//! [`LATE`] after launch — the wait is what is tested (no event says "5 s have passed"), bounded
//! and once per test — and the host-services id is dialled twice in a row.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::time::Duration;

use tether_broker::callbacks::{BrokerMode, HOST_SERVICES_ID};
use tether_broker::{Grants, Lease};
use tether_examples::adder::Adder;
use tether_examples::counter::add_helper_server::AddHelperServer;
use tether_examples::counter::counter_client::CounterClient;
use tether_examples::counter::{GetRequest, PutRequest};
use tether_tests::peers::{self, GoPlugin};
use tether_tests::world::{PluginSpec, World};

/// How long after the launch the first callback comes: twice go-plugin's hard-coded 5 s
/// connection-info lifetime, so that the host's first announcement of its host services has
/// long expired in the plugin.
const LATE: Duration = Duration::from_secs(10);

async fn put(lease: &Lease, key: &str, value: i64, add_server: u32) {
    lease
        .call(|channel| async move {
            CounterClient::new(channel)
                .put(PutRequest {
                    add_server,
                    key: key.to_owned(),
                    value,
                })
                .await
        })
        .await
        .unwrap_or_else(|e| panic!("put {value} through broker id {add_server}: {e}"));
}

async fn get(lease: &Lease, key: &str) -> i64 {
    lease
        .call(|channel| async move {
            CounterClient::new(channel)
                .get(GetRequest {
                    key: key.to_owned(),
                })
                .await
        })
        .await
        .unwrap()
        .value
}

/// Starts the Go counter plugin under a supervisor that serves `AddHelper` as a host service
/// (multiplexed when `multiplex`), waits [`LATE`], then adds through the host services twice and
/// through a per-call id served on the lease's broker once.
async fn a_go_plugin_calls_back_late(test: &str, multiplex: bool) {
    let Some(go) = peers::go_or_skip(GoPlugin::V18, test) else {
        return;
    };
    let world = World::new();
    world.add_plugin(&PluginSpec::new("counter", &go.counter_plugin));
    let supervisor = world
        .supervisor(Grants::new())
        .customize({
            let (delivery, run) = (world.delivery(), world.run());
            move |b| {
                b.delivery_dir(&delivery)
                    .private_dir_base(&run)
                    .multiplex(multiplex)
                    .host_service(AddHelperServer::new(Adder))
            }
        })
        .build();
    let lease = supervisor.acquire("counter").await.unwrap();
    let expected = if multiplex {
        BrokerMode::Multiplexed
    } else {
        BrokerMode::Default
    };
    assert_eq!(lease.broker().mode(), expected);

    tokio::time::sleep(LATE).await;
    put(&lease, "c", 5, HOST_SERVICES_ID).await;
    put(&lease, "c", 7, HOST_SERVICES_ID).await;

    let broker = lease.broker();
    let id = broker.next_id();
    let served = broker
        .accept_and_serve(id, AddHelperServer::new(Adder))
        .await
        .unwrap();
    put(&lease, "c", 30, id).await;
    drop(served);

    assert_eq!(get(&lease, "c").await, 42);
    drop(lease);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_go_plugin_v1_8_calls_a_supervisors_host_services_and_per_call_ids_10_s_after_launch() {
    a_go_plugin_calls_back_late(
        "a_go_plugin_v1_8_calls_a_supervisors_host_services_and_per_call_ids_10_s_after_launch",
        false,
    )
    .await;
}

#[tokio::test]
async fn a_multiplexed_go_plugin_v1_8_calls_a_supervisors_host_services_and_per_call_ids_10_s_after_launch()
 {
    a_go_plugin_calls_back_late(
        "a_multiplexed_go_plugin_v1_8_calls_a_supervisors_host_services_and_per_call_ids_10_s_after_launch",
        true,
    )
    .await;
}
