//! The example plugins tested as a plugin author would with `tether-sdk-test`: the counter's
//! callback in-process against a fake host (broker id, host service, none), and the built
//! binaries launched through `tether_broker` and shut down without leaving anything behind.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::time::{Duration, Instant};

use tether_examples::counter::add_helper_server::{AddHelper, AddHelperServer};
use tether_examples::counter::counter_client::CounterClient;
use tether_examples::counter::counter_server::CounterServer;
use tether_examples::counter::{GetRequest, PutRequest, SumRequest, SumResponse};
use tether_examples::counter_service::FileCounter;
use tether_sdk_test::{Launched, TestHost};
use tonic::{Request, Response, Status};

/// The host's side of the callback: adds, and counts the calls.
#[derive(Clone, Default)]
struct Adder(std::sync::Arc<std::sync::atomic::AtomicU32>);

#[tonic::async_trait]
impl AddHelper for Adder {
    async fn sum(&self, request: Request<SumRequest>) -> Result<Response<SumResponse>, Status> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let SumRequest { a, b } = request.into_inner();
        Ok(Response::new(SumResponse { r: a + b }))
    }
}

fn put(add_server: u32, key: &str, value: i64) -> PutRequest {
    PutRequest {
        add_server,
        key: key.into(),
        value,
    }
}

#[tokio::test]
async fn the_counter_adds_through_the_callback_the_host_serves_on_the_id_it_sent() {
    let work = tempfile::tempdir().unwrap();
    let host = TestHost::new().unwrap();
    let counter = FileCounter::new(host.plugin_broker(), work.path());
    let plugin = host
        .add_service(CounterServer::new(counter))
        .start()
        .await
        .unwrap();
    let adder = Adder::default();
    let broker = plugin.host_broker();
    let mut client = CounterClient::new(plugin.channel());
    // As go-plugin's host does: a fresh id per call (each announcement is dialled once).
    for value in [5, 7] {
        let id = broker.next_id();
        let _served = broker
            .accept_and_serve(id, AddHelperServer::new(adder.clone()))
            .await
            .unwrap();
        client.put(put(id, "c", value)).await.unwrap();
    }
    let got = client.get(GetRequest { key: "c".into() }).await.unwrap();
    assert_eq!(got.into_inner().value, 12);
    assert_eq!(adder.0.load(std::sync::atomic::Ordering::Relaxed), 2);
    plugin.shutdown().await;
}

#[tokio::test]
async fn the_counter_reaches_a_host_service_without_an_id() {
    let work = tempfile::tempdir().unwrap();
    let host = TestHost::new()
        .unwrap()
        .host_service(AddHelperServer::new(Adder::default()));
    let counter = FileCounter::new(host.plugin_broker(), work.path());
    let plugin = host
        .add_service(CounterServer::new(counter))
        .start()
        .await
        .unwrap();
    let mut client = CounterClient::new(plugin.channel());
    client.put(put(0, "h", 30)).await.unwrap();
    let got = client.get(GetRequest { key: "h".into() }).await.unwrap();
    assert_eq!(got.into_inner().value, 30);
}

#[tokio::test]
async fn without_host_services_the_counter_fails_at_once_saying_the_host_serves_none() {
    let work = tempfile::tempdir().unwrap();
    let host = TestHost::new().unwrap();
    let counter = FileCounter::new(host.plugin_broker(), work.path());
    let plugin = host
        .add_service(CounterServer::new(counter))
        .start()
        .await
        .unwrap();
    let began = Instant::now();
    let status = CounterClient::new(plugin.channel())
        .put(put(0, "h", 1))
        .await
        .unwrap_err();
    assert!(
        began.elapsed() < Duration::from_secs(1),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert!(
        status.message().contains("serves no host services"),
        "{}",
        status.message()
    );
}

#[tokio::test]
async fn the_launched_counter_plugin_fails_at_once_without_host_services_and_leaves_nothing() {
    let work = tempfile::tempdir().unwrap();
    let builder = tether_sdk_test::plugin(
        env!("CARGO_BIN_EXE_counter-plugin"),
        "BASIC_PLUGIN",
        "hello",
    )
    .current_dir(work.path());
    let plugin = Launched::start(builder).await.unwrap();
    let began = Instant::now();
    let status = CounterClient::new(plugin.channel())
        .put(put(0, "h", 1))
        .await
        .unwrap_err();
    assert!(
        began.elapsed() < Duration::from_secs(1),
        "{:?}",
        began.elapsed()
    );
    assert!(
        status.message().contains("serves no host services"),
        "{}",
        status.message()
    );
    plugin.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_launched_counter_plugin_calls_back_and_shuts_down_leaving_nothing_behind() {
    let work = tempfile::tempdir().unwrap();
    for multiplex in [false, true] {
        let builder = tether_sdk_test::plugin(
            env!("CARGO_BIN_EXE_counter-plugin"),
            "BASIC_PLUGIN",
            "hello",
        )
        .current_dir(work.path())
        .multiplex(multiplex);
        let plugin = Launched::start(builder).await.unwrap();
        let broker = plugin.client().broker();
        let id = broker.next_id();
        let served = broker
            .accept_and_serve(id, AddHelperServer::new(Adder::default()))
            .await
            .unwrap();
        CounterClient::new(plugin.channel())
            .put(put(id, "c", 21))
            .await
            .unwrap();
        drop(served);
        plugin.shutdown().await.unwrap();
    }
    let total = std::fs::read_to_string(work.path().join("kv_c")).unwrap();
    assert_eq!(total, "{\"Value\":42}");
}
