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
use std::time::Instant;

use tether_broker::{callbacks::BrokerMode, launch::Address};
use tether_examples::adder::Adder;
use tether_examples::counter;
use tether_examples::counter::add_helper_server::AddHelperServer;
use tether_examples::counter::counter_client::CounterClient;

use tether_broker::{HandshakeConfig, PluginClient};
use tether_examples::kv::GetRequest;
use tether_examples::kv::kv_client::KvClient;
use tether_tests::example_host::{Contract, ExampleHost};
use tether_tests::peers::{self, GoPlugin};
use tether_tests::python::{self, PYTHON, PythonPeer};
use tether_tests::{bins, procs, sdk_plugin};

/// A round trip of `contract` (its Python example plugin) under `host`, a tether example host
/// (`allowances`: the sandbox allowances it needs for the interpreter and the SDK) or a
/// go-plugin one; `allowances` and `options` go before the subcommand.
fn round_trip(
    py: &PythonPeer,
    contract: Contract,
    host: &Path,
    allowances: Vec<String>,
    options: &[&str],
    tls: bool,
) {
    let script = match contract {
        Contract::Kv => "examples/kv_plugin.py",
        Contract::Counter => "examples/counter_plugin.py",
    };
    let plugin = py.sdk.join(script);
    let command = shell_words::join([py.interpreter.to_string_lossy(), plugin.to_string_lossy()]);
    ExampleHost::new(contract, host, command)
        .options(allowances)
        .options(options.iter().copied())
        .tls(tls)
        .round_trip();
}

/// tether's example hosts drive the Python plugins; the counter host with `--host-service`
/// registers `AddHelper` once as a host service, which the plugin reaches with
/// `broker.host_services()` (no id in the message, `add_server` 0).
macro_rules! tether_broker_tests {
    ($($name:ident: $contract:expr, $options:expr, $tls:expr;)*) => {$(
        #[test]
        fn $name() {
            let Some(py) = python::python_or_skip(stringify!($name)) else {
                return;
            };
            let host = match $contract {
                Contract::Kv => bins::KV_HOST.path(),
                Contract::Counter => bins::COUNTER_HOST.path(),
            };
            let allowances = py.kv_host_sandbox_args();
            round_trip(&py, $contract, Path::new(host), allowances, $options, $tls);
        }
    )*};
}

tether_broker_tests! {
    kv_host_runs_the_python_kv_plugin_with_automtls: Contract::Kv, &[], true;
    // A host that offers multiplexing gets it: the main connection is a yamux stream.
    kv_host_runs_the_python_kv_plugin_multiplexed: Contract::Kv, &["--multiplex"], true;
    kv_host_runs_the_python_kv_plugin_in_plaintext: Contract::Kv, &[], false;
    counter_host_and_the_python_counter_plugin_add_through_a_callback_with_automtls: Contract::Counter, &[], true;
    counter_host_and_the_python_counter_plugin_add_through_a_callback_in_plaintext: Contract::Counter, &[], false;
    counter_host_and_the_python_counter_plugin_add_through_a_multiplexed_callback_with_automtls: Contract::Counter, &["--multiplex"], true;
    counter_host_and_the_python_counter_plugin_add_through_a_multiplexed_callback_in_plaintext: Contract::Counter, &["--multiplex"], false;
    the_python_counter_plugin_reaches_a_tether_broker_service_without_an_id: Contract::Counter, &["--host-service"], true;
    the_python_counter_plugin_reaches_a_host_service_over_the_multiplexed_connection: Contract::Counter, &["--multiplex", "--host-service"], true;
}

/// go-plugin's own hosts drive the Python plugins. Under AutoMTLS the counter plugin dials the
/// Go host's broker, whose P-521 certificate gRPC's TLS cannot verify, so the SDK relays the
/// dial through Python's `ssl`. With `--multiplex` (`GRPCBrokerMultiplex` on) go-plugin
/// refuses a plugin that does not accept it.
macro_rules! go_host_tests {
    ($($name:ident: $variant:expr, $contract:expr, $options:expr, $tls:expr;)*) => {$(
        #[test]
        fn $name() {
            let Some(py) = python::python_or_skip(stringify!($name)) else {
                return;
            };
            let Some(go) = peers::go_or_skip($variant, stringify!($name)) else {
                return;
            };
            let host = match $contract {
                Contract::Kv => &go.host,
                Contract::Counter => &go.counter_host,
            };
            round_trip(&py, $contract, host, Vec::new(), $options, $tls);
        }
    )*};
}

go_host_tests! {
    go_host_v1_8_runs_the_python_kv_plugin_with_automtls: GoPlugin::V18, Contract::Kv, &[], true;
    go_host_v1_0_1_runs_the_python_kv_plugin_with_automtls: GoPlugin::V101, Contract::Kv, &[], true;
    go_host_v1_8_runs_the_python_kv_plugin_in_plaintext: GoPlugin::V18, Contract::Kv, &[], false;
    go_host_v1_0_1_runs_the_python_kv_plugin_in_plaintext: GoPlugin::V101, Contract::Kv, &[], false;
    go_host_v1_8_with_multiplexing_runs_the_python_kv_plugin_with_automtls: GoPlugin::V18, Contract::Kv, &["--multiplex"], true;
    go_host_v1_8_with_multiplexing_runs_the_python_kv_plugin_in_plaintext: GoPlugin::V18, Contract::Kv, &["--multiplex"], false;
    go_host_v1_8_serves_multiplexed_callbacks_to_the_python_counter_plugin_with_automtls: GoPlugin::V18, Contract::Counter, &["--multiplex"], true;
    go_host_v1_8_serves_multiplexed_callbacks_to_the_python_counter_plugin_in_plaintext: GoPlugin::V18, Contract::Counter, &["--multiplex"], false;
    go_host_v1_8_serves_callbacks_to_the_python_counter_plugin_with_automtls: GoPlugin::V18, Contract::Counter, &[], true;
    go_host_v1_0_1_serves_callbacks_to_the_python_counter_plugin_with_automtls: GoPlugin::V101, Contract::Counter, &[], true;
    go_host_v1_0_1_serves_callbacks_to_the_python_counter_plugin_in_plaintext: GoPlugin::V101, Contract::Counter, &[], false;
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
    sdk_plugin::assert_pinned_automtls(&plugin);
    sdk_plugin::assert_kv_contract(&plugin).await;
    sdk_plugin::assert_graceful_shutdown(plugin, work.path()).await;
}

/// The SDK watches its parent with a pidfd: when the host dies (SIGKILL, so it cannot clean
/// up), the Python plugin exits by itself.
#[tokio::test]
async fn a_python_plugin_exits_when_its_host_dies() {
    let Some(py) = python::python_or_skip("a_python_plugin_exits_when_its_host_dies") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    sdk_plugin::assert_exits_when_its_host_dies(PYTHON.as_ref(), &py.kv_plugin, &[], work.path())
        .await;
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
        sdk_plugin::assert_graceful_shutdown(plugin, work.path()).await;
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
        sdk_plugin::assert_graceful_shutdown(plugin, work.path()).await;
    }
}
