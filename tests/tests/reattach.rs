//! Reattaching to a plugin that is already running (go-plugin's reattach config, as JSON), with
//! a real Go go-plugin plugin and the tether KV plugin; a pid that is not the plugin is never
//! signalled.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use tether_broker::{ReattachConfig, ReattachedPlugin, launch::ReattachedOutcome};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};
use tether_tests::bins;
use tether_tests::peers::{self, GoPlugin};

/// Starts `plugin` by hand, as a debugger or test harness would (plaintext: reattach configs
/// carry no certificates), and returns it with the reattach JSON built from its handshake
/// line, in the form Terraform's `TF_REATTACH_PROVIDERS` uses.
fn start_by_hand(plugin: &Path, dir: &Path) -> (Child, String) {
    let (child, json, _) = start_by_hand_with(plugin, dir, None);
    (child, json)
}

/// Like [`start_by_hand`], passing `client_cert_pem` as `PLUGIN_CLIENT_CERT` (AutoMTLS); also
/// returns the handshake line.
fn start_by_hand_with(
    plugin: &Path,
    dir: &Path,
    client_cert_pem: Option<String>,
) -> (Child, String, String) {
    let mut command = Command::new(plugin);
    if let Some(pem) = client_cert_pem {
        command.env("PLUGIN_CLIENT_CERT", pem);
    }
    let mut child = command
        .env("BASIC_PLUGIN", "hello")
        .env("PLUGIN_PROTOCOL_VERSIONS", "1")
        .env("PLUGIN_UNIX_SOCKET_DIR", dir)
        .env("TMPDIR", dir)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let fields: Vec<&str> = line.trim().split('|').collect();
    assert_eq!(fields[4], "grpc", "{line}");
    let json = format!(
        r#"{{"Protocol":"grpc","ProtocolVersion":{},"Addr":{{"Network":"{}","String":"{}"}},"Pid":{},"Test":true}}"#,
        fields[1],
        fields[2],
        fields[3],
        child.id()
    );
    (child, json, line)
}

async fn reattach_put_get_and_end(plugin: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, json) = start_by_hand(plugin, dir.path());
    let config = ReattachConfig::from_json(&json).unwrap();
    assert_eq!(
        ReattachConfig::from_json(&config.to_json()).unwrap(),
        config
    );

    let plugin = ReattachedPlugin::connect(config, None).await.unwrap();
    assert!(plugin.pid_verified());
    let mut kv = KvClient::new(plugin.channel());
    kv.put(PutRequest {
        key: "k".into(),
        value: b"reattached".to_vec(),
    })
    .await
    .unwrap();
    let value = kv
        .get(GetRequest { key: "k".into() })
        .await
        .unwrap()
        .into_inner()
        .value;
    assert_eq!(value, b"reattached");
    let outcome = plugin.shutdown().await;
    assert_eq!(outcome, ReattachedOutcome::Graceful);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn a_running_tether_plugin_is_reattached_used_and_ended() {
    reattach_put_get_and_end(Path::new(bins::KV_PLUGIN.path())).await;
}

#[tokio::test]
async fn a_running_go_plugin_v1_8_is_reattached_used_and_ended() {
    let test = "a_running_go_plugin_v1_8_is_reattached_used_and_ended";
    if let Some(go) = peers::go_or_skip(GoPlugin::V18, test) {
        reattach_put_get_and_end(&go.plugin).await;
    }
}

#[tokio::test]
async fn a_pid_that_is_not_the_plugin_is_never_signalled() {
    let dir = tempfile::tempdir().unwrap();
    let (mut plugin, json) = start_by_hand(Path::new(bins::KV_PLUGIN.path()), dir.path());
    let mut bystander = Command::new("sleep").arg("30").spawn().unwrap();
    let mut config = ReattachConfig::from_json(&json).unwrap();
    config.pid = i32::try_from(bystander.id()).unwrap();

    let reattached = ReattachedPlugin::connect(config, None).await.unwrap();
    assert!(!reattached.pid_verified());
    assert_eq!(reattached.shutdown().await, ReattachedOutcome::NotVerified);
    assert!(
        bystander.try_wait().unwrap().is_none(),
        "the bystander was signalled"
    );
    // The shutdown request itself reached the real plugin.
    assert!(plugin.wait().unwrap().success());
    bystander.kill().unwrap();
    bystander.wait().unwrap();
}

#[tokio::test]
async fn a_running_plugin_is_reattached_over_mutual_tls_with_the_certificates_given() {
    let dir = tempfile::tempdir().unwrap();
    let identity = tether_proto::tls::Identity::generate().unwrap();
    let (mut child, json, line) = start_by_hand_with(
        Path::new(bins::KV_PLUGIN.path()),
        dir.path(),
        Some(identity.cert_pem()),
    );
    let handshake = tether_proto::handshake::Handshake::parse(line.trim().as_bytes()).unwrap();
    let plugin_cert = handshake
        .server_cert
        .expect("AutoMTLS handshake carries a certificate");
    let config = ReattachConfig::from_json(&json).unwrap();

    // Without the certificates the plugin refuses the connection.
    let plaintext = ReattachedPlugin::connect(config.clone(), None).await;
    let failed = match plaintext {
        Err(_) => true,
        Ok(p) => KvClient::new(p.channel())
            .get(GetRequest { key: "k".into() })
            .await
            .is_err(),
    };
    assert!(failed, "a plaintext client reached an AutoMTLS plugin");

    let tls = tether_broker::launch::ReattachTls {
        identity,
        plugin_cert,
    };
    let plugin = ReattachedPlugin::connect(config, Some(tls)).await.unwrap();
    let mut kv = KvClient::new(plugin.channel());
    kv.put(PutRequest {
        key: "k".into(),
        value: b"over tls".to_vec(),
    })
    .await
    .unwrap();
    assert_eq!(plugin.shutdown().await, ReattachedOutcome::Graceful);
    assert!(child.wait().unwrap().success());
}
