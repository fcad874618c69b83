//! A stand-in kubelet for the Kubernetes tests: kwok simulates nodes but runs nothing, so this
//! runs the containers of the Pods tether's Pod runner creates as real local processes.
//!
//! It registers a node of its own (simulated by kwok, `kwok.x-k8s.io/node: fake`), watches the
//! Pods scheduled onto it that kwok leaves alone (`app.kubernetes.io/managed-by=tether`, see
//! `tests/k8s/cluster.sh`) and, for each, does what a kubelet and its container runtime do:
//! pulls the images from [`Images`] (an unknown image fails with `ErrImagePull`), makes the
//! volumes (`emptyDir`, and `secret`/`configMap` read through the API server with the kubelet's
//! layout), enforces `runAsNonRoot`, runs the init containers and the container in namespaces
//! of their own (`pod-container`: own root built from nothing, read-only when asked, own
//! network with only loopback, the asked user without capabilities), writes their output as a
//! CRI log file and points kwok's `Logs` resource at it, points kwok's `PortForward` resource
//! at the container's network namespace, and reports the Pod's status and events. On deletion
//! it stops the container within the grace period and deletes the Pod object.
//!
//! So the Pod runner's whole path is real except the kubelet: the API server, scheduling,
//! garbage collection, the log stream and the port-forward (both proxied by the API server to
//! kwok), the Secret the plugin reads, and the plugin process.

mod container;
mod images;
mod pod;
mod status;
mod volumes;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use tokio::sync::watch;

pub use images::{IMAGE_USER, Images, REGISTRY, unpullable};

/// The label every Pod of tether's Pod runner carries, and which kwok leaves to this stand-in.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by=tether";

/// How long the stand-in waits for kwok to report its node ready.
pub const NODE_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A running stand-in kubelet. Dropping it stops its containers; [`StandIn::stop`] also
/// deletes its node.
pub struct StandIn {
    node: String,
    client: kube::Client,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl StandIn {
    /// Registers a new node and starts running the Pods scheduled onto it. `runtime` is the
    /// `pod-container` binary.
    ///
    /// # Errors
    /// When the node cannot be registered or does not become ready.
    pub async fn start(
        client: kube::Client,
        runtime: &Path,
        images: Images,
    ) -> Result<Self, String> {
        static SEQUENCE: AtomicU32 = AtomicU32::new(0);
        let node = format!(
            "tether-standin-{}-{}",
            std::process::id(),
            SEQUENCE.fetch_add(1, Ordering::Relaxed)
        );
        let nodes: Api<Node> = Api::all(client.clone());
        sweep_dead(&client, &nodes).await;
        let object: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": node,
                "annotations": {"kwok.x-k8s.io/node": "fake"},
                "labels": {"kubernetes.io/hostname": node, "type": "kwok", STAND_IN_LABEL: std::process::id().to_string()},
            },
            "status": {
                "capacity": {"cpu": "32", "memory": "64Gi", "pods": "110"},
                "allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110"},
            },
        }))
        .map_err(|e| e.to_string())?;
        nodes
            .create(&PostParams::default(), &object)
            .await
            .map_err(|e| format!("registering node {node}: {e}"))?;
        let ready =
            kube::runtime::wait::await_condition(nodes.clone(), &node, |n: Option<&Node>| {
                n.and_then(|n| n.status.as_ref())
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            });
        let node_object = match tokio::time::timeout(NODE_READY_TIMEOUT, ready).await {
            Ok(Ok(Some(n))) => n,
            other => {
                let _ = nodes.delete(&node, &DeleteParams::default()).await;
                return Err(format!("node {node} did not become ready: {other:?}"));
            }
        };
        let host_ip = node_object
            .status
            .and_then(|s| s.addresses)
            .and_then(|a| a.into_iter().find(|a| a.type_ == "InternalIP"))
            .map_or_else(|| "127.0.0.1".to_owned(), |a| a.address);
        let dir = tempfile::Builder::new()
            .prefix("tether-standin-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let ctx = Arc::new(pod::Context {
            client: client.clone(),
            node: node.clone(),
            host_ip,
            runtime: runtime.to_path_buf(),
            images,
            dir: dir.path().to_path_buf(),
        });
        let task = tokio::spawn(watch_pods(ctx));
        Ok(Self {
            node,
            client,
            task,
            _dir: dir,
        })
    }

    /// The node's name (what a Pod's `nodeSelector` names to land here:
    /// `kubernetes.io/hostname`).
    #[must_use]
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Stops every container and deletes the node.
    pub async fn stop(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
        let nodes: Api<Node> = Api::all(self.client.clone());
        let _ = nodes.delete(&self.node, &DeleteParams::default()).await;
    }
}

