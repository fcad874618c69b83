//! One plugin Pod's life on the API server: create its Secret, ConfigMap and Pod; wait until the
//! container runs (or say why it will not, or what it still waited for when the Pod start
//! timeout ran out); then follow it to its end — the container's exit, a deletion the runner
//! asked for, or one it did not (garbage collection after the owner went) — and delete what
//! is left before reporting the end, so "ended" means nothing of it is left.

use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::time::Duration;

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use kube::runtime::watcher;
use tokio::sync::watch;

use super::cluster::{api_error, is_not_found};
use super::objects::Planned;
use super::status::{self, Progress};

/// The status a plugin whose Pod was deleted under it ends with (as if killed).
const DELETED_STATUS: i32 = libc::SIGKILL;

/// A created Pod and its companions.
#[derive(Clone)]
pub(crate) struct PodObjects {
    pub(crate) pods: Api<Pod>,
    pub(crate) secrets: Api<Secret>,
    pub(crate) configs: Api<ConfigMap>,
    pub(crate) events: Api<Event>,
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) has_secret: bool,
    pub(crate) has_config: bool,
}

impl std::fmt::Debug for PodObjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodObjects")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Creates the Secret and ConfigMap (holding the granted values), then the Pod.
pub(crate) async fn create(
    client: &kube::Client,
    namespace: &str,
    planned: Planned,
) -> Result<PodObjects, String> {
    let params = PostParams::default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let configs: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let name = planned.pod.metadata.name.clone().unwrap_or_default();
    let mut objects = PodObjects {
        pods: pods.clone(),
        secrets: secrets.clone(),
        configs: configs.clone(),
        events: Api::namespaced(client.clone(), namespace),
        namespace: namespace.to_owned(),
        name,
        uid: String::new(),
        has_secret: false,
        has_config: false,
    };
    if let Some(secret) = &planned.secret {
        secrets
            .create(&params, secret)
            .await
            .map_err(|e| api_error(&e, "create", "secrets", namespace))?;
        objects.has_secret = true;
    }
    if let Some(config) = &planned.config {
        if let Err(e) = configs.create(&params, config).await {
            objects.delete_companions().await;
            return Err(api_error(&e, "create", "configmaps", namespace));
        }
        objects.has_config = true;
    }
    match pods.create(&params, &planned.pod).await {
        Ok(pod) => {
            objects.uid = pod.metadata.uid.unwrap_or_default();
            Ok(objects)
        }
        Err(e) => {
            objects.delete_companions().await;
            Err(api_error(&e, "create", "pods", namespace))
        }
    }
}

impl PodObjects {
    fn watch_config(&self) -> watcher::Config {
        watcher::Config::default().fields(&format!("metadata.name={}", self.name))
    }

    /// Waits until the container runs; its Pod IP then. On failure or after `timeout`, the
    /// reason (with the newest warning event), the Pod and its companions already deleted.
    pub(crate) async fn running(&self, timeout: Duration) -> Result<Option<String>, String> {
        let mut last = Progress::Starting("Pending: created".into());
        let waited = tokio::time::timeout(timeout, async {
            let mut events = watcher(self.pods.clone(), self.watch_config()).boxed();
            while let Some(event) = events.next().await {
                let pod = match event {
                    Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => pod,
                    Ok(watcher::Event::Delete(_)) => {
                        return Err("the Pod was deleted before its container ran".to_owned());
                    }
                    Ok(_) => continue,
                    Err(e) => return Err(format!("watching the Pod failed (`watch` pods): {e}")),
                };
                if pod.metadata.uid.as_deref() != Some(&self.uid) {
                    continue;
                }
                last = status::progress(&pod);
                match &last {
                    Progress::Running { pod_ip } => return Ok(pod_ip.clone()),
                    Progress::Failed(why) => return Err(why.clone()),
                    Progress::Exited { code, reason } => {
                        return Err(format!(
                            "its container ended at once with {code} ({reason})"
                        ));
                    }
                    Progress::Starting(_) => {}
                }
            }
            Err("the watch of the Pod ended".to_owned())
        })
        .await;
        let result = match waited {
            Ok(result) => result,
            Err(_) => Err(match &last {
                Progress::Starting(doing) => format!(
                    "its container was not running after {timeout:?} (the Pod start timeout: KubernetesOptions::pod_start_timeout); the Pod was {doing}"
                ),
                other => format!("{other:?} after {timeout:?}"),
            }),
        };
        match result {
            Ok(ip) => Ok(ip),
            Err(why) => {
                let warning = self.latest_warning().await;
                self.delete(Duration::ZERO).await;
                self.gone().await;
                Err(match warning {
                    Some(w) if !why.contains(&w) => format!("{why}; last warning: {w}"),
                    _ => why,
                })
            }
        }
    }

