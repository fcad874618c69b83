//! What a previous incarnation of this host left: the Pods, Secrets and ConfigMaps labelled with
//! its identity, deleted when the Pod runner first starts a plugin in this process (and by
//! [`sweep`] when a host calls it at start-up). A host killed without its owner object going
//! (a container restart in the same Pod) would otherwise leave them until the owner is deleted.

use std::collections::HashSet;
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams};

use super::cluster::api_error;
use super::objects::label_value;
use super::options::{HOST_LABEL, MANAGED_BY, MANAGED_BY_LABEL};

/// The `(namespace, identity)` pairs swept by this process; held while sweeping, so a launch
/// never starts while its sweep could still delete what it makes.
static SWEPT: OnceLock<tokio::sync::Mutex<HashSet<(String, String)>>> = OnceLock::new();

/// Deletes every Pod, Secret and ConfigMap in `namespace` that the Pod runner made for the host
/// `identity` (labels `app.kubernetes.io/managed-by=tether`, `tether.dev/host=<identity>`).
/// Returns how many Pods it deleted.
///
/// # Errors
/// The API's refusal in words (the verbs: `list` and `delete` on pods, `deletecollection` on
/// secrets and configmaps).
pub async fn sweep(
    client: &kube::Client,
    namespace: &str,
    identity: &str,
) -> Result<usize, String> {
    let selector = format!(
        "{MANAGED_BY_LABEL}={MANAGED_BY},{HOST_LABEL}={}",
        label_value(identity)
    );
    let params = ListParams::default().labels(&selector);
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let listed = pods
        .list(&params)
        .await
        .map_err(|e| api_error(&e, "list", "pods", namespace))?;
    let now = DeleteParams::default().grace_period(0);
    for pod in &listed.items {
        if let Some(name) = &pod.metadata.name {
            pods.delete(name, &now)
                .await
                .map_err(|e| api_error(&e, "delete", "pods", namespace))?;
        }
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    secrets
        .delete_collection(&DeleteParams::default(), &params)
        .await
        .map_err(|e| api_error(&e, "deletecollection", "secrets", namespace))?;
    let configs: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    configs
        .delete_collection(&DeleteParams::default(), &params)
        .await
        .map_err(|e| api_error(&e, "deletecollection", "configmaps", namespace))?;
    if !listed.items.is_empty() {
        tracing::info!(
            namespace,
            identity,
            pods = listed.items.len(),
            "deleted the plugin Pods a previous incarnation of this host left"
        );
    }
    Ok(listed.items.len())
}

/// [`sweep`], once per namespace and identity in this process.
pub(crate) async fn once(
    client: &kube::Client,
    namespace: &str,
    identity: &str,
) -> Result<(), String> {
    let key = (namespace.to_owned(), identity.to_owned());
    let mut swept = SWEPT.get_or_init(Default::default).lock().await;
    if !swept.contains(&key) {
        sweep(client, namespace, identity).await?;
        swept.insert(key);
    }
    Ok(())
}
