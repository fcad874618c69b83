//! The Pod runner against a real API server (`tests/k8s/cluster.sh`): Rust, go-plugin v1.8 and
//! Python plugins in Pods of their own, calling back into the host over the multiplexed broker
//! through the API server's port-forward, with the stand-in kubelet (`tether_tests::kubelet`)
//! running their containers. Then what a Pod holds and what it is allowed.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use tether_broker::callbacks::BrokerMode;
use tether_broker::confine::WorldMechanism;
use tether_broker::launch::{MANAGED_BY, MANAGED_BY_LABEL, Runner};
use tether_broker::{HandshakeConfig, PluginClient};
use tether_examples::adder::Adder;
use tether_examples::counter::add_helper_server::AddHelperServer;
use tether_examples::counter::counter_client::CounterClient;
use tether_examples::counter::{GetRequest, PutRequest};
use tether_tests::bins;
use tether_tests::peers::{self, GoPlugin};
use tether_tests::pods::PodWorld;
use tether_tests::python;

const RUNTIME: &str = env!("CARGO_BIN_EXE_pod-container");
const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");

async fn world(test: &str) -> Option<PodWorld> {
    PodWorld::new(test, Path::new(RUNTIME)).await
}

/// `put c 5`, `put c 7` (each calls back to the host's `AddHelper`), `get c` = 12, in one Pod;
/// then the Pod and everything of it is gone once the plugin is shut down.
async fn counter_round_trip(world: &PodWorld, image: &str, program: &str, args: &[&str]) {
    let plugin = PluginClient::builder(program)
        .args(args)
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
        .runner(Runner::Kubernetes(world.options(image)))
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plugin.broker_mode(), BrokerMode::Multiplexed);
    // Not this host's layers: a Pod of its own, and the client says so.
    assert_eq!(plugin.world_mechanism(), WorldMechanism::Pod);
    let pods: Api<Pod> = Api::namespaced(world.cluster.client.clone(), &world.cluster.namespace);
    let listed = pods
        .list(&ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}")))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1, "one Pod for the plugin");
    let broker = plugin.broker();
    let mut counter = CounterClient::new(plugin.channel());
    let mut served = Vec::new();
    for n in [5, 7] {
        let id = broker.next_id();
        served.push(
            broker
                .accept_and_serve(id, AddHelperServer::new(Adder))
                .await
                .unwrap(),
        );
        counter
            .put(PutRequest {
                add_server: id,
                key: "c".into(),
                value: n,
            })
            .await
            .unwrap();
    }
    let value = counter
        .get(GetRequest { key: "c".into() })
        .await
        .unwrap()
        .into_inner()
        .value;
    assert_eq!(value, 12);
    drop(served);
    plugin.shutdown().await.unwrap();
    world.assert_nothing_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_counter_plugin_in_a_pod_calls_back_over_the_multiplexed_broker_through_the_api_server()
 {
    let Some(world) = world("rust counter in a pod").await else {
        return;
    };
    let image = world.binary_image("counter-plugin", Path::new(bins::COUNTER_PLUGIN.path()));
    counter_round_trip(&world, &image, "/plugin/counter-plugin", &[]).await;
    world.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_plugin_v1_8_counter_plugin_in_a_pod_calls_back_over_the_multiplexed_broker() {
    let Some(go) = peers::go_or_skip(GoPlugin::V18, "go v1.8 counter in a pod") else {
        return;
    };
    let Some(world) = world("go counter in a pod").await else {
        return;
    };
    let image = world.binary_image("counterplugin-v18", &go.counter_plugin);
    counter_round_trip(&world, &image, "/plugin/counterplugin-v18", &[]).await;
    world.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_counter_plugin_in_a_pod_calls_back_over_the_multiplexed_broker() {
    let test = "python counter in a pod";
    let Some(py) = python::python_or_skip(test) else {
        return;
    };
    let Some(world) = world(test).await else {
        return;
    };
    let mut files: Vec<(String, PathBuf)> = py
        .prefixes
        .iter()
        .map(|p| (p.display().to_string(), p.clone()))
        .collect();
    files.push(("/opt/sdk-python".into(), py.sdk.clone()));
    let files: Vec<(&str, &Path)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_path()))
        .collect();
    let image = world.images.add("python-counter", &files, &[]);
    let interpreter = py.interpreter.display().to_string();
    counter_round_trip(
        &world,
        &image,
        &interpreter,
        &["/opt/sdk-python/examples/counter_plugin.py"],
    )
    .await;
    world.finish().await;
}

