//! Interop with plugins written with the Python SDK (`sdk-python/`, grpcio):
//!
//! - tether's `kv-host`/`counter-host` and the library drive the Python KV and counter plugins
//!   (AutoMTLS, plaintext, and go-plugin's multiplexed broker with `--multiplex`);
//! - go-plugin's own hosts (v1.8 and Debian's 1.0.1) drive them with AutoMTLS — go-plugin's
//!   P-521 certificates, which the SDK accepts by terminating TLS with Python's `ssl` — and
//!   v1.8 with `GRPCBrokerMultiplex` on, which refuses plugins that do not multiplex; the
//!   plugin leaves nothing in its `TMPDIR`;
//! - the library host sees the plugin's own certificate and the negotiated broker mode, calls
//!   back into the host and dials the plugin's callbacks in both modes, and `Shutdown` ends it
//!   with status 0; a Python plugin exits by itself when its host dies.
//!
//! The round trips and the library's KV checks are the same for every SDK: `sdk_plugin`.
//!
//! Without Python and the SDK's packages the tests print why and pass as skipped, unless
//! `TETHER_REQUIRE_PEERS=1` (CI sets it): then they fail.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use tether_broker::PluginClient;
use tether_examples::adder::Adder;
use tether_examples::counter;
use tether_examples::counter::add_helper_server::AddHelperServer;
use tether_examples::counter::counter_client::CounterClient;
use tether_examples::kv::GetRequest;
use tether_examples::kv::kv_client::KvClient;
use tether_tests::bins;
use tether_tests::example_host::Contract;
use tether_tests::output::{stderr, stdout};
use tether_tests::peers::GoPlugin;
use tether_tests::peers::repo_root;
use tether_tests::python::{self, PYTHON, PythonPeer};
use tether_tests::sdk_interop_tests;
use tether_tests::sdk_plugin::{self, Host};

// tether's example hosts drive the Python plugins; the counter host with `--host-service`
// registers `AddHelper` once as a host service, which the plugin reaches with
// `broker.host_services()` (no id in the message, `add_server` 0). A host that offers
// multiplexing gets it: the main connection is a yamux stream.
sdk_interop_tests! { python::python_or_skip;
    kv_host_runs_the_python_kv_plugin_with_automtls: Host::Tether, Contract::Kv, true;
    kv_host_runs_the_python_kv_plugin_multiplexed: Host::Tether, Contract::Kv, true, &["--multiplex"];
    kv_host_runs_the_python_kv_plugin_in_plaintext: Host::Tether, Contract::Kv, false;
    counter_host_and_the_python_counter_plugin_add_through_a_callback_with_automtls: Host::Tether, Contract::Counter, true;
    counter_host_and_the_python_counter_plugin_add_through_a_callback_in_plaintext: Host::Tether, Contract::Counter, false;
    counter_host_and_the_python_counter_plugin_add_through_a_multiplexed_callback_with_automtls: Host::Tether, Contract::Counter, true, &["--multiplex"];
    counter_host_and_the_python_counter_plugin_add_through_a_multiplexed_callback_in_plaintext: Host::Tether, Contract::Counter, false, &["--multiplex"];
    the_python_counter_plugin_reaches_a_tether_broker_service_without_an_id: Host::Tether, Contract::Counter, true, &["--host-service"];
    the_python_counter_plugin_reaches_a_host_service_over_the_multiplexed_connection: Host::Tether, Contract::Counter, true, &["--multiplex", "--host-service"];
}

