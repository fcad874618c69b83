//! A catalog with its policy: where it is, its manifests, grants, secret and config sources,
//! and where the binaries are.
//!
//! # Which catalog
//! `--catalog DIR`, else `$TETHER_CATALOG`, else `./catalog` when that directory exists
//! ([`locate`]); nothing is baked in at build time. A source checkout's
//! `.cargo/config.toml` sets `TETHER_CATALOG` to the agent demo's catalog for `cargo run`
//! (a value already in the environment wins).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use tether_broker::{Catalog, DirValueSource, Grants, Manifest, catalog::CatalogFileError};

use crate::args::{CatalogArgs, InstallArgs};
use crate::binary::{self, Searched};
use crate::catalog_origin::{CATALOG_ENV, DEFAULT_CATALOG, Origin};
use crate::error::CliError;

/// The catalog directory: `flag`, else `env` (the value of [`CATALOG_ENV`]; empty counts as
/// unset), else [`DEFAULT_CATALOG`] under `cwd` when it is a directory there. The last two are
/// made absolute against `cwd`, so that plugins started in their own state directories still
/// find their relative commands.
pub(crate) fn locate(
    flag: Option<&Path>,
    env: Option<OsString>,
    cwd: &Path,
) -> Result<(PathBuf, Origin), CliError> {
    if let Some(dir) = flag {
        return Ok((dir.to_owned(), Origin::Flag));
    }
    if let Some(dir) = env.filter(|v| !v.is_empty()) {
        return Ok((cwd.join(dir), Origin::Env));
    }
    let default = cwd.join(DEFAULT_CATALOG);
    if default.is_dir() {
        return Ok((default, Origin::CurrentDir));
    }
    Err(CliError::NoCatalog {
        cwd: cwd.to_owned(),
    })
}

/// A loaded catalog and what goes with it.
#[derive(Debug)]
pub(crate) struct Installation {
    /// The catalog directory.
    pub(crate) dir: PathBuf,
    /// Where [`dir`](Self::dir) came from.
    pub(crate) origin: Origin,
    /// The good manifests, commands resolved (and the bad ones' errors).
    pub(crate) catalog: Catalog,
    /// The plugins whose program is nowhere, and every place it was looked for.
    pub(crate) missing_binaries: Vec<(String, Searched)>,
    /// The policy.
    pub(crate) grants: Grants,
    /// Secret values.
    pub(crate) secrets: DirValueSource,
    /// Config files.
    pub(crate) config: DirValueSource,
}

impl Installation {
    /// Loads the catalog of `args` ([`locate`]d).
    pub(crate) fn load(args: &CatalogArgs) -> Result<Self, CliError> {
        let cwd = std::env::current_dir().map_err(CliError::CurrentDir)?;
        let (dir, origin) = locate(args.catalog.as_deref(), std::env::var_os(CATALOG_ENV), &cwd)?;
        Self::load_dir(&dir, origin, &args.install)
    }

    /// Loads the catalog in `dir`, which came from `origin`. `dir` and the paths of `install`
    /// are made absolute against the current directory first: a manifest's `command` and
    /// `sandbox_allow_*` paths are relative to its directory, and a plugin starts elsewhere (its
    /// private directory, a state directory, a conformance check's temporary one), so a
    /// relative `--catalog` works exactly as its absolute form does.
    pub(crate) fn load_dir(
        dir: &Path,
        origin: Origin,
        install: &InstallArgs,
    ) -> Result<Self, CliError> {
        let dir = &absolute(dir)?;
        let install = &install.absolute()?;
        let loaded = Catalog::load_dir(dir).map_err(|source| CliError::Catalog {
            dir: dir.to_owned(),
            origin,
            source,
        })?;
        let grants = match &install.grants {
            Some(file) => Grants::load(file).map_err(CliError::Grants)?,
            None => {
                let file = beside(dir, "grants.toml");
                if file.is_file() {
                    Grants::load(&file).map_err(CliError::Grants)?
                } else {
                    Grants::new()
                }
            }
        };
        let secrets = DirValueSource::new(
            install
                .secrets
                .clone()
                .unwrap_or_else(|| beside(dir, "secrets")),
        );
        let config = DirValueSource::new(
            install
                .config
                .clone()
                .unwrap_or_else(|| beside(dir, "config")),
        );
        let mut missing_binaries = Vec::new();
        // The bad manifests' errors stay in the catalog: their plugins are known by name
        // (`Grants::strangers`, a supervisor's warnings).
        let catalog = loaded.map_manifests(|manifest| {
            if manifest.runner.name() == "kubernetes" {
                // Its program is a path in its image: nothing to find on this host.
                return manifest;
            }
            let resolved = resolve_binary(dir, manifest.clone(), install.bin_dir.as_deref());
            if !resolved.command.exists() {
                let searched = binary::catalog_places(
                    &manifest.command,
                    &resolved.command,
                    install.bin_dir.is_some(),
                );
                missing_binaries.push((manifest.name.clone(), searched));
            }
            resolved
        });
        Ok(Self {
            dir: dir.to_owned(),
            origin,
            catalog,
            missing_binaries,
            grants,
            secrets,
            config,
        })
    }

    /// The manifests that could not be loaded (the catalog keeps their errors).
    pub(crate) fn bad_manifests(&self) -> &[CatalogFileError] {
        self.catalog.errors()
    }