/// The probe plugin (`probe-plugin`) in a Pod, with `delivery`; its `Get` of `key`.
async fn probe(plugin: &PluginClient, key: &str) -> Result<Vec<u8>, tonic::Status> {
    tether_examples::kv::kv_client::KvClient::new(plugin.channel())
        .get(tether_examples::kv::GetRequest { key: key.into() })
        .await
        .map(|r| r.into_inner().value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugins_pod_holds_only_its_granted_keys_reads_them_from_its_secrets_dir_and_runs_hardened()
 {
    use secrecy::SecretSlice;
    use tether_broker::Delivery;
    let Some(world) = world("granted keys only").await else {
        return;
    };
    let image = world.binary_image("probe-plugin", Path::new(PROBE));
    let delivery = Delivery::new()
        .secret("db-password", SecretSlice::from(b"hunter2".to_vec()))
        .config("settings.toml", SecretSlice::from(b"level = 3\n".to_vec()));
    let plugin = PluginClient::builder("/plugin/probe-plugin")
        .name("probe")
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .deliver(delivery)
        .runner(Runner::Kubernetes(world.options(&image)))
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    // At the API: the launch's Secret holds the one granted key, the ConfigMap the one file.
    let client = world.cluster.client.clone();
    let ns = &world.cluster.namespace;
    let selector = ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    let secrets = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), ns)
        .list(&selector)
        .await
        .unwrap()
        .items;
    assert_eq!(secrets.len(), 1);
    let data = secrets[0].data.clone().unwrap();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["db-password"]);
    assert_eq!(data["db-password"].0, b"hunter2");
    let maps = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), ns)
        .list(&selector)
        .await
        .unwrap()
        .items;
    assert_eq!(
        maps[0]
            .binary_data
            .clone()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["settings.toml"]
    );

    // In the Pod: the plugin reads them where the protocol says, and nothing else is there.
    assert_eq!(
        probe(&plugin, "secret:db-password").await.unwrap(),
        b"hunter2"
    );
    assert_eq!(
        probe(&plugin, "config:settings.toml").await.unwrap(),
        b"level = 3\n"
    );
    assert!(probe(&plugin, "secret:api-token").await.is_err());
    let env = String::from_utf8(probe(&plugin, "envall:").await.unwrap()).unwrap();
    // A variable's line starts with its name; PLUGIN_CLIENT_CERT's PEM goes on over lines of base64.
    let is_name = |n: &str| {
        !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    };
    let mut names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('=').map(|(n, _)| n))
        .filter(|n| is_name(n))
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "BASIC_PLUGIN",
            "PLUGIN_CLIENT_CERT",
            "PLUGIN_MAX_PORT",
            "PLUGIN_MIN_PORT",
            "PLUGIN_MULTIPLEX_GRPC",
            "PLUGIN_PROTOCOL_VERSIONS",
            "PLUGIN_UNIX_SOCKET_DIR",
            "TETHER_CONFIG_DIR",
            "TETHER_HOST_SERVICES",
            "TETHER_SECRETS_DIR",
            "TMPDIR"
        ],
        "the protocol's variables only: {env}"
    );
    assert_eq!(
        String::from_utf8(probe(&plugin, "ids:").await.unwrap()).unwrap(),
        "65532 65532"
    );

    // The Pod object: the design's security context.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = &pods.list(&selector).await.unwrap().items[0];
    let spec = serde_json::to_value(pod.spec.as_ref().unwrap()).unwrap();
    assert_eq!(spec["automountServiceAccountToken"], false);
    assert_eq!(spec["restartPolicy"], "Never");
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        spec["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let security = &spec["containers"][0]["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert!(
        spec["containers"][0]["image"]
            .as_str()
            .unwrap()
            .contains("@sha256:")
    );
    // Its root file system is read-only; only its own directories are writable.
    let mut kv = tether_examples::kv::kv_client::KvClient::new(plugin.channel());
    let put = |key: &str| tether_examples::kv::PutRequest {
        key: key.into(),
        value: b"x".to_vec(),
    };
    assert!(kv.put(put("write:/written-by-the-plugin")).await.is_err());
    kv.put(put("write:/run/tether/work/scratch")).await.unwrap();

    plugin.shutdown().await.unwrap();
    world.assert_nothing_left().await;
    world.finish().await;
}

/// The `p`-th percentile of `sorted` (nearest rank).
fn percentile(sorted: &[std::time::Duration], p: usize) -> std::time::Duration {
    sorted[(sorted.len() * p).div_ceil(100).saturating_sub(1)]
}

/// A measurement, not a check (run it with `--ignored --nocapture`; numbers in
/// bench/BENCHMARKS.md): how long `start()` of the Rust counter plugin takes through the API
/// server (Pod, Secret, scheduling, the stand-in's container, the log stream, the port-forward,
/// TLS, health) against the process runner, alternating in the same run so both see the same
/// load. `TETHER_LATENCY_ROUNDS` rounds (default 20).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn start_latency_of_the_pod_runner_against_the_process_runner() {
    use std::time::{Duration, Instant};
    let Some(world) = world("start latency").await else {
        return;
    };
    let rounds: usize = std::env::var("TETHER_LATENCY_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let image = world.binary_image("counter-plugin", Path::new(bins::COUNTER_PLUGIN.path()));
    let (mut pod, mut process) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for in_pod in [true, false] {
            let (program, runner) = if in_pod {
                (
                    "/plugin/counter-plugin".to_owned(),
                    Runner::Kubernetes(world.options(&image)),
                )
            } else {
                (bins::COUNTER_PLUGIN.path().to_owned(), Runner::Process)
            };
            let started = Instant::now();
            let plugin = PluginClient::builder(program)
                .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
                .runner(runner)
                .start()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let took = started.elapsed();
            plugin.shutdown().await.unwrap();
            if in_pod {
                pod.push(took);
            } else {
                process.push(took);
            }
        }
    }
    world.assert_nothing_left().await;
    world.finish().await;
    pod.sort();
    process.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let p50 = |v: &[Duration]| percentile(v, 50);
    eprintln!(
        "start latency, {rounds} alternating rounds: Pod runner p50 {:.0} ms, p90 {:.0} ms, min {:.0} ms; process runner p50 {:.0} ms, p90 {:.0} ms, min {:.0} ms; Pod/process p50 ratio {:.1}",
        ms(p50(&pod)),
        ms(percentile(&pod, 90)),
        ms(pod[0]),
        ms(p50(&process)),
        ms(percentile(&process, 90)),
        ms(process[0]),
        ms(p50(&pod)) / ms(p50(&process)),
    );
    assert_eq!((pod.len(), process.len()), (rounds, rounds));
}
