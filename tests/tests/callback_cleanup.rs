//! Nothing leaks from callbacks: brokered sockets live in the launch's private directory and go
//! with their handles, and after shutdown the host has the file descriptors it had before.
//! (One test in this binary, so no other test's descriptors interfere.)

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;

use tether_broker::{HandshakeConfig, PluginClient};
use tether_examples::adder::Adder;
use tether_examples::counter::add_helper_server::AddHelperServer;
use tether_examples::counter::counter_client::CounterClient;
use tether_examples::counter::{GetRequest, PutRequest};
use tether_tests::bins;
use tether_tests::procs;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The sockets in `dir` (a plugin in a world whose working directory lies under `/tmp` also
/// has that directory's mount point in its private directory, the world's `/tmp`).
fn entries(dir: &Path) -> usize {
    use std::os::unix::fs::FileTypeExt as _;
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_socket())
        .count()
}

#[tokio::test]
async fn callbacks_leave_no_sockets_descriptors_or_processes_behind() {
    let work = tempfile::tempdir().unwrap();
    let launch = || {
        PluginClient::builder(bins::COUNTER_PLUGIN.path())
            .current_dir(work.path())
            .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
            .start()
    };
    // A first launch warms up lazily opened descriptors (runtime, resolver, …).
    launch().await.unwrap().shutdown().await.unwrap();
    let fds_before = open_fds();

    let plugin = launch().await.unwrap();
    let tether_broker::launch::Address::Unix(socket) = plugin.address().clone() else {
        panic!("the plugin listens on a unix socket");
    };
    let private_dir = socket.parent().unwrap().to_owned();
    assert_eq!(entries(&private_dir), 1, "only the plugin's socket");

    let broker = plugin.broker();
    let mut counter = CounterClient::new(plugin.channel());
    for value in 1..=20 {
        let id = broker.next_id();
        let served = broker
            .accept_and_serve(id, AddHelperServer::new(Adder))
            .await
            .unwrap();
        assert_eq!(
            entries(&private_dir),
            2,
            "the brokered socket is in the private directory"
        );
        counter
            .put(PutRequest {
                add_server: id,
                key: "c".into(),
                value,
            })
            .await
            .unwrap();
        served.stop().await;
        assert_eq!(
            entries(&private_dir),
            1,
            "the brokered socket is gone with its handle"
        );
    }
    let total = counter
        .get(GetRequest { key: "c".into() })
        .await
        .unwrap()
        .into_inner()
        .value;
    assert_eq!(total, (1..=20).sum::<i64>());

    drop(counter);
    plugin.shutdown().await.unwrap();
    assert!(!private_dir.exists(), "the private directory is removed");
    assert!(procs::in_dir(work.path()).is_empty());
    assert_eq!(open_fds(), fds_before, "descriptors leaked");
}