impl std::fmt::Debug for StandIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandIn")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The label of a stand-in's node: the test process's pid.
const STAND_IN_LABEL: &str = "tether.test/stand-in-pid";

/// Deletes the nodes of stand-ins whose test process is gone (a test that panicked), with
/// the Pods bound to them: no kubelet will ever finish deleting those.
async fn sweep_dead(client: &kube::Client, nodes: &Api<Node>) {
    let Ok(list) = nodes
        .list(&kube::api::ListParams::default().labels(STAND_IN_LABEL))
        .await
    else {
        return;
    };
    for node in list.items {
        let pid = node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(STAND_IN_LABEL))
            .cloned()
            .unwrap_or_default();
        if pid.is_empty() || Path::new("/proc").join(&pid).exists() {
            continue;
        }
        let name = node.metadata.name.unwrap_or_default();
        let pods: Api<Pod> = Api::all(client.clone());
        let on_node = kube::api::ListParams::default().fields(&format!("spec.nodeName={name}"));
        for pod in pods
            .list(&on_node)
            .await
            .map(|l| l.items)
            .unwrap_or_default()
        {
            let namespace = pod.metadata.namespace.unwrap_or_default();
            let _ = Api::<Pod>::namespaced(client.clone(), &namespace)
                .delete(
                    &pod.metadata.name.unwrap_or_default(),
                    &DeleteParams::default().grace_period(0),
                )
                .await;
        }
        let _ = nodes.delete(&name, &DeleteParams::default()).await;
    }
}

/// The Pods of this node: one task each, told when its Pod is being deleted.
async fn watch_pods(ctx: Arc<pod::Context>) {
    let pods: Api<Pod> = Api::all(ctx.client.clone());
    let config = watcher::Config::default()
        .fields(&format!("spec.nodeName={}", ctx.node))
        .labels(MANAGED_BY);
    let mut events = watcher(pods, config).boxed();
    let mut live = Live::default();
    let mut next_ip = 1u32;
    while let Some(event) = events.next().await {
        let (pod, gone) = match event {
            Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => (pod, false),
            Ok(watcher::Event::Delete(pod)) => (pod, true),
            Ok(_) | Err(_) => continue,
        };
        let Some(uid) = pod.metadata.uid.clone() else {
            continue;
        };
        live.0.retain(|_, (_, task)| !task.is_finished());
        let deleting = pod.metadata.deletion_timestamp.is_some() || gone;
        match live.0.get(&uid) {
            Some((stop, _)) if deleting => {
                let grace = if gone {
                    0
                } else {
                    pod.metadata.deletion_grace_period_seconds.unwrap_or(30)
                };
                let _ = stop.send(Some(Duration::from_secs(u64::try_from(grace).unwrap_or(0))));
            }
            Some(_) => {}
            None if gone => {}
            None => {
                let (stop, stopped) = watch::channel(deleting.then_some(Duration::ZERO));
                let pod_ip = format!("10.244.{}.{}", next_ip / 250, next_ip % 250 + 1);
                next_ip += 1;
                let task = tokio::spawn(pod::live(Arc::clone(&ctx), pod, pod_ip, stopped));
                live.0.insert(uid, (stop, task));
            }
        }
    }
}

/// The Pods' tasks by Pod uid, with the sender that tells each its Pod is being deleted.
/// Aborting the watcher drops this, which aborts the tasks, which drops their containers
/// (killed on drop).
#[derive(Default)]
struct Live(HashMap<String, (watch::Sender<Option<Duration>>, tokio::task::JoinHandle<()>)>);

impl Drop for Live {
    fn drop(&mut self) {
        for (_, task) in self.0.values() {
            task.abort();
        }
    }
}
