//! Interop with plugins written with the Python SDK (`sdk-python/`, grpcio):
//!
//! - tether's `kv-host`/`counter-host` and the library drive the Python KV and counter plugins
//!   (AutoMTLS, plaintext, and go-plugin's multiplexed broker with `--multiplex`);
//! - go-plugin's own hosts (v1.8 and Debian's 1.0.1) drive them with AutoMTLS — go-plugin's
//!   P-521 certificates, which the SDK accepts by terminating TLS with Python's `ssl` — and
//!   v1.8 with `GRPCBrokerMultiplex` on, which refuses plugins that do not multiplex;
//! - a Python plugin exits by itself when its host dies.
//!
//! Without Python and the SDK's packages the tests print why and pass as skipped, unless
//! `TETHER_REQUIRE_PEERS=1` (CI sets it): then they fail.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tether_broker::{callbacks::BrokerMode, launch::Address};
use tether_examples::adder::Adder;
use tether_examples::counter;
use tether_examples::counter::add_helper_server::AddHelperServer;
use tether_examples::counter::counter_client::CounterClient;

use tether_broker::{HandshakeConfig, PluginClient, ShutdownOutcome};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};
use tether_tests::bins;
use tether_tests::example_host::ExampleHost;
use tether_tests::peers::{self, GoPlugin};
use tether_tests::procs;
use tether_tests::python::{self, PYTHON};

/// How long a test waits for a plugin to exit after its host died.
const EXIT_DEADLINE: Duration = Duration::from_secs(10);

/// [`ExampleHost::kv_round_trip`] with the Python plugin's command line; `host_args` go
/// before the subcommand (the sandbox allowances `kv-host` needs).
fn kv_round_trip(host: &Path, plugin_command: &str, host_args: &[String], tls: bool) {
    ExampleHost::kv(host, plugin_command)
        .options(host_args.iter().cloned())
        .tls(tls)
        .kv_round_trip();
}

#[test]
fn kv_host_runs_the_python_kv_plugin_with_automtls() {
    let Some(py) = python::python_or_skip("kv_host_runs_the_python_kv_plugin_with_automtls") else {
        return;
    };
    kv_round_trip(
        Path::new(bins::KV_HOST.path()),
        &py.kv_plugin_command(),
        &py.kv_host_sandbox_args(),
        true,
    );
}

/// A host that offers multiplexing gets it: the main connection is a yamux stream.
#[test]
fn kv_host_runs_the_python_kv_plugin_multiplexed() {
    let Some(py) = python::python_or_skip("kv_host_runs_the_python_kv_plugin_multiplexed") else {
        return;
    };
    let mut args = py.kv_host_sandbox_args();
    args.push("--multiplex".to_owned());
    kv_round_trip(
        Path::new(bins::KV_HOST.path()),
        &py.kv_plugin_command(),
        &args,
        true,
    );
}

#[test]
fn kv_host_runs_the_python_kv_plugin_in_plaintext() {
    let Some(py) = python::python_or_skip("kv_host_runs_the_python_kv_plugin_in_plaintext") else {
        return;
    };
    kv_round_trip(
        Path::new(bins::KV_HOST.path()),
        &py.kv_plugin_command(),
        &py.kv_host_sandbox_args(),
        false,
    );
}

macro_rules! go_host_tests {
    ($($name:ident: $variant:expr, $options:expr, $tls:expr;)*) => {$(
        #[test]
        fn $name() {
            let Some(py) = python::python_or_skip(stringify!($name)) else {
                return;
            };
            let Some(go) = peers::go_or_skip($variant, stringify!($name)) else {
                return;
            };
            let options: &[&str] = $options;
            let args: Vec<String> = options.iter().map(|o| (*o).to_owned()).collect();
            kv_round_trip(&go.host, &py.kv_plugin_command(), &args, $tls);
        }
    )*};
}

