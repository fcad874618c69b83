//! The Pod runner's options ([`KubernetesOptions`]): which image, which cluster and namespace,
//! how the host reaches the Pod, what owns it, and its limits. Plain data.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How long a Pod may take from its creation to its plugin's container running: scheduling and
/// pulling the image included (seconds on a warm node, minutes for a large image on a cold one).
/// The handshake's own [`DEFAULT_START_TIMEOUT`](crate::launch::DEFAULT_START_TIMEOUT) starts
/// after it. Override with [`KubernetesOptions::pod_start_timeout`].
pub const DEFAULT_POD_START_TIMEOUT: Duration = Duration::from_secs(120);

/// The Pod's port on which `tether-pod-shim` relays to the plugin. Override with
/// [`KubernetesOptions::port`].
pub const DEFAULT_POD_PORT: u16 = 7070;

/// Where the plugin's container finds `tether-pod-shim` when an init container installs it
/// from [`KubernetesOptions::shim_image`].
pub const SHIM_INSTALL_DIR: &str = "/run/tether/bin";

/// The path of `tether-pod-shim` in the image [`KubernetesOptions::shim_image`] names.
pub const SHIM_IN_SHIM_IMAGE: &str = "/tether-pod-shim";

/// Where the Pod's Secret of granted values is mounted (`TETHER_SECRETS_DIR`).
pub const POD_SECRETS_DIR: &str = "/run/tether/secrets";

/// Where the Pod's ConfigMap of granted config files is mounted (`TETHER_CONFIG_DIR`).
pub const POD_CONFIG_DIR: &str = "/run/tether/config";

/// The plugin's writable directory in the Pod (`TMPDIR`, `PLUGIN_UNIX_SOCKET_DIR`): an
/// `emptyDir` in memory, the only writable place (the root file system is read-only).
pub const POD_TMP_DIR: &str = "/run/tether/tmp";

/// The plugin's working directory in the Pod: an `emptyDir` of its own (on the node's disk),
/// where it keeps what it writes relative to its working directory.
pub const POD_WORK_DIR: &str = "/run/tether/work";

/// The label every object the Pod runner makes carries (`app.kubernetes.io/managed-by`).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// [`MANAGED_BY_LABEL`]'s value.
pub const MANAGED_BY: &str = "tether";

/// The label naming the host that made an object ([`KubernetesOptions::host_id`]): what the
/// start-up sweep deletes by.
pub const HOST_LABEL: &str = "tether.dev/host";

/// The label naming the plugin an object is for.
pub const PLUGIN_LABEL: &str = "tether.dev/plugin";

/// The user a plugin runs as when its image and the options do not say (distroless `nonroot`).
pub const DEFAULT_RUN_AS_USER: i64 = 65532;

/// How the host reaches the plugin's Pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Connection {
    /// In cluster at the Pod's IP when the host runs in a Pod (the service account's
    /// environment is set), through the API server's port-forward otherwise.
    #[default]
    Auto,
    /// The Pod's IP: the host runs in the cluster (a NetworkPolicy should let only the host's
    /// Pod reach plugin Pods: see `examples/kubernetes/`). The shim listens on all the Pod's
    /// addresses.
    PodIp,
    /// The API server's port-forward (`pods/portforward`), from anywhere the API server is
    /// reachable; the shim listens on the Pod's loopback only, so nothing but a port-forward
    /// reaches the plugin. Slower per connection; the multiplexed broker makes one.
    PortForward,
}

/// Where the Kubernetes client's configuration comes from.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum ClusterAccess {
    /// In cluster, the Pod's service account; else `KUBECONFIG` or `~/.kube/config` (kube's
    /// inference).
    #[default]
    Infer,
    /// This kubeconfig file (its current context).
    Kubeconfig(PathBuf),
    /// A client the host already has. Its requests run on the host's runtime (its
    /// connections' tasks are spawned where a request is first polled): make it, and a
    /// `KubernetesValueSource` that uses it, on the runtime the host keeps running.
    Client(Arc<kube::Client>),
}

