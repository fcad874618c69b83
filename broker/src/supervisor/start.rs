//! Launching a catalog plugin: its grants checked, its secrets and config fetched, its state
//! directory made, and its manifest turned into a [`PluginClientBuilder`].

use crate::catalog::launch::launch;
use crate::catalog::manifest::Manifest;
use crate::error::UseError;
use crate::launch::client::PluginClient;

impl crate::supervisor::Supervisor {
    pub(super) async fn start(&self, manifest: &Manifest) -> Result<PluginClient, UseError> {
        let inner = &self.inner;
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
                .map_err(|source| UseError::StateDir {
                    plugin: plugin.clone(),
                    path: state_dir.clone(),
                    source,
                })?;
        }
        builder = builder.current_dir(&state_dir).working_dir_is_hosts();
        if let Some(customize) = &inner.options.customize {
            builder = customize(builder);
        }
        builder
            .start()
            .await
            .map_err(|e| UseError::Start(Box::new(e)))
    }
}
