//! Interop with plugins written with the TypeScript SDK (`sdk-typescript/`, Node + grpc-js):
//!
//! - tether's `kv-host` and `counter-host` drive the TypeScript KV and counter plugins with
//!   AutoMTLS, in plaintext, with go-plugin's multiplexed broker (`--multiplex`) and through a
//!   host service (`--host-service`);
//! - go-plugin's own hosts drive them: v1.8 (AutoMTLS with its P-521 certificates, plaintext,
//!   and the multiplexed broker) and Debian's 1.0.1 (AutoMTLS and plaintext; the plugin dials
//!   1.0.1's callbacks with its own TLS, so they work under AutoMTLS too);
//! - the library host sees the plugin's own certificate and the negotiated broker mode, and
//!   `Shutdown` ends it with status 0; a plugin exits by itself when its host dies.
//!
//! The plugins run confined (tether's default sandbox) with no hand-written allowances: the
//! example hosts resolve the `node` runtime by themselves (`Runtime::Auto`, the program is
//! `node`), the library tests say `Runtime::Node` — what a catalog's `runtime = "node"` does.
//! Without Node or the SDK's dependencies the tests print why and pass as skipped, unless
//! `TETHER_REQUIRE_PEERS=1` (CI sets it): then they fail.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tether_broker::{HandshakeConfig, ShutdownOutcome};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};
use tether_tests::bins;
use tether_tests::example_host::ExampleHost;
use tether_tests::peers::{self, GoPlugin};
use tether_tests::procs;
use tether_tests::typescript::{self, NodePeer};
use tether_transport::BrokerMode;

/// How long a test waits for a plugin to exit after its host died.
const EXIT_DEADLINE: Duration = Duration::from_secs(10);

/// Runs `round_trip` with a TypeScript example under a tether example host, with `options`
/// before the subcommand (no sandbox allowances: the host resolves the `node` runtime).
fn tether_broker(host: &str, ts: &NodePeer, example: &str, options: &[&str]) -> ExampleHost {
    let program = Path::new(host);
    let command = ts.command(example);
    let host = if example == "kv" {
        ExampleHost::kv(program, command)
    } else {
        ExampleHost::counter(program, command)
    };
    host.options(options.iter().copied())
}

macro_rules! tether_broker_tests {
    ($($name:ident: $example:literal, $options:expr;)*) => {$(
        #[test]
        fn $name() {
            let Some(ts) = typescript::node_or_skip(stringify!($name)) else {
                return;
            };
            if $example == "kv" {
                tether_broker(bins::KV_HOST.path(), &ts, "kv", $options).kv_round_trip();
            } else {
                tether_broker(bins::COUNTER_HOST.path(), &ts, "counter", $options).counter_round_trip();
            }
        }
    )*};
}

tether_broker_tests! {
    kv_host_runs_the_typescript_kv_plugin_with_automtls: "kv", &[];
    kv_host_runs_the_typescript_kv_plugin_in_plaintext: "kv", &["--plaintext"];
    kv_host_runs_the_typescript_kv_plugin_multiplexed: "kv", &["--multiplex"];
    counter_host_and_the_typescript_counter_plugin_add_through_a_callback_with_automtls: "counter", &[];
    counter_host_and_the_typescript_counter_plugin_add_through_a_callback_in_plaintext: "counter", &["--plaintext"];
    counter_host_and_the_typescript_counter_plugin_add_through_a_multiplexed_callback: "counter", &["--multiplex"];
    the_typescript_counter_plugin_reaches_a_tether_broker_service_without_an_id: "counter", &["--host-service"];
    the_typescript_counter_plugin_reaches_a_host_service_over_the_multiplexed_connection: "counter", &["--host-service", "--multiplex"];
}

/// Runs a round trip under a go-plugin host with the plugin's `TMPDIR` in a fresh directory,
/// and checks that the plugin removed everything it made there (its socket directory, the
/// relay sockets of multiplexed dials).
fn go_host_round_trip(host: &Path, ts: &NodePeer, example: &str, options: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let command = ts.command_with_tmpdir(example, tmp.path());
    if example == "kv" {
        ExampleHost::kv(host, command)
            .options(options.iter().copied())
            .kv_round_trip();
    } else {
        ExampleHost::counter(host, command)
            .options(options.iter().copied())
            .counter_round_trip();
    }
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "the plugin left files behind: {left:?}");
}

