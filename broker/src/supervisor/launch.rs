//! A catalog plugin's launch, as the operator's policy allows it: the manifest checked against
//! the grants, its granted secrets and config fetched from their sources, and the manifest
//! applied to a [`PluginClientBuilder`] ([`launch`]: the one place where a manifest becomes a
//! launch, used by the [`Supervisor`](crate::Supervisor) and the `tether` command alike); and
//! the supervisor's start of one, in its state directory.

use std::sync::Arc;

use tether_proto::ValueKind;

use crate::catalog::grants::Grants;
use crate::catalog::manifest::Manifest;
use crate::catalog::sources::ValueSource;
use crate::launch::builder::PluginClientBuilder;
use crate::launch::client::PluginClient;
use crate::launch::delivery::Delivery;
use crate::launch::settings::HandshakeConfig;
use crate::supervisor::error::{UseError, UseErrorKind};
use crate::supervisor::version::Version;

/// The builder for `manifest`'s plugin, if `grants` allow what it requests (secrets, config
/// and every loosening of its confinement: see [`Grants`]), confined as
/// [`Grants::confinement_of`] says (the operator's `run_as` and namespaces policy applied), with its secrets
/// from `secrets` and config files from `config` to be delivered. The caller adds what is
/// its own to decide (working directory, timeouts…) and starts it.
///
/// # Errors
/// [`UseErrorKind::NotGranted`] when the manifest requests something not granted;
/// [`UseErrorKind::Source`] / [`UseErrorKind::MissingValue`] when a granted value cannot be read.
pub fn launch(
    manifest: &Manifest,
    grants: &Grants,
    secrets: &dyn ValueSource,
    config: &dyn ValueSource,
) -> Result<PluginClientBuilder<HandshakeConfig>, UseError> {
    grants.check(manifest)?;
    let delivery = fetch(manifest, secrets, config)?;
    let mut builder = PluginClient::builder(&manifest.command)
        .name(manifest.name.clone())
        .args(&manifest.args)
        .confinement(grants.confinement_of(manifest))
        .runtime(manifest.runtime)
        .runner(manifest.runner.clone())
        .handshake(
            HandshakeConfig::new(&manifest.cookie_key, &manifest.cookie_value)
                .app_versions(manifest.app_versions.iter().copied()),
        );
    if !delivery.is_empty() {
        builder = builder.deliver(delivery);
    }
    if let Some(hash) = &manifest.sha256 {
        builder = builder.sha256(hash.clone());
    }
    if let Some(place) = grants.run_as_place(&manifest.name) {
        builder = builder.run_as_set_at(place);
    }
    Ok(builder)
}

/// The values `manifest` requests, read from their sources.
fn fetch(
    manifest: &Manifest,
    secrets: &dyn ValueSource,
    config: &dyn ValueSource,
) -> Result<Delivery, UseError> {
    let plugin = &manifest.name;
    let mut delivery = Delivery::new();
    for (kind, names, source) in [
        (ValueKind::Secret, &manifest.secrets, secrets),
        (ValueKind::Config, &manifest.config, config),
    ] {
        for name in names {
            let value = source
                .fetch(name)
                .map_err(|source| {
                    UseError::new(
                        plugin,
                        UseErrorKind::Source {
                            kind,
                            name: name.clone(),
                            source,
                        },
                    )
                })?
                .ok_or_else(|| {
                    UseError::new(
                        plugin,
                        UseErrorKind::MissingValue {
                            kind,
                            name: name.clone(),
                            source_name: source.describe(),
                        },
                    )
                })?;
            delivery = match kind {
                ValueKind::Secret => delivery.secret(name.clone(), value),
                ValueKind::Config => delivery.config(name.clone(), value),
            };
        }
    }
    Ok(delivery)
}

impl crate::supervisor::Supervisor {
    pub(super) async fn start(&self, version: &Version) -> Result<PluginClient, UseError> {
        let inner = &self.inner;
        let manifest = &version.manifest;
        let plugin = &manifest.name;
        let mut builder = launch(
            manifest,
            &inner.options.grants,
            &*inner.options.secrets,
            &*inner.options.config,
        )?;
        let state_dir = inner.options.state_dir.join(plugin);
        {
            use std::os::unix::fs::DirBuilderExt as _;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&state_dir)
                .map_err(|source| {
                    UseError::new(
                        plugin,
                        UseErrorKind::StateDir {
                            path: state_dir.clone(),
                            source,
                        },
                    )
                })?;
        }
        let (calls, broker) = crate::supervisor::calls::calls_service(plugin, inner);
        builder = builder
            .current_dir(&state_dir)
            .working_dir_is_hosts()
            .host_service(calls);
        #[cfg(feature = "kubernetes")]
        if let (crate::launch::runner::options::Runner::Kubernetes(plugin), Some(host)) =
            (&manifest.runner, &inner.options.kubernetes)
        {
            builder = builder.runner(crate::launch::runner::options::Runner::Kubernetes(
                host.with_plugin(plugin),
            ));
        }
        if let Some(customize) = &inner.options.customize {
            builder = customize(builder);
        }
        if let Some(metrics) = &version.metrics {
            // After `customize`: a host's own telemetry settings keep the supervisor's metrics.
            builder.settings.telemetry.call_metrics = Some(Arc::new(metrics.clone()));
        }
        let client = builder.start().await.map_err(UseError::from)?;
        broker.send_replace(Some(client.broker()));
        Ok(client)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::catalog::sources::MemoryValueSource;

    #[test]
    fn a_granted_manifests_whole_confinement_reaches_the_builder_as_one_value() {
        let text = "name = \"a\"\ncommand = \"a\"\nsandbox = \"best-effort\"\n\
                    network = \"host\"\nseccomp = \"off\"\nenv_allow = [\"HOME\"]\n\
                    sandbox_allow_read = [\"/srv\"]\nsandbox_allow_exec = [\"/opt\"]\n\
                    [handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\n\
                    [limits]\nmemory_mib = 64\n";
        let manifest = Manifest::parse(text, Path::new("/cat/a.toml")).unwrap();
        let none = MemoryValueSource::new();
        let refused = launch(&manifest, &Grants::new(), &none, &none).unwrap_err();
        assert!(
            matches!(refused.kind(), UseErrorKind::NotGranted(_)),
            "{refused}"
        );
        let grants = Grants::new().confinement("a", manifest.confinement.clone());
        let builder = launch(&manifest, &grants, &none, &none).unwrap();
        assert_eq!(builder.settings.confinement, manifest.confinement);
        assert_eq!(builder.settings.confinement.limits.memory_mib, Some(64));
    }
}