impl fmt::Debug for ClusterAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Infer => f.write_str("Infer"),
            Self::Kubeconfig(path) => f.debug_tuple("Kubeconfig").field(path).finish(),
            Self::Client(_) => f.write_str("Client(..)"),
        }
    }
}

impl PartialEq for ClusterAccess {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Infer, Self::Infer) => true,
            (Self::Kubeconfig(a), Self::Kubeconfig(b)) => a == b,
            (Self::Client(a), Self::Client(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for ClusterAccess {}

/// The object whose deletion deletes the host's plugin Pods and their Secrets (garbage
/// collection): normally the host's own Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// `v1` for a Pod.
    pub api_version: String,
    /// `Pod`.
    pub kind: String,
    /// Its name (in the runner's namespace: owners are namespaced like their dependents).
    pub name: String,
    /// Its uid.
    pub uid: String,
}

impl Owner {
    /// The Pod `name` with `uid` (the host's own: the downward API's `metadata.name` and
    /// `metadata.uid`).
    #[must_use]
    pub fn pod(name: impl Into<String>, uid: impl Into<String>) -> Self {
        Self {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: name.into(),
            uid: uid.into(),
        }
    }
}

/// Options of the Pod runner: one Pod per plugin instance, made from the plugin's image.
///
/// ```
/// use tether_broker::launch::{Connection, KubernetesOptions, Owner};
/// let options = KubernetesOptions::new("registry.example/kv@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
///     .namespace("agents")
///     .shim_image("registry.example/tether-pod-shim@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210")
///     .owner(Owner::pod("agent-0", "6f1c…"))
///     .connection(Connection::PodIp);
/// assert_eq!(options.image_reference(), "registry.example/kv@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesOptions {
    pub(crate) image: String,
    pub(crate) namespace: Option<String>,
    pub(crate) access: ClusterAccess,
    pub(crate) connection: Connection,
    pub(crate) shim_image: Option<String>,
    pub(crate) shim_path: Option<String>,
    pub(crate) port: u16,
    pub(crate) owner: Option<Owner>,
    pub(crate) host_id: Option<String>,
    pub(crate) node_selector: BTreeMap<String, String>,
    pub(crate) runtime_class: Option<String>,
    pub(crate) service_account: Option<String>,
    pub(crate) run_as_user: i64,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) pod_start_timeout: Duration,
    pub(crate) memory_limit: Option<String>,
    pub(crate) cpu_limit: Option<String>,
}

impl KubernetesOptions {
    /// Pods of `image`, which must be pinned by digest (`repository@sha256:<64 hex>`; checked
    /// at start). The plugin's command (the builder's program and arguments) is a path in it.
    #[must_use]
    pub fn new(image: impl Into<String>) -> Self {
        Self {
            image: image.into(),
            namespace: None,
            access: ClusterAccess::Infer,
            connection: Connection::Auto,
            shim_image: None,
            shim_path: None,
            port: DEFAULT_POD_PORT,
            owner: None,
            host_id: None,
            node_selector: BTreeMap::new(),
            runtime_class: None,
            service_account: None,
            run_as_user: DEFAULT_RUN_AS_USER,
            labels: BTreeMap::new(),
            pod_start_timeout: DEFAULT_POD_START_TIMEOUT,
            memory_limit: None,
            cpu_limit: None,
        }
    }

    /// The host's part of the options for a catalog whose manifests name their images (see
    /// [`SupervisorBuilder::kubernetes`](crate::SupervisorBuilder::kubernetes)): no image of
    /// its own, every other setting at its default.
    #[must_use]
    pub fn for_catalog() -> Self {
        Self::new(String::new())
    }

    /// These options (the host's) with what a manifest's `[kubernetes]` table decides taken
    /// from `plugin`: the image, the limits, and the runtime class when it names one.
    #[must_use]
    pub(crate) fn with_plugin(&self, plugin: &Self) -> Self {
        Self {
            image: plugin.image.clone(),
            memory_limit: plugin.memory_limit.clone(),
            cpu_limit: plugin.cpu_limit.clone(),
            runtime_class: plugin
                .runtime_class
                .clone()
                .or_else(|| self.runtime_class.clone()),
            ..self.clone()
        }
    }

    /// The image.
    #[must_use]
    pub fn image_reference(&self) -> &str {
        &self.image
    }