macro_rules! go_host_tests {
    ($($name:ident: $variant:expr, $example:literal, $options:expr;)*) => {$(
        #[test]
        fn $name() {
            let Some(ts) = typescript::node_or_skip(stringify!($name)) else {
                return;
            };
            let Some(go) = peers::go_or_skip($variant, stringify!($name)) else {
                return;
            };
            let host = if $example == "kv" { &go.host } else { &go.counter_host };
            go_host_round_trip(host, &ts, $example, $options);
        }
    )*};
}

go_host_tests! {
    go_host_v1_8_runs_the_typescript_kv_plugin_with_automtls: GoPlugin::V18, "kv", &[];
    go_host_v1_8_runs_the_typescript_kv_plugin_in_plaintext: GoPlugin::V18, "kv", &["--plaintext"];
    go_host_v1_8_with_multiplexing_runs_the_typescript_kv_plugin: GoPlugin::V18, "kv", &["--multiplex"];
    go_host_v1_0_1_runs_the_typescript_kv_plugin_with_automtls: GoPlugin::V101, "kv", &[];
    go_host_v1_0_1_runs_the_typescript_kv_plugin_in_plaintext: GoPlugin::V101, "kv", &["--plaintext"];
    go_host_v1_8_serves_callbacks_to_the_typescript_counter_plugin_with_automtls: GoPlugin::V18, "counter", &[];
    go_host_v1_8_serves_callbacks_to_the_typescript_counter_plugin_in_plaintext: GoPlugin::V18, "counter", &["--plaintext"];
    go_host_v1_8_serves_multiplexed_callbacks_to_the_typescript_counter_plugin: GoPlugin::V18, "counter", &["--multiplex"];
    go_host_v1_0_1_serves_callbacks_to_the_typescript_counter_plugin_with_automtls: GoPlugin::V101, "counter", &[];
    go_host_v1_0_1_serves_callbacks_to_the_typescript_counter_plugin_in_plaintext: GoPlugin::V101, "counter", &["--plaintext"];
}