go_host_tests! {
    go_host_v1_8_runs_the_python_kv_plugin_with_automtls: GoPlugin::V18, &[], true;
    go_host_v1_0_1_runs_the_python_kv_plugin_with_automtls: GoPlugin::V101, &[], true;
    go_host_v1_8_runs_the_python_kv_plugin_in_plaintext: GoPlugin::V18, &[], false;
    go_host_v1_0_1_runs_the_python_kv_plugin_in_plaintext: GoPlugin::V101, &[], false;
    // GRPCBrokerMultiplex on: go-plugin refuses a plugin that does not accept it.
    go_host_v1_8_with_multiplexing_runs_the_python_kv_plugin_with_automtls: GoPlugin::V18, &["--multiplex"], true;
    go_host_v1_8_with_multiplexing_runs_the_python_kv_plugin_in_plaintext: GoPlugin::V18, &["--multiplex"], false;
}

/// Through the library: the connection really is mutual TLS with the Python plugin's own
/// certificate, typed calls and errors work, and Shutdown ends the plugin with status 0.
#[tokio::test]
async fn tether_broker_calls_the_python_plugin_over_pinned_automtls_and_shuts_it_down() {
    let Some(py) = python::python_or_skip(
        "tether_broker_calls_the_python_plugin_over_pinned_automtls_and_shuts_it_down",
    ) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let plugin = py
        .allow(PluginClient::builder(&py.interpreter))
        .args([&py.kv_plugin])
        .current_dir(work.path())
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(plugin.is_tls());
    let fingerprint = plugin.peer_fingerprint().expect("AutoMTLS is on");
    assert_eq!(fingerprint.len(), 32 * 3 - 1, "{fingerprint}");
    assert_eq!(plugin.app_version(), 1);

    let mut kv = KvClient::new(plugin.channel());
    kv.put(PutRequest {
        key: "answer".into(),
        value: b"42".to_vec(),
    })
    .await
    .unwrap();
    let value = kv
        .get(GetRequest {
            key: "answer".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .value;
    assert_eq!(value, b"42");
    let status = kv
        .get(GetRequest {
            key: "../answer".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status}");

    let outcome = plugin.shutdown().await.unwrap();
    assert!(
        matches!(outcome, ShutdownOutcome::Graceful(status) if status.success()),
        "{outcome}"
    );
    let left = procs::in_dir(work.path());
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

/// The SDK watches its parent with a pidfd: when the host dies (SIGKILL, so it cannot clean
/// up), the Python plugin exits by itself.
#[tokio::test]
async fn a_python_plugin_exits_when_its_host_dies() {
    let Some(py) = python::python_or_skip("a_python_plugin_exits_when_its_host_dies") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    // A stand-in host: a shell that starts the plugin with the protocol environment and waits.
    let mut host = Command::new("sh")
        .arg("-c")
        .arg(r#""$0" "$1" & echo $!; wait"#)
        .arg(PYTHON)
        .arg(&py.kv_plugin)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("BASIC_PLUGIN", "hello")
        .env("PLUGIN_PROTOCOL_VERSIONS", "1")
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

/// [`ExampleHost::counter_round_trip`] with the Python counter plugin, which dials the host's
/// `AddHelper` through `plugin.GRPCBroker`. `host_args` go before the subcommand.
fn counter_round_trip(host: &Path, py: &python::PythonPeer, host_args: &[String], tls: bool) {
    let plugin = py.sdk.join("examples/counter_plugin.py");
    let command = shell_words::join([py.interpreter.to_string_lossy(), plugin.to_string_lossy()]);
    ExampleHost::counter(host, command)
        .options(host_args.iter().cloned())
        .tls(tls)
        .counter_round_trip();
}

#[test]
fn counter_host_and_the_python_counter_plugin_add_through_a_callback_with_automtls() {
    let Some(py) = python::python_or_skip(
        "counter_host_and_the_python_counter_plugin_add_through_a_callback_with_automtls",
    ) else {
        return;
    };
    counter_round_trip(
        Path::new(bins::COUNTER_HOST.path()),
        &py,
        &py.kv_host_sandbox_args(),
        true,
    );
}

#[test]
fn counter_host_and_the_python_counter_plugin_add_through_a_callback_in_plaintext() {
    let Some(py) = python::python_or_skip(
        "counter_host_and_the_python_counter_plugin_add_through_a_callback_in_plaintext",
    ) else {
        return;
    };
    counter_round_trip(
        Path::new(bins::COUNTER_HOST.path()),
        &py,
        &py.kv_host_sandbox_args(),
        false,
    );
}

/// The host registers `AddHelper` once as a tether host service; the Python plugin reaches it
/// with `broker.host_services()` (no id in the message, `add_server` 0).
macro_rules! tether_counter_host_tests {
    ($($name:ident: $options:expr, $tls:expr;)*) => {$(
        #[test]
        fn $name() {
            let Some(py) = python::python_or_skip(stringify!($name)) else {
                return;
            };
            let mut args = py.kv_host_sandbox_args();
            args.extend($options.iter().map(|o: &&str| (*o).to_owned()));
            counter_round_trip(Path::new(bins::COUNTER_HOST.path()), &py, &args, $tls);
        }
    )*};
}

tether_counter_host_tests! {
    counter_host_and_the_python_counter_plugin_add_through_a_multiplexed_callback_with_automtls: ["--multiplex"], true;
    counter_host_and_the_python_counter_plugin_add_through_a_multiplexed_callback_in_plaintext: ["--multiplex"], false;
    the_python_counter_plugin_reaches_a_host_service_over_the_multiplexed_connection: ["--multiplex", "--host-service"], true;
}

#[test]
fn the_python_counter_plugin_reaches_a_tether_broker_service_without_an_id() {
    let Some(py) = python::python_or_skip(
        "the_python_counter_plugin_reaches_a_tether_broker_service_without_an_id",
    ) else {
        return;
    };
    let mut args = py.kv_host_sandbox_args();
    args.push("--host-service".to_owned());
    counter_round_trip(Path::new(bins::COUNTER_HOST.path()), &py, &args, true);
}

/// go-plugin's own bidirectional hosts drive the Python counter plugin. Under AutoMTLS the
/// plugin dials the Go host's broker, whose P-521 certificate gRPC's TLS cannot verify, so the
/// SDK relays the dial through Python's `ssl`.
macro_rules! go_counter_host_tests {
    ($($name:ident: $variant:expr, $options:expr, $tls:expr;)*) => {$(
        #[test]
        fn $name() {
            let Some(py) = python::python_or_skip(stringify!($name)) else {
                return;
            };
            let Some(go) = peers::go_or_skip($variant, stringify!($name)) else {
                return;
            };
            let options: &[&str] = $options;
            let args: Vec<String> = options.iter().map(|o| (*o).to_owned()).collect();
            counter_round_trip(&go.counter_host, &py, &args, $tls);
        }
    )*};
}

go_counter_host_tests! {
    go_host_v1_8_serves_multiplexed_callbacks_to_the_python_counter_plugin_with_automtls: GoPlugin::V18, &["--multiplex"], true;
    go_host_v1_8_serves_multiplexed_callbacks_to_the_python_counter_plugin_in_plaintext: GoPlugin::V18, &["--multiplex"], false;
    go_host_v1_8_serves_callbacks_to_the_python_counter_plugin_with_automtls: GoPlugin::V18, &[], true;
    go_host_v1_0_1_serves_callbacks_to_the_python_counter_plugin_with_automtls: GoPlugin::V101, &[], true;
    go_host_v1_0_1_serves_callbacks_to_the_python_counter_plugin_in_plaintext: GoPlugin::V101, &[], false;
}

/// `script` of the Python SDK, started in `work` in the broker mode `multiplex` asks for, which
/// the plugin must have accepted.
async fn start_in_mode(
    py: &python::PythonPeer,
    script: &str,
    work: &std::path::Path,
    multiplex: bool,
) -> PluginClient {
    let plugin = py
        .allow(PluginClient::builder(&py.interpreter))
        .args([py.sdk.join(script)])
        .current_dir(work)
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
        .multiplex(multiplex)
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let expected = if multiplex {
        BrokerMode::Multiplexed
    } else {
        BrokerMode::Default
    };
    assert_eq!(plugin.broker_mode(), expected);
    plugin
}

/// Through the library, in both broker modes: the Python counter plugin calls back into the
/// host (a fresh `AddHelper` id per `Put`, dialled by the plugin), the negotiated mode is the
/// offered one, and a multiplexed plugin has exactly one connection while the callbacks run.
/// Prints the time per `Put` (knock or announcement, dial, TLS, `Sum`) for bench/BENCHMARKS.md.
#[tokio::test]
async fn tether_broker_and_the_python_counter_plugin_call_back_in_both_broker_modes() {
    let test = "tether_broker_and_the_python_counter_plugin_call_back_in_both_broker_modes";
    let Some(py) = python::python_or_skip(test) else {
        return;
    };
    for multiplex in [false, true] {
        let work = tempfile::tempdir().unwrap();
        let plugin = start_in_mode(&py, "examples/counter_plugin.py", work.path(), multiplex).await;
        let mode = plugin.broker_mode();
        let broker = plugin.broker();
        let mut counter = CounterClient::new(plugin.channel());
        let puts = 30;
        let timed = Instant::now();
        for _ in 0..puts {
            let id = broker.next_id();
            let served = broker
                .accept_and_serve(id, AddHelperServer::new(Adder))
                .await
                .unwrap();
            counter
                .put(counter::PutRequest {
                    add_server: id,
                    key: "c".into(),
                    value: 2,
                })
                .await
                .unwrap();
            drop(served);
        }
        let per_put = timed.elapsed() / puts;
        let value = counter
            .get(counter::GetRequest { key: "c".into() })
            .await
            .unwrap()
            .into_inner()
            .value;
        assert_eq!(value, 2 * i64::from(puts));
        if multiplex {
            let Address::Unix(socket) = plugin.address() else {
                panic!("not a unix socket: {}", plugin.address());
            };
            assert_eq!(
                procs::unix_connections_to(socket),
                1,
                "one connection to the plugin"
            );
        }
        eprintln!("python counter plugin, {mode} broker: Put with a callback {per_put:?} per call");
        let outcome = plugin.shutdown().await.unwrap();
        assert!(
            matches!(outcome, ShutdownOutcome::Graceful(status) if status.success()),
            "{outcome}"
        );
        assert!(procs::in_dir(work.path()).is_empty());
    }
}

/// The other direction, in both broker modes: the Python plugin serves a callback with
/// `accept_and_serve` (announced in the default mode; answering the host's knock and routing
/// the host's stream in the multiplexed one) and the host dials that id.
#[tokio::test]
async fn tether_broker_dials_a_callback_the_python_plugin_serves_in_both_broker_modes() {
    let test = "tether_broker_dials_a_callback_the_python_plugin_serves_in_both_broker_modes";
    let Some(py) = python::python_or_skip(test) else {
        return;
    };
    for multiplex in [false, true] {
        let work = tempfile::tempdir().unwrap();
        let plugin = start_in_mode(&py, "tests/serving_plugin.py", work.path(), multiplex).await;
        let mode = plugin.broker_mode();
        let mut kv = KvClient::new(plugin.channel());
        for _ in 0..2 {
            let value = kv
                .get(GetRequest {
                    key: "serve".into(),
                })
                .await
                .unwrap()
                .into_inner()
                .value;
            let id: u32 = String::from_utf8(value).unwrap().parse().unwrap();
            let channel = plugin.broker().dial(id).await.unwrap();
            let status = tonic_health::pb::health_client::HealthClient::new(channel)
                .check(tonic_health::pb::HealthCheckRequest {
                    service: "callback".into(),
                })
                .await
                .unwrap()
                .into_inner()
                .status;
            assert_eq!(
                status,
                tonic_health::pb::health_check_response::ServingStatus::Serving as i32,
                "{mode} broker, id {id}"
            );
        }
        if multiplex {
            let Address::Unix(socket) = plugin.address() else {
                panic!("not a unix socket: {}", plugin.address());
            };
            assert_eq!(
                procs::unix_connections_to(socket),
                1,
                "one connection to the plugin"
            );
        }
        let outcome = plugin.shutdown().await.unwrap();
        assert!(
            matches!(outcome, ShutdownOutcome::Graceful(status) if status.success()),
            "{outcome}"
        );
        assert!(procs::in_dir(work.path()).is_empty());
    }
}
