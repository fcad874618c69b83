//! A throw-away plugin installation for the catalog and confinement tests: a catalog
//! directory of manifests, a directory of secret values (the host's secret source), and the
//! directories the broker uses (state, delivery, runtime), all under one temporary directory.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tether_broker::{Catalog, DirValueSource, Grants, Supervisor, SupervisorBuilder, Timeouts};

/// The shutdown and terminate grace of [`World::supervisor`]'s plugins: short, so that tests
/// that stop plugins do not wait long for one that does not stop.
pub const TEST_GRACE: Duration = Duration::from_millis(500);

/// The test installation; removed when dropped.
#[derive(Debug)]
pub struct World {
    root: tempfile::TempDir,
}

/// One plugin's manifest, written by [`World::add_plugin`].
#[derive(Debug, Clone, Default)]
pub struct PluginSpec {
    /// Its name (also the manifest's file name).
    pub name: String,
    /// The binary; linked into the catalog as `bin/<name>` unless `copy`.
    pub binary: PathBuf,
    /// Copy the binary instead of linking it (needed with `sha256`).
    pub copy: bool,
    /// Secrets requested.
    pub secrets: Vec<String>,
    /// Config files requested.
    pub config: Vec<String>,
    /// Extra top-level TOML lines (before `[handshake]`).
    pub extra: String,
    /// Extra TOML after the handshake table (e.g. `[limits]` / `[restart]`).
    pub tables: String,
}

impl PluginSpec {
    /// A plugin named `name` running `binary`.
    #[must_use]
    pub fn new(name: &str, binary: impl Into<PathBuf>) -> Self {
        Self {
            name: name.to_owned(),
            binary: binary.into(),
            ..Self::default()
        }
    }

    /// Requests secrets.
    #[must_use]
    pub fn secrets(mut self, names: &[&str]) -> Self {
        self.secrets = names.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Requests config files.
    #[must_use]
    pub fn config(mut self, names: &[&str]) -> Self {
        self.config = names.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Adds top-level TOML.
    #[must_use]
    pub fn extra(mut self, toml: &str) -> Self {
        self.extra.push_str(toml);
        self.extra.push('\n');
        self
    }

    /// Adds TOML tables.
    #[must_use]
    pub fn tables(mut self, toml: &str) -> Self {
        self.tables.push_str(toml);
        self.tables.push('\n');
        self
    }

    /// Copies the binary into the catalog instead of linking it.
    #[must_use]
    pub fn copied(mut self) -> Self {
        self.copy = true;
        self
    }
}

fn toml_list(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

impl World {
    /// A new, empty installation.
    ///
    /// # Panics
    /// When the temporary directories cannot be made.
    #[must_use]
    pub fn new() -> Self {
        let root = tempfile::tempdir().expect("temporary directory");
        for dir in [
            "catalog/bin",
            "secrets",
            "config",
            "state",
            "delivery",
            "run",
        ] {
            std::fs::create_dir_all(root.path().join(dir)).expect("test directories");
        }
        Self { root }
    }

    /// The catalog directory (manifests; binaries in `bin/`).
    #[must_use]
    pub fn catalog(&self) -> PathBuf {
        self.root.path().join("catalog")
    }

    /// The host's secret source directory (one file per secret).
    #[must_use]
    pub fn secrets(&self) -> PathBuf {
        self.root.path().join("secrets")
    }

    /// The host's config source directory.
    #[must_use]
    pub fn config(&self) -> PathBuf {
        self.root.path().join("config")
    }

    /// The broker's state root (`state/<plugin>` is each plugin's working directory).
    #[must_use]
    pub fn state(&self) -> PathBuf {
        self.root.path().join("state")
    }

    /// Where delivery directories are made.
    #[must_use]
    pub fn delivery(&self) -> PathBuf {
        self.root.path().join("delivery")
    }

    /// Where the plugins' private (socket) directories are made.
    #[must_use]
    pub fn run(&self) -> PathBuf {
        self.root.path().join("run")
    }

    /// A supervisor over this world's catalog with `grants`, its secrets directory as the
    /// secret source, its delivery and private-directory bases, and [`TEST_GRACE`] to stop.
    ///
    /// # Panics
    /// If the catalog cannot be read.
    pub fn supervisor(&self, grants: Grants) -> SupervisorBuilder {
        let catalog = Catalog::load_dir(&self.catalog()).expect("the catalog loads");
        let (delivery, run) = (self.delivery(), self.run());
        Supervisor::builder(catalog, self.state())
            .grants(grants)
            .secrets(DirValueSource::new(self.secrets()))
            .customize(move |b| {
                b.delivery_dir(&delivery).private_dir_base(&run).timeouts(
                    Timeouts::default()
                        .shutdown_grace(TEST_GRACE)
                        .terminate_grace(TEST_GRACE),
                )
            })
    }

    /// Writes a secret value into the source directory.
    ///
    /// # Panics
    /// When it cannot be written.
    pub fn add_secret(&self, name: &str, value: &str) {
        std::fs::write(self.secrets().join(name), value).expect("write secret");
    }

    /// Writes a config value into the config source directory.
    ///
    /// # Panics
    /// When it cannot be written.
    pub fn add_config(&self, name: &str, value: &str) {
        std::fs::write(self.config().join(name), value).expect("write config");
    }

    /// Writes `spec`'s manifest (and links or copies its binary); returns the manifest path.
    ///
    /// # Panics
    /// When the files cannot be written.
    pub fn add_plugin(&self, spec: &PluginSpec) -> PathBuf {
        let bin = self.catalog().join("bin").join(&spec.name);
        if spec.copy {
            std::fs::copy(&spec.binary, &bin).expect("copy plugin binary");
        } else {
            std::os::unix::fs::symlink(&spec.binary, &bin).expect("link plugin binary");
        }
        let mut text = String::new();
        let _ = writeln!(text, "name = {:?}", spec.name);
        let _ = writeln!(text, "command = \"bin/{}\"", spec.name);
        let _ = writeln!(text, "secrets = {}", toml_list(&spec.secrets));
        let _ = writeln!(text, "config = {}", toml_list(&spec.config));
        text.push_str(&spec.extra);
        text.push_str(
            "\n[handshake]\ncookie_key = \"BASIC_PLUGIN\"\ncookie_value = \"hello\"\napp_versions = [1]\n",
        );
        text.push_str(&spec.tables);
        let manifest = self.catalog().join(format!("{}.toml", spec.name));
        std::fs::write(&manifest, text).expect("write manifest");
        manifest
    }

    /// Entries left in `dir` (e.g. delivery or private-directory bases), sorted.
    #[must_use]
    pub fn leftovers(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

impl Default for World {
    fn default() -> Self {
        Self::new()
    }
}
