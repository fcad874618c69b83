//! The network policy per plugin (issue 11, item 8), tried by a real probe plugin: without
//! network (the default) it cannot reach a TCP or UDP listener the test opens on 127.0.0.1 —
//! in a world or a network namespace of its own where the host may make one, and with the
//! seccomp fallback — while the plugin protocol (a unix socket) keeps working; with `host` it
//! can.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::net::{TcpListener, UdpSocket};

use tether_broker::confine::{
    NamespacesMode, NetworkMechanism, NetworkMode, WorldMechanism, network_namespaces_available,
};
use tether_broker::error::{AddressProblem, StartErrorKind};
use tether_broker::{Confinement, HandshakeConfig, PluginClient, SandboxMode};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};

const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");
const BAD_HANDSHAKE: &str = env!("CARGO_BIN_EXE_bad-handshake");

/// A TCP and a UDP socket on 127.0.0.1, non-blocking, and their addresses.
fn listeners() -> ((TcpListener, String), (UdpSocket, String)) {
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let (t, u) = (tcp.local_addr().unwrap(), udp.local_addr().unwrap());
    ((tcp, t.to_string()), (udp, u.to_string()))
}

async fn start(
    dir: &std::path::Path,
    mode: NetworkMode,
    namespace: bool,
    sandbox: SandboxMode,
) -> PluginClient {
    PluginClient::builder(PROBE)
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .current_dir(dir)
        .confinement(
            Confinement::default()
                .sandbox(sandbox)
                .network(mode)
                .network_namespace(namespace),
        )
        .start()
        .await
        .unwrap()
}

async fn get(plugin: &PluginClient, key: &str) -> String {
    let value = KvClient::new(plugin.channel())
        .get(GetRequest { key: key.into() })
        .await
        .unwrap_or_else(|status| panic!("{key}: {status:?}"))
        .into_inner()
        .value;
    String::from_utf8(value).unwrap()
}

async fn udp_send(plugin: &PluginClient, address: &str) -> Result<(), tonic::Status> {
    KvClient::new(plugin.channel())
        .put(PutRequest {
            key: format!("udp-send:{address}"),
            value: b"tether-udp".to_vec(),
        })
        .await
        .map(|_| ())
}

#[tokio::test]
async fn a_plugin_without_network_cannot_reach_a_loopback_listener_with_either_mechanism() {
    let ((tcp, tcp_addr), (udp, udp_addr)) = listeners();
    let dir = tempfile::tempdir().unwrap();
    // With the sandbox off, Landlock's TCP rules are gone: the mechanism alone refuses.
    let cases = [true, false].map(|ns| [SandboxMode::Enforce, SandboxMode::Off].map(|s| (ns, s)));
    for (namespace, sandbox) in cases.into_iter().flatten() {
        let plugin = start(dir.path(), NetworkMode::None, namespace, sandbox).await;
        // A world has a network namespace of its own, whatever `network_namespace` says.
        let in_world = plugin.world_mechanism() == WorldMechanism::Namespaces;
        let expected = if (namespace && network_namespaces_available()) || in_world {
            NetworkMechanism::Namespace
        } else {
            NetworkMechanism::Seccomp
        };
        let connect = get(&plugin, &format!("tcp-connect:{tcp_addr}")).await;
        assert_ne!(connect, "ok", "{expected}: the plugin reached {tcp_addr}");
        assert_eq!(plugin.network(), NetworkMode::None);
        assert_eq!(plugin.network_mechanism(), Some(expected));
        let listen = get(&plugin, "tcp-listen:127.0.0.1:0").await;
        // In an empty namespace of its own a listener is nobody's to reach, so only Landlock
        // (sandbox on, without a world: in a world a TCP plugin serves on its own loopback)
        // or the seccomp mechanism refuses to make one.
        if expected == NetworkMechanism::Seccomp || (sandbox != SandboxMode::Off && !in_world) {
            assert_ne!(listen, "ok", "{expected}: the plugin could listen on TCP");
        }
        // A datagram to 127.0.0.1 goes to its own loopback in a world (and is lost there);
        // without one, the mechanism refuses to send it. Either way nothing arrives (below).
        let sent = udp_send(&plugin, &udp_addr).await;
        assert!(
            sent.is_err() || in_world,
            "{expected}: the plugin could send UDP"
        );
        eprintln!(
            "{expected}, sandbox {sandbox}, world {}: tcp-connect {connect}, tcp-listen {listen}, udp {:?}",
            plugin.world_mechanism(),
            sent.map_err(|e| e.message().to_owned())
        );
        // Nothing arrived (the plugin's calls have all returned).
        assert!(
            tcp.accept()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock)
        );
        let mut buf = [0_u8; 64];
        assert!(
            udp.recv(&mut buf)
                .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock)
        );
        // The plugin protocol, over its unix socket, is unaffected: these calls went through.
        plugin.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn a_plugin_with_the_host_network_reaches_the_loopback_listener() {
    let ((tcp, tcp_addr), (udp, udp_addr)) = listeners();
    let dir = tempfile::tempdir().unwrap();
    let plugin = start(dir.path(), NetworkMode::Host, true, SandboxMode::Enforce).await;
    assert_eq!(plugin.network_mechanism(), None);
    assert_eq!(get(&plugin, &format!("tcp-connect:{tcp_addr}")).await, "ok");
    assert!(tcp.accept().is_ok(), "the connection is in the backlog");
    udp_send(&plugin, &udp_addr).await.unwrap();
    let mut buf = [0_u8; 64];
    let n = udp.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"tether-udp");
    plugin.shutdown().await.unwrap();
}