    async fn latest_warning(&self) -> Option<String> {
        let params = ListParams::default().fields(&format!("involvedObject.uid={}", self.uid));
        let events = self.events.list(&params).await.ok()?;
        status::latest_warning(&events.items)
    }

    /// Asks the API server to delete the Pod with `grace`, by uid (a Pod of the same name made
    /// later is never hit).
    pub(crate) async fn delete(&self, grace: Duration) {
        let params = DeleteParams {
            grace_period_seconds: Some(u32::try_from(grace.as_secs()).unwrap_or(u32::MAX)),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        if let Err(e) = self.pods.delete(&self.name, &params).await
            && !is_not_found(&e)
        {
            tracing::warn!(pod = %self.name, error = %api_error(&e, "delete", "pods", &self.namespace), "cannot delete the plugin's Pod");
        }
    }

    /// Deletes the Secret and ConfigMap.
    pub(crate) async fn delete_companions(&self) {
        let params = DeleteParams::default();
        if self.has_secret
            && let Err(e) = self.secrets.delete(&self.name, &params).await
            && !is_not_found(&e)
        {
            tracing::warn!(pod = %self.name, error = %api_error(&e, "delete", "secrets", &self.namespace), "cannot delete the plugin's Secret");
        }
        if self.has_config
            && let Err(e) = self.configs.delete(&self.name, &params).await
            && !is_not_found(&e)
        {
            tracing::warn!(pod = %self.name, error = %api_error(&e, "delete", "configmaps", &self.namespace), "cannot delete the plugin's ConfigMap");
        }
    }

    /// Waits until the Pod object is gone, then deletes its companions.
    async fn gone(&self) {
        let mut events = watcher(self.pods.clone(), self.watch_config()).boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Delete(pod))
                    if pod.metadata.uid.as_deref() == Some(&self.uid) =>
                {
                    break;
                }
                Ok(watcher::Event::InitDone) => {
                    // The list after (re)connecting had no Pod of this uid: it is gone.
                    if self
                        .pods
                        .get_opt(&self.name)
                        .await
                        .ok()
                        .flatten()
                        .is_none_or(|p| p.metadata.uid.as_deref() != Some(&self.uid))
                    {
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(pod = %self.name, error = %e, "watching the Pod's deletion failed; retrying");
                }
            }
        }
        self.delete_companions().await;
    }

    /// Follows the running Pod to its end: deletes it once its container has ended, waits for
    /// it to be gone and its companions deleted, then reports the plugin's exit status.
    pub(crate) async fn follow(self, exit: watch::Sender<Option<ExitStatus>>) {
        let mut status = ExitStatus::from_raw(DELETED_STATUS);
        let mut events = watcher(self.pods.clone(), self.watch_config()).boxed();
        while let Some(event) = events.next().await {
            let pod = match event {
                Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => pod,
                Ok(watcher::Event::Delete(pod))
                    if pod.metadata.uid.as_deref() == Some(&self.uid) =>
                {
                    break;
                }
                Ok(_) | Err(_) => continue,
            };
            if pod.metadata.uid.as_deref() != Some(&self.uid) {
                continue;
            }
            if let Progress::Exited { code, reason } = status::progress(&pod) {
                tracing::debug!(pod = %self.name, code, %reason, "the plugin's container ended");
                status = exit_status(code);
                self.delete(Duration::ZERO).await;
            }
        }
        drop(events);
        self.delete_companions().await;
        exit.send_replace(Some(status));
    }
}

/// A container's exit code as a process's status: 128 + N was signal N.
fn exit_status(code: i32) -> ExitStatus {
    match code {
        129..=159 => ExitStatus::from_raw(code - 128),
        _ => ExitStatus::from_raw((code & 0xff) << 8),
    }
}
