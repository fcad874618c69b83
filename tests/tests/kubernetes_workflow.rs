//! The Argo-style example of `examples/kubernetes/` against the test cluster, applied as a
//! user applies it (`kubectl apply`): the NetworkPolicy selects the plugin Pods and lets only
//! the agent's Pod reach them.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use serde_json::json;
use tether_broker::launch::{DEFAULT_POD_PORT, MANAGED_BY, MANAGED_BY_LABEL};
use tether_broker::{HandshakeConfig, PluginClient};
use tether_tests::peers::repo_root;
use tether_tests::pods::PodWorld;

const RUNTIME: &str = env!("CARGO_BIN_EXE_pod-container");
const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");

/// How long the test waits for the cluster's controllers to make the agent's Pod of its Job.
const CONTROLLER_TIMEOUT: Duration = Duration::from_secs(60);

fn example(file: &str) -> PathBuf {
    repo_root().join("examples/kubernetes").join(file)
}

fn apply(world: &PodWorld, file: &str) {
    let _ = world
        .cluster
        .kubectl(&["apply", "-f", example(file).to_str().unwrap()]);
}

/// The Pods `selector` selects in the world's namespace, by name.
async fn selected(world: &PodWorld, selector: &LabelSelector) -> Vec<String> {
    let labels: Vec<String> = selector
        .match_labels
        .clone()
        .unwrap_or_default()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    assert!(
        selector.match_expressions.is_none(),
        "only matchLabels are read here"
    );
    let mut names: Vec<String> =
        Api::<Pod>::namespaced(world.cluster.client.clone(), &world.cluster.namespace)
            .list(&ListParams::default().labels(&labels.join(",")))
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect();
    names.sort();
    names
}

/// The Pod the Job of `examples/kubernetes/agent.yaml` made (the controller-manager's Job
/// controller, real), once it exists.
async fn agent_pod(world: &PodWorld) -> Pod {
    let pods: Api<Pod> = Api::namespaced(world.cluster.client.clone(), &world.cluster.namespace);
    let config = watcher::Config::default().labels("app.kubernetes.io/name=tether-agent");
    let mut changes = watcher(pods.clone(), config).boxed();
    let found = tokio::time::timeout(CONTROLLER_TIMEOUT, async {
        loop {
            let listed = pods
                .list(&ListParams::default().labels("app.kubernetes.io/name=tether-agent"))
                .await
                .unwrap()
                .items;
            if let Some(pod) = listed.into_iter().next() {
                return pod;
            }
            changes.next().await;
        }
    })
    .await;
    found.expect("the agent Job's Pod is made by the Job controller")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_network_policy_selects_the_plugin_pods_and_lets_only_the_agents_pod_reach_them() {
    let Some(world) = PodWorld::new("network policy", Path::new(RUNTIME)).await else {
        return;
    };
    apply(&world, "rbac.yaml");
    apply(&world, "networkpolicy.yaml");
    apply(&world, "agent.yaml");
    let agent = agent_pod(&world).await.metadata.name.unwrap();
    let image = world.binary_image("probe-plugin", Path::new(PROBE));
    let plugin = PluginClient::builder("/plugin/probe-plugin")
        .name("probe")
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .runner(tether_broker::launch::Runner::Kubernetes(
            world.options(&image),
        ))
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let plugin_pods = selected(
        &world,
        &LabelSelector {
            match_labels: Some(BTreeMap::from([(
                MANAGED_BY_LABEL.to_owned(),
                MANAGED_BY.to_owned(),
            )])),
            ..LabelSelector::default()
        },
    )
    .await;
    assert_eq!(plugin_pods.len(), 1, "{plugin_pods:?}");

    // The policy as the API server stored it: it selects the plugin's Pod and not the agent's.
    let policy =
        Api::<NetworkPolicy>::namespaced(world.cluster.client.clone(), &world.cluster.namespace)
            .get("tether-plugins-reach-only-the-agent")
            .await
            .unwrap();
    let spec = policy.spec.unwrap();
    assert_eq!(
        selected(&world, spec.pod_selector.as_ref().unwrap()).await,
        plugin_pods
    );
    let mut types = spec.policy_types.unwrap();
    types.sort();
    assert_eq!(types, ["Egress", "Ingress"]);
    // Ingress: only from the agent's Pod, only to the shim's port.
    let ingress = spec.ingress.unwrap();
    assert_eq!(ingress.len(), 1);
    let from = ingress[0].from.as_ref().unwrap();
    assert_eq!(from.len(), 1);
    assert!(from[0].namespace_selector.is_none() && from[0].ip_block.is_none());
    assert_eq!(
        selected(&world, from[0].pod_selector.as_ref().unwrap()).await,
        std::slice::from_ref(&agent)
    );
    let ports = serde_json::to_value(ingress[0].ports.as_ref().unwrap()).unwrap();
    assert_eq!(
        ports,
        json!([{"protocol": "TCP", "port": DEFAULT_POD_PORT}])
    );
    // Egress: only to the agent's Pod (no DNS, no API server, no other plugin).
    let egress = spec.egress.unwrap();
    assert_eq!(egress.len(), 1);
    let to = egress[0].to.as_ref().unwrap();
    assert_eq!(to.len(), 1);
    assert!(to[0].namespace_selector.is_none() && to[0].ip_block.is_none());
    assert_eq!(
        selected(&world, to[0].pod_selector.as_ref().unwrap()).await,
        [agent]
    );

    plugin.shutdown().await.unwrap();
    world.assert_nothing_left().await;
    world.finish().await;
}