    /// The namespace of the Pods and their Secrets (default: the client's, e.g. the host
    /// Pod's own namespace in cluster).
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Where the client's configuration comes from (default: inferred).
    #[must_use]
    pub fn access(mut self, access: ClusterAccess) -> Self {
        self.access = access;
        self
    }

    /// How the host reaches the Pod (default: [`Connection::Auto`]).
    #[must_use]
    pub fn connection(mut self, connection: Connection) -> Self {
        self.connection = connection;
        self
    }

    /// An image holding `tether-pod-shim` at [`SHIM_IN_SHIM_IMAGE`] (pinned by digest): an init
    /// container copies it into the Pod, so the plugin's image needs nothing of tether's.
    #[must_use]
    pub fn shim_image(mut self, image: impl Into<String>) -> Self {
        self.shim_image = Some(image.into());
        self
    }

    /// Where the plugin's image already has `tether-pod-shim` (instead of
    /// [`shim_image`](Self::shim_image)).
    #[must_use]
    pub fn shim_path(mut self, path: impl Into<String>) -> Self {
        self.shim_path = Some(path.into());
        self
    }

    /// The Pod's port the host connects to (default [`DEFAULT_POD_PORT`]).
    #[must_use]
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// The object that owns every Pod, Secret and ConfigMap the runner makes (normally the
    /// host's own Pod): deleting it deletes them. Its uid is also the host's identity for the
    /// start-up sweep unless [`host_id`](Self::host_id) says otherwise.
    #[must_use]
    pub fn owner(mut self, owner: Owner) -> Self {
        self.owner = Some(owner);
        self
    }

    /// The host's identity, stable across its restarts (a label value: up to 63 letters,
    /// digits, `-`, `_`, `.`): the objects of a previous incarnation with the same identity are
    /// deleted when the runner first starts a Pod in this process. Default: the owner's uid.
    #[must_use]
    pub fn host_id(mut self, id: impl Into<String>) -> Self {
        self.host_id = Some(id.into());
        self
    }

    /// Schedules the Pods only onto nodes with this label.
    #[must_use]
    pub fn node_selector(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.node_selector.insert(key.into(), value.into());
        self
    }

    /// The Pods' `runtimeClassName` (e.g. `gvisor`, where the cluster has it).
    #[must_use]
    pub fn runtime_class(mut self, class: impl Into<String>) -> Self {
        self.runtime_class = Some(class.into());
        self
    }

    /// The Pods' service account (default: the namespace's `default`). Its token is never
    /// mounted; it matters only to admission policies.
    #[must_use]
    pub fn service_account(mut self, name: impl Into<String>) -> Self {
        self.service_account = Some(name.into());
        self
    }

    /// The user the plugin runs as (never root; default [`DEFAULT_RUN_AS_USER`]). Its group is
    /// the same id and owns the Pod's mounted Secret (`fsGroup`).
    #[must_use]
    pub fn run_as_user(mut self, uid: i64) -> Self {
        self.run_as_user = uid;
        self
    }

    /// An extra label on every object the runner makes.
    #[must_use]
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// How long a Pod may take to have its container running (default
    /// [`DEFAULT_POD_START_TIMEOUT`]).
    #[must_use]
    pub fn pod_start_timeout(mut self, timeout: Duration) -> Self {
        self.pod_start_timeout = timeout;
        self
    }

    /// The container's memory limit, a Kubernetes quantity (`256Mi`), also its request.
    #[must_use]
    pub fn memory_limit(mut self, quantity: impl Into<String>) -> Self {
        self.memory_limit = Some(quantity.into());
        self
    }

    /// The container's CPU limit, a Kubernetes quantity (`500m`), also its request.
    #[must_use]
    pub fn cpu_limit(mut self, quantity: impl Into<String>) -> Self {
        self.cpu_limit = Some(quantity.into());
        self
    }

    /// The host's identity: [`host_id`](Self::host_id), else the owner's uid.
    pub(crate) fn identity(&self) -> Option<&str> {
        self.host_id
            .as_deref()
            .or(self.owner.as_ref().map(|o| o.uid.as_str()))
    }
}
