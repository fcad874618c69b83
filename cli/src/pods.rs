//! `tether run` in Kubernetes (cargo feature `kubernetes`): the host's part of the Pod runner
//! for catalog plugins with `runner = "kubernetes"`, and secrets read through the API from one
//! Secret (only the granted keys), so an agent Pod mounts no plugin's secret volume.

use clap::Args;
use tether_broker::catalog::KubernetesValueSource;
use tether_broker::launch::{ClusterAccess, KubernetesOptions, Owner};
use tether_broker::{DirValueSource, SupervisorBuilder};

use crate::error::CliError;

/// The downward API's variables an agent Pod sets for itself (see
/// `examples/kubernetes/agent.yaml`): the Pod's name, uid and namespace.
pub(crate) const POD_NAME_ENV: &str = "TETHER_POD_NAME";
/// See [`POD_NAME_ENV`].
pub(crate) const POD_UID_ENV: &str = "TETHER_POD_UID";
/// See [`POD_NAME_ENV`].
pub(crate) const POD_NAMESPACE_ENV: &str = "TETHER_POD_NAMESPACE";

/// Where plugin Pods go and where secrets come from, for `tether run` in a cluster.
#[derive(Debug, Clone, Args)]
pub(crate) struct PodArgs {
    /// The namespace of plugin Pods and of `--secrets-from-secret` [default:
    /// $TETHER_POD_NAMESPACE, else the cluster client's (in a Pod: its own)].
    #[arg(long = "pods-namespace", value_name = "NAMESPACE")]
    pub(crate) namespace: Option<String>,
    /// The image holding `tether-pod-shim`, pinned by digest (an init container copies it into
    /// each plugin Pod).
    #[arg(long = "pods-shim-image", value_name = "IMAGE")]
    pub(crate) shim_image: Option<String>,
    /// The service account plugin Pods run as (no token is mounted).
    #[arg(long = "pods-service-account", value_name = "NAME")]
    pub(crate) service_account: Option<String>,
    /// Schedule plugin Pods only onto nodes with this label (repeatable).
    #[arg(long = "pods-node-selector", value_name = "KEY=VALUE")]
    pub(crate) node_selector: Vec<String>,
    /// Secrets are the keys of this Secret, read through the API (only the keys the grants
    /// file grants a plugin are read) instead of files in `--secrets`.
    #[arg(long = "secrets-from-secret", value_name = "SECRET")]
    pub(crate) secret: Option<String>,
}

impl PodArgs {
    /// The namespace asked for: the flag, else the downward API's variable.
    fn namespace(&self) -> Option<String> {
        self.namespace
            .clone()
            .or_else(|| std::env::var(POD_NAMESPACE_ENV).ok())
    }

    /// The Pod runner's host options: these flags, and the agent's own Pod as the owner of
    /// every plugin Pod and Secret when the downward API names it (`TETHER_POD_NAME`,
    /// `TETHER_POD_UID`): deleting the agent's Pod then deletes them.
    pub(crate) fn host_options(&self) -> Result<KubernetesOptions, CliError> {
        let mut options = KubernetesOptions::for_catalog();
        if let Some(namespace) = self.namespace() {
            options = options.namespace(namespace);
        }
        if let Some(image) = &self.shim_image {
            options = options.shim_image(image);
        }
        if let Some(account) = &self.service_account {
            options = options.service_account(account);
        }
        for pair in &self.node_selector {
            let (key, value) = pair.split_once('=').ok_or_else(|| {
                CliError::Usage(format!(
                    "--pods-node-selector {pair:?} is not of the form KEY=VALUE"
                ))
            })?;
            options = options.node_selector(key, value);
        }
        if let (Ok(name), Ok(uid)) = (std::env::var(POD_NAME_ENV), std::env::var(POD_UID_ENV)) {
            options = options.owner(Owner::pod(name, uid));
        }
        Ok(options)
    }

    /// `builder` with these settings: the Pod runner's host part, and the secret source.
    pub(crate) fn apply(
        &self,
        builder: SupervisorBuilder,
        files: DirValueSource,
    ) -> Result<SupervisorBuilder, CliError> {
        let builder = builder.kubernetes(self.host_options()?);
        let Some(secret) = &self.secret else {
            return Ok(builder.secrets(files));
        };
        let namespace = self.namespace().ok_or_else(|| {
            CliError::Usage(format!(
                "--secrets-from-secret {secret}: name its namespace with --pods-namespace or \
                 {POD_NAMESPACE_ENV}"
            ))
        })?;
        let source = KubernetesValueSource::new(ClusterAccess::Infer, namespace, secret)
            .map_err(|e| CliError::Usage(format!("--secrets-from-secret {secret}: {e}")))?;
        Ok(builder.secrets(source))
    }
}