    /// The manifest of `plugin`; else its manifest's problems when it has a broken one; else
    /// an error listing the catalog's plugins.
    pub(crate) fn manifest(&self, plugin: &str) -> Result<&Manifest, CliError> {
        let broken: Vec<_> = self
            .bad_manifests()
            .iter()
            .filter(|e| e.plugin_named() == Some(plugin))
            .cloned()
            .collect();
        if self.catalog.get(plugin).is_none() && !broken.is_empty() {
            return Err(CliError::BrokenManifest {
                plugin: plugin.to_owned(),
                errors: broken,
            });
        }
        self.catalog
            .get(plugin)
            .ok_or_else(|| CliError::UnknownPlugin {
                plugin: plugin.to_owned(),
                catalog: self.dir.clone(),
                known: match self.names() {
                    names if names.is_empty() => "no plugin that loaded".to_owned(),
                    names => names.join(", "),
                },
                broken: self
                    .bad_manifests()
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
            })
    }

    /// [`CliError::MissingBinary`] when `plugin`'s program is in none of the places it was
    /// looked for.
    pub(crate) fn check_binary(&self, plugin: &str) -> Result<(), CliError> {
        match self
            .missing_binaries
            .iter()
            .find(|(name, _)| name == plugin)
        {
            None => Ok(()),
            Some((name, searched)) => Err(CliError::MissingBinary {
                plugin: name.clone(),
                manifest: self.catalog.get(name).map(|m| m.file.clone()),
                searched: searched.clone(),
            }),
        }
    }

    /// `DIR (from ORIGIN)`, for output headers.
    pub(crate) fn describe(&self) -> String {
        format!("{} (from {})", self.dir.display(), self.origin)
    }

    /// The file or directory `name` beside the catalog directory (`DIR/../name`), where the
    /// defaults for the grants, secrets, workflow and artifacts are.
    pub(crate) fn beside(&self, name: &str) -> PathBuf {
        beside(&self.dir, name)
    }

    /// The plugins' names.
    pub(crate) fn names(&self) -> Vec<String> {
        self.catalog.manifests().map(|m| m.name.clone()).collect()
    }

    /// The names of the plugins whose manifests did not load, as far as they can be told.
    pub(crate) fn broken_names(&self) -> Vec<String> {
        self.catalog
            .broken_names()
            .into_iter()
            .map(ToOwned::to_owned)
            .collect()
    }
}

/// `path` made absolute against the current directory, without resolving symbolic links (a
/// catalog's `bin/NAME` link stays the program the manifest names).
fn absolute(path: &Path) -> Result<PathBuf, CliError> {
    std::path::absolute(path).map_err(CliError::CurrentDir)
}

impl InstallArgs {
    /// These paths made absolute ([`absolute`]).
    fn absolute(&self) -> Result<Self, CliError> {
        let made = |path: &Option<PathBuf>| path.as_deref().map(absolute).transpose();
        Ok(Self {
            grants: made(&self.grants)?,
            secrets: made(&self.secrets)?,
            config: made(&self.config)?,
            bin_dir: made(&self.bin_dir)?,
        })
    }
}

/// `dir/../name`.
fn beside(dir: &Path, name: &str) -> PathBuf {
    dir.parent().unwrap_or(Path::new(".")).join(name)
}

/// A command `bin/NAME` that is not in the catalog's `bin/` is looked up in `bin_dir`
/// (default: the directory of this `tether`, where `cargo build` puts the workspace's
/// programs, the agent demo's `agent-demo` among them).
fn resolve_binary(dir: &Path, mut manifest: Manifest, bin_dir: Option<&Path>) -> Manifest {
    let in_bin = manifest.command.parent() == Some(dir.join("bin").as_path());
    if !in_bin || manifest.command.exists() {
        return manifest;
    }
    let Some(file_name) = manifest.command.file_name().map(ToOwned::to_owned) else {
        return manifest;
    };
    let resolved = match bin_dir {
        Some(bin_dir) => Some(bin_dir.join(&file_name)),
        None => std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(|d| d.join(&file_name))),
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
    fn the_flag_wins_then_the_environment_then_the_current_directory() {
        let cwd = tempfile::tempdir().unwrap();
        std::fs::create_dir(cwd.path().join(DEFAULT_CATALOG)).unwrap();
        let env = || Some(OsString::from("/srv/catalog"));

        let flag = locate(Some(Path::new("mine")), env(), cwd.path()).unwrap();
        assert_eq!(flag, (PathBuf::from("mine"), Origin::Flag));
        let from_env = locate(None, env(), cwd.path()).unwrap();
        assert_eq!(from_env, (PathBuf::from("/srv/catalog"), Origin::Env));
        let relative_env = locate(None, Some(OsString::from("site/cat")), cwd.path()).unwrap();
        assert_eq!(relative_env.0, cwd.path().join("site/cat"));
        for unset in [None, Some(OsString::new())] {
            let here = locate(None, unset, cwd.path()).unwrap();
            assert_eq!(here, (cwd.path().join(DEFAULT_CATALOG), Origin::CurrentDir));
        }
    }

    #[test]
    fn without_any_catalog_the_error_says_what_was_looked_for() {
        let cwd = tempfile::tempdir().unwrap();
        let err = locate(None, None, cwd.path()).unwrap_err();
        let text = err.to_string();
        for looked_for in ["--catalog", "TETHER_CATALOG", "./catalog"] {
            assert!(text.contains(looked_for), "{text}");
        }
        assert!(text.contains(&cwd.path().display().to_string()), "{text}");
    }

    #[test]
    fn a_missing_bin_command_is_looked_for_beside_this_executable_by_default() {
        let dir = tempfile::tempdir().unwrap();
        let resolved = resolve_binary(dir.path(), manifest(dir.path(), "bin/agent-demo"), None);
        let exe = std::env::current_exe().unwrap();
        assert_eq!(resolved.command, exe.parent().unwrap().join("agent-demo"));
    }
}
