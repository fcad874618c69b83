//! What a host may do on the API server, with the Roles shipped in
//! `examples/kubernetes/rbac.yaml` applied as a user would (`kubectl apply`): a host running as
//! `tether-agent` starts plugin Pods and reads only its plugins' granted keys through the
//! Kubernetes secret source, with the process runner and the Pod runner alike; a host without
//! `get` on the Secret, or without the port-forward, gets an error naming what it lacks.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use secrecy::ExposeSecret as _;
use serde_json::json;
use tether_broker::catalog::{KubernetesValueSource, ValueSource};
use tether_broker::error::{Phase, StartErrorKind};
use tether_broker::launch::{ClusterAccess, Runner};
use tether_broker::{Catalog, Grants, HandshakeConfig, PluginClient, supervisor};
use tether_examples::kv::GetRequest;
use tether_examples::kv::kv_client::KvClient;
use tether_tests::peers::repo_root;
use tether_tests::pods::PodWorld;
use tether_tests::world::{PluginSpec, World};

const RUNTIME: &str = env!("CARGO_BIN_EXE_pod-container");
const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");

/// The Secret `tether-secret-source` may read (its `resourceNames`).
const SECRET: &str = "tether-plugin-secrets";

/// Applies the shipped RBAC and makes the Secret of two plugins' values.
async fn rbac_world(test: &str) -> Option<PodWorld> {
    let world = PodWorld::new(test, Path::new(RUNTIME)).await?;
    let rbac = repo_root().join("examples/kubernetes/rbac.yaml");
    let _ = world
        .cluster
        .kubectl(&["apply", "-f", rbac.to_str().unwrap()]);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": SECRET},
        "stringData": {"db-password": "hunter2", "other-plugins-key": "not yours"},
    }))
    .unwrap();
    Api::<Secret>::namespaced(world.cluster.client.clone(), &world.cluster.namespace)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    Some(world)
}

async fn get(plugin: &PluginClient, key: &str) -> Result<Vec<u8>, tonic::Status> {
    KvClient::new(plugin.channel())
        .get(GetRequest { key: key.into() })
        .await
        .map(|r| r.into_inner().value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_with_the_shipped_roles_runs_plugins_in_pods_and_each_gets_only_its_granted_key() {
    let Some(world) = rbac_world("rbac host").await else {
        return;
    };
    let agent = Arc::new(world.cluster.client_as("tether-agent").await);
    let source = KubernetesValueSource::new(
        ClusterAccess::Client(Arc::clone(&agent)),
        &world.cluster.namespace,
        SECRET,
    )
    .unwrap();

    let files = World::new();
    files.add_plugin(&PluginSpec::new("probe", PROBE).secrets(&["db-password"]));
    let catalog = Catalog::load_dir(&files.catalog()).unwrap();
    let manifest = catalog.get("probe").unwrap();
    let grants = Grants::new().secret("probe", "db-password");
    // The image holds the probe where the catalog's manifest says the command is.
    let command = manifest.command.display().to_string();
    let image = world
        .images
        .add("probe", &[(command.as_str(), Path::new(PROBE))], &[]);
    let options = world
        .options(&image)
        .access(ClusterAccess::Client(Arc::clone(&agent)))
        .service_account("tether-plugin");
    for runner in [Runner::Process, Runner::Kubernetes(options)] {
        let in_pod = matches!(runner, Runner::Kubernetes(_));
        let builder = supervisor::launch(manifest, &grants, &source, &source)
            .unwrap()
            .runner(runner);
        let plugin = builder.start().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            get(&plugin, "secret:db-password").await.unwrap(),
            b"hunter2",
            "in a Pod: {in_pod}"
        );
        assert!(
            get(&plugin, "secret:other-plugins-key").await.is_err(),
            "in a Pod: {in_pod}"
        );
        plugin.shutdown().await.unwrap();
    }
    world.assert_nothing_left().await;
    world.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secret_source_returns_only_the_key_asked_for_and_nothing_for_an_unknown_one() {
    let Some(world) = rbac_world("secret source").await else {
        return;
    };
    let agent = Arc::new(world.cluster.client_as("tether-agent").await);
    let source = KubernetesValueSource::new(
        ClusterAccess::Client(agent),
        &world.cluster.namespace,
        SECRET,
    )
    .unwrap();
    assert_eq!(
        source
            .fetch("db-password")
            .unwrap()
            .unwrap()
            .expose_secret(),
        b"hunter2"
    );
    assert!(source.fetch("no-such-key").unwrap().is_none());
    assert!(source.describe().contains(SECRET));
    world.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_without_get_on_the_secret_gets_an_error_naming_the_verb() {
    let Some(world) = rbac_world("rbac without get").await else {
        return;
    };
    // An account with the Pod runner's Role only: it may create Secrets but never read one.
    let _ = world
        .cluster
        .kubectl(&["create", "serviceaccount", "runner-only"]);
    let _ = world.cluster.kubectl(&[
        "create",
        "rolebinding",
        "runner-only",
        "--role=tether-pod-runner",
        "--serviceaccount",
        &format!("{}:runner-only", world.cluster.namespace),
    ]);
    let client = Arc::new(world.cluster.client_as("runner-only").await);
    let source = KubernetesValueSource::new(
        ClusterAccess::Client(client),
        &world.cluster.namespace,
        SECRET,
    )
    .unwrap();
    let error = source.fetch("db-password").unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::PermissionDenied);
    let message = error.to_string();
    assert!(
        message.contains("may not `get` the Secret") && message.contains(SECRET),
        "{message}"
    );
    assert!(
        message.contains("rbac.yaml"),
        "says where the Role is: {message}"
    );
    world.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_without_the_port_forward_role_fails_the_start_with_an_error_naming_it_and_leaves_nothing()
 {
    let Some(world) = rbac_world("rbac without port-forward").await else {
        return;
    };
    // The Pod runner's Role, not the port-forward's: the Pod runs, the host cannot reach it.
    let _ = world
        .cluster
        .kubectl(&["create", "serviceaccount", "no-forward"]);
    let _ = world.cluster.kubectl(&[
        "create",
        "rolebinding",
        "no-forward",
        "--role=tether-pod-runner",
        "--serviceaccount",
        &format!("{}:no-forward", world.cluster.namespace),
    ]);
    let client = Arc::new(world.cluster.client_as("no-forward").await);
    let image = world.binary_image("probe", Path::new(PROBE));
    let options = world.options(&image).access(ClusterAccess::Client(client));
    let start = PluginClient::builder("/plugin/probe")
        .name("unreachable")
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .runner(Runner::Kubernetes(options))
        .start();
    // A guard, not a synchronisation: the refusal comes back at once; a hang is the bug.
    let error = match tokio::time::timeout(Duration::from_secs(60), start).await {
        Err(_) => panic!("a start whose port-forward the API server refuses hangs"),
        Ok(Ok(_)) => panic!("the plugin started without a port-forward"),
        Ok(Err(error)) => error,
    };
    assert_eq!(error.plugin(), "unreachable");
    assert_eq!(error.phase(), Phase::Spawn, "{error}");
    let StartErrorKind::Runner { runner, problem } = error.kind() else {
        panic!("not the runner's error: {error}")
    };
    assert_eq!(*runner, "kubernetes");
    assert!(
        problem.contains("pods/portforward")
            && problem.contains("`create`")
            && problem.contains("rbac.yaml"),
        "{problem}"
    );
    world.await_nothing_left().await;
    world.finish().await;
}