// go-plugin's own hosts drive the Python plugins. Under AutoMTLS the counter plugin dials the
// Go host's broker, whose P-521 certificate gRPC's TLS cannot verify, so the SDK relays the
// dial through Python's `ssl`. With `--multiplex` (`GRPCBrokerMultiplex` on) go-plugin
// refuses a plugin that does not accept it.
sdk_interop_tests! { python::python_or_skip;
    go_host_v1_8_runs_the_python_kv_plugin_with_automtls: Host::Go(GoPlugin::V18), Contract::Kv, true;
    go_host_v1_0_1_runs_the_python_kv_plugin_with_automtls: Host::Go(GoPlugin::V101), Contract::Kv, true;
    go_host_v1_8_runs_the_python_kv_plugin_in_plaintext: Host::Go(GoPlugin::V18), Contract::Kv, false;
    go_host_v1_0_1_runs_the_python_kv_plugin_in_plaintext: Host::Go(GoPlugin::V101), Contract::Kv, false;
    go_host_v1_8_with_multiplexing_runs_the_python_kv_plugin_with_automtls: Host::Go(GoPlugin::V18), Contract::Kv, true, &["--multiplex"];
    go_host_v1_8_with_multiplexing_runs_the_python_kv_plugin_in_plaintext: Host::Go(GoPlugin::V18), Contract::Kv, false, &["--multiplex"];
    go_host_v1_8_serves_multiplexed_callbacks_to_the_python_counter_plugin_with_automtls: Host::Go(GoPlugin::V18), Contract::Counter, true, &["--multiplex"];
    go_host_v1_8_serves_multiplexed_callbacks_to_the_python_counter_plugin_in_plaintext: Host::Go(GoPlugin::V18), Contract::Counter, false, &["--multiplex"];
    go_host_v1_8_serves_callbacks_to_the_python_counter_plugin_with_automtls: Host::Go(GoPlugin::V18), Contract::Counter, true;
    go_host_v1_0_1_serves_callbacks_to_the_python_counter_plugin_with_automtls: Host::Go(GoPlugin::V101), Contract::Counter, true;
    go_host_v1_0_1_serves_callbacks_to_the_python_counter_plugin_in_plaintext: Host::Go(GoPlugin::V101), Contract::Counter, false;
}

/// The library host for `script` of the Python SDK, with the sandbox allowances for the
/// interpreter and the SDK.
fn builder(py: &PythonPeer, script: &str) -> tether_broker::PluginClientBuilder {
    py.allow(PluginClient::builder(&py.interpreter))
        .args([py.sdk.join(script)])
}

/// Through the library, in both broker modes: the connection really is mutual TLS with the
/// Python plugin's own certificate, the offered mode is the negotiated one, typed calls and
/// errors work, and Shutdown ends the plugin with status 0.
#[tokio::test]
async fn tether_broker_calls_the_python_plugin_over_pinned_automtls_in_both_modes_and_shuts_it_down()
 {
    let test = "tether_broker_calls_the_python_plugin_over_pinned_automtls_in_both_modes_and_shuts_it_down";
    let Some(py) = python::python_or_skip(test) else {
        return;
    };
    sdk_plugin::assert_kv_plugin_in_both_modes("python", || builder(&py, "examples/kv_plugin.py"))
        .await;
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
        let builder = builder(&py, "examples/counter_plugin.py");
        let plugin = sdk_plugin::start_in_mode(builder, work.path(), multiplex).await;
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
            sdk_plugin::assert_one_connection(&plugin);
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
        let builder = builder(&py, "tests/serving_plugin.py");
        let plugin = sdk_plugin::start_in_mode(builder, work.path(), multiplex).await;
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
            sdk_plugin::assert_one_connection(&plugin);
        }
        sdk_plugin::assert_graceful_shutdown(plugin, work.path()).await;
    }
}

/// go-plugin's own Python example (`tests/python/go-plugin-example/`, copied unchanged) binds
/// 127.0.0.1:1234 and serves plaintext gRPC; `tether call --cmd "python3 plugin.py"` reaches it
/// in its own network namespace with the default network (none) and no network flag.
#[test]
fn go_plugins_python_example_serves_on_its_own_loopback_under_network_none() {
    let Some(_python) = python::python_or_skip(
        "go_plugins_python_example_serves_on_its_own_loopback_under_network_none",
    ) else {
        return;
    };
    // A copy, as a user would have it, granted as the plugin's working directory (it keeps
    // `kv_<key>` there).
    let work = tempfile::tempdir().unwrap();
    copy_dir(
        &repo_root().join("tests/python/go-plugin-example"),
        work.path(),
    );
    let kv_proto = repo_root().join("examples/proto/kv.proto");
    let call = |method: &str, request: &str| {
        Command::new(bins::TETHER.path())
            .args([
                "call",
                "--cmd",
                "python3 plugin.py",
                "--cookie",
                "BASIC_PLUGIN=hello",
                "--plaintext",
                "--proto",
                kv_proto.to_str().unwrap(),
                "--work-dir",
                work.path().to_str().unwrap(),
                method,
                request,
            ])
            .current_dir(work.path())
            .output()
            .unwrap()
    };
    let out = call("proto.KV/Put", r#"{"key":"x","value":"eQ=="}"#);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "{}\n");
    assert_eq!(
        std::fs::read_to_string(work.path().join("kv_x")).unwrap(),
        "y\n\nWritten from plugin-python"
    );
    // A second plugin on the same port at once would fail on a shared loopback: each has its
    // own. And the host's port 1234 is not the plugin's.
    let out = call("proto.KV/Get", r#"{"key":"x"}"#);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("\"value\""), "{}", stdout(&out));
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}
