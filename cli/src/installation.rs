//! A catalog with its policy: manifests, grants, secret and config sources, and where the
//! binaries are.

use std::path::{Path, PathBuf};

use tether_broker::{Catalog, DirSecretSource, Grants, Manifest, catalog::ManifestError};

use crate::args::{CatalogArgs, InstallArgs};
use crate::error::CliError;

/// The agent demo's directory in this source tree: `catalog/`, `grants.toml`, `secrets/`,
/// `workflow.toml`.
pub(crate) fn demo_dir() -> PathBuf {
    let cli = Path::new(env!("CARGO_MANIFEST_DIR"));
    cli.parent().unwrap_or(cli).join("examples/agent")
}

/// A loaded catalog and what goes with it.
#[derive(Debug)]
pub(crate) struct Installation {
    /// The catalog directory.
    pub(crate) dir: PathBuf,
    /// The good manifests, commands resolved.
    pub(crate) catalog: Catalog,
    /// The manifests that could not be loaded.
    pub(crate) bad_manifests: Vec<ManifestError>,
    /// The policy.
    pub(crate) grants: Grants,
    /// Secret values.
    pub(crate) secrets: DirSecretSource,
    /// Config files.
    pub(crate) config: DirSecretSource,
}

impl Installation {
    /// Loads the catalog of `args` (the demo's by default).
    pub(crate) fn load(args: &CatalogArgs) -> Result<Self, CliError> {
        let dir = args
            .catalog
            .clone()
            .unwrap_or_else(|| demo_dir().join("catalog"));
        Self::load_dir(&dir, &args.install)
    }

    /// Loads the catalog in `dir`.
    pub(crate) fn load_dir(dir: &Path, install: &InstallArgs) -> Result<Self, CliError> {
        let loaded = Catalog::load_dir(dir).map_err(|source| CliError::Catalog {
            dir: dir.to_owned(),
            source,
        })?;
        let parent = dir.parent().unwrap_or(Path::new("."));
        let grants = match &install.grants {
            Some(file) => Grants::load(file).map_err(CliError::Grants)?,
            None => {
                let file = parent.join("grants.toml");
                if file.is_file() {
                    Grants::load(&file).map_err(CliError::Grants)?
                } else {
                    Grants::new()
                }
            }
        };
        let secrets = DirSecretSource::new(
            install
                .secrets
                .clone()
                .unwrap_or_else(|| parent.join("secrets")),
        );
        let config = DirSecretSource::new(
            install
                .config
                .clone()
                .unwrap_or_else(|| parent.join("config")),
        );
        let mut catalog = Catalog::default();
        for manifest in loaded.manifests() {
            catalog.add(resolve_binary(
                dir,
                manifest.clone(),
                install.bin_dir.as_deref(),
            ));
        }
        Ok(Self {
            dir: dir.to_owned(),
            catalog,
            bad_manifests: loaded.errors().to_vec(),
            grants,
            secrets,
            config,
        })
    }

    /// The manifest of `plugin`, or an error listing the catalog's plugins.
    pub(crate) fn manifest(&self, plugin: &str) -> Result<&Manifest, CliError> {
        self.catalog
            .get(plugin)
            .ok_or_else(|| CliError::UnknownPlugin {
                plugin: plugin.to_owned(),
                catalog: self.dir.clone(),
                known: self.names().join(", "),
            })
    }

    /// The plugins' names.
    pub(crate) fn names(&self) -> Vec<String> {
        self.catalog.manifests().map(|m| m.name.clone()).collect()
    }
}

/// A command `bin/NAME` that is not in the catalog's `bin/` is looked up in `bin_dir`
/// (default: the directory of this `tether`); `bin/tether` then is this `tether` itself, which
/// serves the demo's Rust plugins.
fn resolve_binary(dir: &Path, mut manifest: Manifest, bin_dir: Option<&Path>) -> Manifest {
    let in_bin = manifest.command.parent() == Some(dir.join("bin").as_path());
    if !in_bin || manifest.command.exists() {
        return manifest;
    }
    let Some(file_name) = manifest.command.file_name().map(ToOwned::to_owned) else {
        return manifest;
    };
    let exe = std::env::current_exe().ok();
    let resolved = match bin_dir {
        Some(bin_dir) => Some(bin_dir.join(&file_name)),
        None if file_name == "tether" => exe,
        None => exe.and_then(|exe| exe.parent().map(|d| d.join(&file_name))),
    };
    if let Some(resolved) = resolved {
        manifest.command = resolved;
    }
    manifest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(dir: &Path, command: &str) -> Manifest {
        let text = format!(
            "name = \"p\"\ncommand = \"{command}\"\n[handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\n"
        );
        Manifest::parse(&text, &dir.join("p.toml")).unwrap()
    }

    #[test]
    fn missing_bin_commands_are_found_in_the_bin_dir_and_present_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = Path::new("/opt/plugins");
        let resolved = resolve_binary(dir.path(), manifest(dir.path(), "bin/x"), Some(elsewhere));
        assert_eq!(resolved.command, elsewhere.join("x"));

        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("bin/x"), "").unwrap();
        let kept = resolve_binary(dir.path(), manifest(dir.path(), "bin/x"), Some(elsewhere));
        assert_eq!(kept.command, dir.path().join("bin/x"));

        let outside_bin = resolve_binary(dir.path(), manifest(dir.path(), "y"), Some(elsewhere));
        assert_eq!(outside_bin.command, dir.path().join("y"));
    }

    #[test]
    fn bin_tether_is_this_executable_by_default() {
        let dir = tempfile::tempdir().unwrap();
        let resolved = resolve_binary(dir.path(), manifest(dir.path(), "bin/tether"), None);
        assert_eq!(resolved.command, std::env::current_exe().unwrap());
    }
}
