//! The Kubernetes cluster the Kubernetes tests run against: a real API server (with etcd,
//! controller-manager, scheduler) and kwok, started by `tests/k8s/cluster.sh up`, which prints
//! `TETHER_KUBECONFIG`.
//!
//! Without `TETHER_KUBECONFIG` the tests print how to start one and skip — unless
//! `TETHER_REQUIRE_PEERS=1` (CI sets it), in which case they fail.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::peers::{REQUIRE_PEERS_ENV, peers_required};

/// The variable naming the test cluster's kubeconfig.
pub const KUBECONFIG_ENV: &str = "TETHER_KUBECONFIG";

/// The variable naming a `kubectl` of the cluster's version (`tests/k8s/cluster.sh` prints it):
/// the tests apply the repository's YAML with it, as a user would.
pub const KUBECTL_ENV: &str = "TETHER_KUBECTL";

/// A connection to the test cluster and a namespace of the test's own.
#[derive(Clone)]
pub struct Cluster {
    /// An administrator's client.
    pub client: kube::Client,
    /// The kubeconfig file (hosts the tests start read it too).
    pub kubeconfig: PathBuf,
    /// The test's namespace (deleted by [`Cluster::cleanup`]).
    pub namespace: String,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("kubeconfig", &self.kubeconfig)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// A client from `kubeconfig`.
///
/// # Errors
/// When the file cannot be read or names no usable context.
pub async fn client_from(kubeconfig: &std::path::Path) -> Result<kube::Client, String> {
    let file =
        Kubeconfig::read_from(kubeconfig).map_err(|e| format!("{}: {e}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("{}: {e}", kubeconfig.display()))?;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// The test cluster with a fresh namespace named after `test`, or `None` (after printing
/// why) when there is none and peers are not required.
///
/// # Panics
/// When there is no cluster and `TETHER_REQUIRE_PEERS=1`, or the cluster does not answer.
pub async fn cluster_or_skip(test: &str) -> Option<Cluster> {
    let Some(kubeconfig) = std::env::var_os(KUBECONFIG_ENV).map(PathBuf::from) else {
        let why = format!(
            "{test}: no Kubernetes test cluster ({KUBECONFIG_ENV} is not set); start one with \
             `eval \"$(bash tests/k8s/cluster.sh up)\"`"
        );
        assert!(!peers_required(), "{why} ({REQUIRE_PEERS_ENV}=1)");
        eprintln!("skipping: {why}");
        return None;
    };
    let client = client_from(&kubeconfig)
        .await
        .unwrap_or_else(|e| panic!("{test}: the test cluster: {e}"));
    sweep_dead(&client).await;
    let namespace = namespace_name(test);
    let object: Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {PID_LABEL: std::process::id().to_string()}},
    }))
    .expect("a namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("{test}: creating namespace {namespace}: {e}"));
    Some(Cluster {
        client,
        kubeconfig,
        namespace,
    })
}

impl Cluster {
    /// Runs `kubectl` against this cluster in this namespace; its stdout.
    ///
    /// # Panics
    /// When `TETHER_KUBECTL` is unset or the command fails.
    #[must_use]
    pub fn kubectl(&self, args: &[&str]) -> String {
        let kubectl = std::env::var_os(KUBECTL_ENV).unwrap_or_else(|| {
            panic!("{KUBECTL_ENV} is not set (eval \"$(bash tests/k8s/cluster.sh env)\")")
        });
        let out = std::process::Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--namespace", &self.namespace])
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", kubectl.display()));
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A client of the API server authenticated as service account `account` of this
    /// namespace (a token from the TokenRequest API): what a host running as it may do.
    ///
    /// # Panics
    /// When the token or the client cannot be made.
    pub async fn client_as(&self, account: &str) -> kube::Client {
        let token = self.kubectl(&["create", "token", account, "--duration=1h"]);
        let file = Kubeconfig::read_from(&self.kubeconfig).expect("the test cluster's kubeconfig");
        let mut config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
            .await
            .expect("a client configuration from the test cluster's kubeconfig");
        config.auth_info = kube::config::AuthInfo {
            token: Some(token.trim().to_owned().into()),
            ..kube::config::AuthInfo::default()
        };
        config.default_namespace = self.namespace.clone();
        kube::Client::try_from(config).expect("a client of the test cluster")
    }

    /// Deletes the test's namespace (the namespace controller deletes what is left in it).
    pub async fn cleanup(self) {
        let _ = Api::<Namespace>::all(self.client)
            .delete(&self.namespace, &DeleteParams::default())
            .await;
    }
}

/// The label of a test's namespace: the test process's pid.
const PID_LABEL: &str = "tether.test/pid";

/// Deletes the namespaces of test processes that are gone (a test that panicked).
async fn sweep_dead(client: &kube::Client) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let Ok(list) = namespaces
        .list(&kube::api::ListParams::default().labels(PID_LABEL))
        .await
    else {
        return;
    };
    for namespace in list.items {
        let pid = namespace
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(PID_LABEL))
            .cloned()
            .unwrap_or_default();
        if !pid.is_empty() && !std::path::Path::new("/proc").join(&pid).exists() {
            let _ = namespaces
                .delete(
                    &namespace.metadata.name.unwrap_or_default(),
                    &DeleteParams::default(),
                )
                .await;
        }
    }
}

/// A DNS-label namespace name from a test's name: its first letters and a unique suffix.
fn namespace_name(test: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static SEQUENCE: AtomicU32 = AtomicU32::new(0);
    let stem: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    format!(
        "{}-{}-{}",
        stem.trim_matches('-'),
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    )
}
