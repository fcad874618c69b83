//! What a host may do on the API server, with the Roles shipped in
//! `examples/kubernetes/rbac.yaml` applied as a user would (`kubectl apply`): the Kubernetes
//! secret source reads only the key asked for; a host without `get` on the Secret gets an
//! error naming the verb.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use secrecy::ExposeSecret as _;
use serde_json::json;
use tether_broker::catalog::{KubernetesSecretSource, SecretSource};
use tether_broker::launch::ClusterAccess;
use tether_tests::peers::repo_root;
use tether_tests::pods::PodWorld;

const RUNTIME: &str = env!("CARGO_BIN_EXE_pod-container");

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secret_source_returns_only_the_key_asked_for_and_nothing_for_an_unknown_one() {
    let Some(world) = rbac_world("secret source").await else {
        return;
    };
    let agent = Arc::new(world.cluster.client_as("tether-agent").await);
    let source = KubernetesSecretSource::new(
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
    let source = KubernetesSecretSource::new(
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