/// Through the library, in both broker modes: the connection is mutual TLS with the plugin's
/// own certificate, the 7th handshake field is honoured (multiplexed only when offered), typed
/// calls and errors work, and Shutdown ends the plugin with status 0, leaving nothing behind.
#[tokio::test]
async fn tether_broker_calls_the_typescript_plugin_over_pinned_automtls_in_both_modes_and_shuts_it_down()
 {
    let test = "tether_broker_calls_the_typescript_plugin_over_pinned_automtls_in_both_modes_and_shuts_it_down";
    let Some(ts) = typescript::node_or_skip(test) else {
        return;
    };
    for multiplex in [false, true] {
        let work = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let plugin = ts
            .builder("kv")
            .current_dir(work.path())
            .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
            .multiplex(multiplex)
            .start()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let start_time = started.elapsed();
        assert!(plugin.is_tls());
        let fingerprint = plugin.peer_fingerprint().expect("AutoMTLS is on");
        assert_eq!(fingerprint.len(), 32 * 3 - 1, "{fingerprint}");
        assert_eq!(plugin.app_version(), 1);
        let expected = if multiplex {
            BrokerMode::Multiplexed
        } else {
            BrokerMode::Default
        };
        assert_eq!(plugin.broker_mode(), expected);

        let mut kv = KvClient::new(plugin.channel());
        kv.put(PutRequest {
            key: "answer".into(),
            value: b"42".to_vec(),
        })
        .await
        .unwrap();
        let calls = 200;
        let timed = Instant::now();
        for _ in 0..calls {
            let value = kv
                .get(GetRequest {
                    key: "answer".into(),
                })
                .await
                .unwrap()
                .into_inner()
                .value;
            assert_eq!(value, b"42");
        }
        let per_call = timed.elapsed() / calls;
        eprintln!(
            "typescript kv plugin, {expected} broker: started in {start_time:?}, sequential Get {per_call:?} per call"
        );
        let status = kv
            .get(GetRequest {
                key: "../answer".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status}");
        let status = kv
            .get(GetRequest {
                key: "missing".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::NotFound, "{status}");

        let outcome = plugin.shutdown().await.unwrap();
        assert!(
            matches!(outcome, ShutdownOutcome::Graceful(status) if status.success()),
            "{outcome}"
        );
        let left = procs::in_dir(work.path());
        assert!(left.is_empty(), "processes left behind: {left:?}");
    }
}

/// Started by hand (no cookie), a TypeScript plugin prints go-plugin's message for humans on
/// stderr, nothing on stdout, and exits 1.
#[test]
fn a_typescript_plugin_started_without_the_cookie_says_so_and_exits_1() {
    let Some(ts) = typescript::node_or_skip(
        "a_typescript_plugin_started_without_the_cookie_says_so_and_exits_1",
    ) else {
        return;
    };
    let out = Command::new(&ts.node)
        .arg(ts.example("kv"))
        .env_remove("BASIC_PLUGIN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        tether_proto::env::NOT_LAUNCHED_BY_HOST_MESSAGE
    );
}

/// The SDK watches its parent: when the host dies (SIGKILL, so it cannot clean up), the
/// TypeScript plugin exits by itself and removes its private socket directory.
#[tokio::test]
async fn a_typescript_plugin_exits_when_its_host_dies() {
    let Some(ts) = typescript::node_or_skip("a_typescript_plugin_exits_when_its_host_dies") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    // A stand-in host: a shell that starts the plugin with the protocol environment and waits.
    let mut host = Command::new("sh")
        .arg("-c")
        .arg(r#""$0" "$1" & echo $!; wait"#)
        .arg(&ts.node)
        .arg(ts.example("kv"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("BASIC_PLUGIN", "hello")
        .env("PLUGIN_PROTOCOL_VERSIONS", "1")
        .env("TMPDIR", work.path())
        .current_dir(work.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(host.stdout.take().unwrap());
    let mut line = String::new();
    // First the shell prints the plugin's pid, then the plugin prints its handshake (by then it
    // watches its parent).
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    let plugin_pid: u32 = line.trim().parse().unwrap();
    line.clear();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    assert!(line.starts_with("1|1|unix|"), "handshake: {line:?}");
    assert_eq!(
        line.trim_end().split('|').count(),
        6,
        "no 7th field unless offered: {line:?}"
    );
    let socket_dir = Path::new(line.split('|').nth(3).unwrap())
        .parent()
        .unwrap()
        .to_owned();
    assert!(socket_dir.is_dir());
    let fd = procs::pidfd(plugin_pid);

    host.kill().unwrap();
    host.wait().unwrap();
    procs::exited(fd, EXIT_DEADLINE).await;
    assert!(procs::in_dir(work.path()).is_empty());
    assert!(
        !socket_dir.exists(),
        "the plugin removes its private socket directory when its host dies"
    );
}

/// The SDK serves gRPC server reflection: `tether inspect` lists the plugin's own service and
/// describes its methods and messages without any `.proto` file.
#[test]
fn tether_inspect_lists_and_describes_a_typescript_plugins_services_through_reflection() {
    let Some(ts) = typescript::node_or_skip(
        "tether_inspect_lists_and_describes_a_typescript_plugins_services_through_reflection",
    ) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let out = Command::new(bins::TETHER.path())
        .args(["inspect", "--cmd", &ts.command("counter")])
        .args(["--cookie", "BASIC_PLUGIN=hello"])
        .current_dir(work.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let services = stdout
        .lines()
        .find(|l| l.starts_with("services: "))
        .unwrap_or_else(|| panic!("no services line:\n{stdout}"));
    assert!(services.contains("proto.Counter"), "{services}");
    assert!(
        !services.contains("proto.AddHelper"),
        "only served services are listed: {services}"
    );
    assert!(
        stdout.contains("rpc Put(proto.PutRequest) returns (proto.Empty)")
            && stdout.contains("uint32 add_server = 1;"),
        "{stdout}"
    );
}
