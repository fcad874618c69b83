//! A world for the Pod runner's tests: the test cluster with a namespace of the test's own, a
//! stand-in kubelet ([`crate::kubelet`]) on a node of its own, the images it can run, and the
//! Pod runner's options pointing at all of it.

use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use tether_broker::launch::{
    ClusterAccess, Connection, KubernetesOptions, MANAGED_BY, MANAGED_BY_LABEL,
};

use crate::bins;
use crate::cluster::{Cluster, cluster_or_skip};
use crate::kubelet::{Images, StandIn};

/// How long a test waits for the cluster to finish deleting what a plugin left.
pub const NOTHING_LEFT_TIMEOUT: Duration = Duration::from_secs(30);

/// The cluster, a namespace, a stand-in kubelet and its images.
#[derive(Debug)]
pub struct PodWorld {
    /// The cluster and the test's namespace.
    pub cluster: Cluster,
    /// The stand-in kubelet running this world's Pods.
    pub kubelet: StandIn,
    /// The images the stand-in can run.
    pub images: Images,
    /// The `tether-pod-shim` image.
    pub shim: String,
}

impl PodWorld {
    /// The world for `test`, or `None` when there is no cluster (see [`cluster_or_skip`]).
    /// `runtime` is the `pod-container` binary.
    ///
    /// # Panics
    /// When the stand-in kubelet cannot start.
    pub async fn new(test: &str, runtime: &Path) -> Option<Self> {
        let cluster = cluster_or_skip(test).await?;
        let images = Images::default();
        let shim = images.add(
            "tether-pod-shim",
            &[("/tether-pod-shim", Path::new(bins::POD_SHIM.path()))],
            &["/tether-pod-shim"],
        );
        let kubelet = StandIn::start(cluster.client.clone(), runtime, images.clone())
            .await
            .unwrap_or_else(|e| panic!("{test}: the stand-in kubelet: {e}"));
        Some(Self {
            cluster,
            kubelet,
            images,
            shim,
        })
    }

    /// An image of one binary at `/plugin/<name>`; its reference.
    #[must_use]
    pub fn binary_image(&self, name: &str, binary: &Path) -> String {
        self.images
            .add(name, &[(&format!("/plugin/{name}"), binary)], &[])
    }

    /// Pod runner options for `image` in this world: its namespace, the stand-in's node, the
    /// shim image, through the API server's port-forward, this test's host identity.
    #[must_use]
    pub fn options(&self, image: &str) -> KubernetesOptions {
        KubernetesOptions::new(image)
            .access(ClusterAccess::Kubeconfig(self.cluster.kubeconfig.clone()))
            .namespace(&self.cluster.namespace)
            .node_selector("kubernetes.io/hostname", self.kubelet.node())
            .shim_image(&self.shim)
            .connection(Connection::PortForward)
            .host_id(&self.cluster.namespace)
    }

    /// The host's part of the Pod runner's options in this world, for a supervisor whose
    /// catalog's manifests name their images (`SupervisorBuilder::kubernetes`).
    #[must_use]
    pub fn host_options(&self) -> KubernetesOptions {
        KubernetesOptions::for_catalog()
            .access(ClusterAccess::Kubeconfig(self.cluster.kubeconfig.clone()))
            .namespace(&self.cluster.namespace)
            .node_selector("kubernetes.io/hostname", self.kubelet.node())
            .shim_image(&self.shim)
            .connection(Connection::PortForward)
            .host_id(&self.cluster.namespace)
    }

    /// The Pods, Secrets and ConfigMaps of the Pod runner in this world's namespace, as
    /// `kind/name`.
    pub async fn leftovers(&self) -> Vec<String> {
        let params = ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
        let client = &self.cluster.client;
        let ns = &self.cluster.namespace;
        let mut left = Vec::new();
        for pod in Api::<Pod>::namespaced(client.clone(), ns)
            .list(&params)
            .await
            .expect("listing the Pod runner's objects in the test's namespace")
            .items
        {
            left.push(format!("pod/{}", pod.metadata.name.unwrap_or_default()));
        }
        for secret in Api::<Secret>::namespaced(client.clone(), ns)
            .list(&params)
            .await
            .expect("listing the Pod runner's objects in the test's namespace")
            .items
        {
            left.push(format!(
                "secret/{}",
                secret.metadata.name.unwrap_or_default()
            ));
        }
        for map in Api::<ConfigMap>::namespaced(client.clone(), ns)
            .list(&params)
            .await
            .expect("listing the Pod runner's objects in the test's namespace")
            .items
        {
            left.push(format!(
                "configmap/{}",
                map.metadata.name.unwrap_or_default()
            ));
        }
        left
    }

    /// Asserts that nothing of the Pod runner's is left in the namespace.
    ///
    /// # Panics
    /// When a Pod, Secret or ConfigMap is left.
    pub async fn assert_nothing_left(&self) {
        let left = self.leftovers().await;
        assert!(
            left.is_empty(),
            "left in namespace {}: {left:?}",
            self.cluster.namespace
        );
    }

    /// Waits (watching Pods, Secrets and ConfigMaps, not polling) until nothing of the Pod
    /// runner's is left — what garbage collection does after an owner is deleted.
    ///
    /// # Panics
    /// When something is still there after [`NOTHING_LEFT_TIMEOUT`].
    pub async fn await_nothing_left(&self) {
        let client = &self.cluster.client;
        let ns = &self.cluster.namespace;
        let config = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
        let pods = watcher(Api::<Pod>::namespaced(client.clone(), ns), config.clone()).map(|_| ());
        let secrets = watcher(
            Api::<Secret>::namespaced(client.clone(), ns),
            config.clone(),
        )
        .map(|_| ());
        let maps = watcher(Api::<ConfigMap>::namespaced(client.clone(), ns), config).map(|_| ());
        let mut changes =
            futures_util::stream::select(pods, futures_util::stream::select(secrets, maps)).boxed();
        let waited = tokio::time::timeout(NOTHING_LEFT_TIMEOUT, async {
            loop {
                if self.leftovers().await.is_empty() {
                    return;
                }
                changes.next().await;
            }
        })
        .await;
        if waited.is_err() {
            self.assert_nothing_left().await;
        }
    }

    /// Stops the stand-in and deletes the namespace.
    pub async fn finish(self) {
        self.kubelet.stop().await;
        self.cluster.cleanup().await;
    }
}
