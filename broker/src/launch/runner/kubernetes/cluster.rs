//! The Kubernetes API as the Pod runner uses it: a client from the options, and API errors in
//! words that say what the host was doing and, when RBAC refused it, which verb on which
//! resource it lacks.

use super::options::{ClusterAccess, KubernetesOptions};

/// The variable the kubelet sets in every container: the host runs in a cluster.
const IN_CLUSTER_ENV: &str = "KUBERNETES_SERVICE_HOST";

/// Where the RBAC the host needs is written down.
pub(crate) const RBAC_HINT: &str =
    "the Roles the host needs are in examples/kubernetes/rbac.yaml (docs/kubernetes.md, RBAC)";

/// Whether this process runs in a Kubernetes Pod.
pub(crate) fn in_cluster() -> bool {
    std::env::var_os(IN_CLUSTER_ENV).is_some()
}

/// A client as `options` say, and the namespace to use.
pub(crate) async fn connect(options: &KubernetesOptions) -> Result<(kube::Client, String), String> {
    let client = client(&options.access).await?;
    let namespace = options
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    Ok((client, namespace))
}

/// A client configured as `access` says.
pub(crate) async fn client(access: &ClusterAccess) -> Result<kube::Client, String> {
    Ok(match access {
        ClusterAccess::Client(client) => (**client).clone(),
        ClusterAccess::Infer => kube::Client::try_default()
            .await
            .map_err(|e| format!("cannot configure the Kubernetes client (in cluster: the service account; else KUBECONFIG or ~/.kube/config): {e}"))?,
        ClusterAccess::Kubeconfig(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("cannot read the kubeconfig {}: {e}", path.display()))?;
            let config = kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("the kubeconfig {} is not usable: {e}", path.display()))?;
            kube::Client::try_from(config)
                .map_err(|e| format!("cannot make a client from {}: {e}", path.display()))?
        }
    })
}

/// `error` from `verb` on `resource` (e.g. `create`, `secrets`) in `namespace`, in words.
pub(crate) fn api_error(
    error: &kube::Error,
    verb: &str,
    resource: &str,
    namespace: &str,
) -> String {
    match error {
        kube::Error::Api(status) if status.code == 403 => format!(
            "the host may not `{verb}` {resource} in namespace {namespace}: RBAC refused it ({}); grant the verb `{verb}` on `{resource}` to the host's service account — {RBAC_HINT}",
            status.message
        ),
        kube::Error::Api(status) => format!(
            "`{verb}` {resource} in namespace {namespace} failed: {} ({} {})",
            status.message, status.code, status.reason
        ),
        other => format!(
            "`{verb}` {resource} in namespace {namespace} failed: cannot reach the API server: {other}"
        ),
    }
}

/// Whether `error` is the API's "not found".
pub(crate) fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}