/// Without a world (the fallback): a TCP plugin under no network could not be reached. (In a
/// world it serves on its own loopback: `interop_python.rs`.)
#[tokio::test]
async fn a_tcp_handshake_under_no_network_is_refused_with_what_to_change() {
    let err = PluginClient::builder(BAD_HANDSHAKE)
        .arg("tcp")
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .namespaces(NamespacesMode::Off)
        .plaintext()
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err.kind(),
            StartErrorKind::Address {
                problem: AddressProblem::TcpWithoutNetwork,
                ..
            }
        ),
        "{err}"
    );
    let text = err.to_string();
    assert!(text.contains("network = \"host\""), "{text}");
}

#[tokio::test]
async fn plugins_started_one_after_another_never_share_a_network_namespace() {
    if !network_namespaces_available() {
        eprintln!("skipped: the host may not make network namespaces (not root)");
        return;
    }
    // The sandbox off leaves Landlock's scoping of abstract sockets out: only the namespaces
    // keep the plugins apart. The host makes each launch's namespace ahead of time
    // (NETWORK_NAMESPACE_RESERVE), so the later plugins enter ones made while the earlier
    // started.
    let dir = tempfile::tempdir().unwrap();
    let mut plugins = Vec::new();
    for i in 0..3 {
        let plugin = start(dir.path(), NetworkMode::None, true, SandboxMode::Off).await;
        assert_eq!(
            plugin.network_mechanism(),
            Some(NetworkMechanism::Namespace)
        );
        let name = format!("tether-netns-test-{}-{i}", std::process::id());
        assert_eq!(get(&plugin, &format!("abstract-listen:{name}")).await, "ok");
        assert_eq!(
            get(&plugin, &format!("abstract-connect:{name}")).await,
            "ok",
            "a plugin reaches its own abstract socket"
        );
        plugins.push((plugin, name));
    }
    for (i, (plugin, _)) in plugins.iter().enumerate() {
        for (j, (_, name)) in plugins.iter().enumerate() {
            if i != j {
                assert_eq!(
                    get(plugin, &format!("abstract-connect:{name}")).await,
                    "ECONNREFUSED",
                    "plugin {i} reached plugin {j}'s abstract socket"
                );
            }
        }
    }
    // Nor does the host's namespace hold them.
    for (_, name) in &plugins {
        assert_eq!(tether_tests::escape::abstract_connect(name), "ECONNREFUSED");
    }
    for (plugin, _) in plugins {
        plugin.shutdown().await.unwrap();
    }
}
