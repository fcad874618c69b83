//! Launching a catalog plugin: its grants checked, its secrets and config fetched, its state
//! directory made, and its manifest turned into a [`PluginClientBuilder`].

use tether_proto::ValueKind;

use crate::catalog::delivery::Delivery;
use crate::catalog::manifest::Manifest;
use crate::error::UseError;
use crate::launch::builder::HandshakeConfig;
use crate::launch::client::PluginClient;

impl crate::supervisor::Broker {
    pub(super) async fn start(&self, manifest: &Manifest) -> Result<PluginClient, UseError> {
        let inner = &self.inner;
        let plugin = &manifest.name;
        inner.options.grants.check(manifest)?;
        let mut delivery = Delivery::new();
        for (kind, names, source) in [
            (ValueKind::Secret, &manifest.secrets, &inner.options.secrets),
            (ValueKind::Config, &manifest.config, &inner.options.config),
        ] {
            for name in names {
                let value = source
                    .fetch(name)
                    .map_err(|source| UseError::Source {
                        plugin: plugin.clone(),
                        kind,
                        name: name.clone(),
                        source,
                    })?
                    .ok_or_else(|| UseError::MissingValue {
                        plugin: plugin.clone(),
                        kind,
                        name: name.clone(),
                        source_name: source.describe(),
                    })?;
                delivery = match kind {
                    ValueKind::Secret => delivery.secret(name.clone(), value),
                    ValueKind::Config => delivery.config(name.clone(), value),
                };
            }
        }
        let state_dir = inner.options.state_dir.join(plugin);
        {
            use std::os::unix::fs::DirBuilderExt as _;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&state_dir)
                .map_err(|source| UseError::StateDir {
                    plugin: plugin.clone(),
                    path: state_dir.clone(),
                    source,
                })?;
        }
        let mut builder = PluginClient::builder(&manifest.command)
            .name(plugin.clone())
            .args(&manifest.args)
            .current_dir(&state_dir)
            .sandbox(manifest.sandbox)
            .limits(manifest.limits)
            .deliver(delivery)
            .handshake(
                HandshakeConfig::new(&manifest.cookie_key, &manifest.cookie_value)
                    .app_versions(manifest.app_versions.iter().copied()),
            );
        for name in &manifest.env_allow {
            builder = builder.env_allow(name);
        }
        for path in &manifest.sandbox_allow_exec {
            builder = builder.sandbox_allow_exec(path);
        }
        for path in &manifest.sandbox_allow_read {
            builder = builder.sandbox_allow_read(path);
        }
        if let Some(hash) = &manifest.sha256 {
            builder = builder.sha256(hash.clone());
        }
        if let Some(customize) = &inner.options.customize {
            builder = customize(builder);
        }
        builder
            .start()
            .await
            .map_err(|e| UseError::Start(Box::new(e)))
    }
}
