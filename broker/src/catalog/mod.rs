//! A catalog: a directory of plugin manifests, one `*.toml` file per plugin.

pub(crate) mod confinement;
pub(crate) mod errors;
pub(crate) mod grants;
pub(crate) mod grants_file;
pub(crate) mod keys;
#[cfg(feature = "kubernetes")]
pub(crate) mod kubernetes;
pub(crate) mod manifest;
pub(crate) mod request;
pub(crate) mod runner;
pub(crate) mod sources;
pub(crate) mod strangers;
pub(crate) mod text;

pub use grants::Grants;
#[cfg(feature = "kubernetes")]
pub use kubernetes::KubernetesValueSource;
pub use manifest::{
    CatalogFileError, CatalogFileErrors, DEFAULT_IDLE_TIMEOUT, DEFAULT_INITIAL_BACKOFF,
    DEFAULT_MAX_BACKOFF, DEFAULT_MAX_RESTARTS, DEFAULT_RESTART_WINDOW, FileKind, MAX_NAME_LEN,
    Manifest, RestartPolicy,
};
pub use request::{NotGranted, Remedy, Request};
pub use secrecy::SecretSlice;
pub use sources::{DirValueSource, EnvValueSource, MAX_VALUE_LEN, MemoryValueSource, ValueSource};
pub use strangers::Stranger;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The `tracing` target of the warning logged for each problem of a manifest that does not
/// load (the same problems are in [`Catalog::errors`]): a program that reports those itself, as
/// `tether` does, turns this target off so that each is printed once.
pub const BAD_MANIFEST_LOG_TARGET: &str = "tether_broker::catalog::bad_manifest";

/// The manifests found in a catalog directory. A bad manifest does not stop the others from
/// loading: it is reported in [`errors`](Self::errors) (every unknown key of it, each located)
/// and logged as a warning ([`BAD_MANIFEST_LOG_TARGET`]).
///
/// ```no_run
/// let catalog = tether_broker::Catalog::load_dir("/etc/tether/plugins".as_ref())?;
/// for error in catalog.errors() {
///     eprintln!("skipping a plugin: {error}");
/// }
/// println!("{} plugins", catalog.len());
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// A plugin name claimed by two (or more) files is an error for each of them, and none of them
/// loads: which file is the operator's cannot be told from the files, and the first in
/// file-name order must not win (a `0-addon.toml` would take over another plugin's name and
/// secrets).
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    plugins: BTreeMap<String, Manifest>,
    /// Names claimed by more than one file: every claimant's file and `name` location.
    contested: BTreeMap<String, Vec<Claim>>,
    errors: Vec<CatalogFileError>,
}

/// One file's claim on a plugin name: the file and where its `name` value is.
#[derive(Debug, Clone)]
struct Claim {
    file: PathBuf,
    line: usize,
    column: usize,
}

impl Claim {
    fn of(manifest: &Manifest) -> Self {
        Self {
            file: manifest.file.clone(),
            line: manifest.name_at.0,
            column: manifest.name_at.1,
        }
    }

    /// The error of this claim on `name`, also claimed by `others`.
    fn error(&self, name: &str, others: &[&Claim]) -> CatalogFileError {
        let others: Vec<String> = others
            .iter()
            .map(|c| format!("{}:{}:{}", c.file.display(), c.line, c.column))
            .collect();
        CatalogFileError {
            file: self.file.clone(),
            line: self.line,
            column: self.column,
            key: Some("name".to_owned()),
            message: format!(
                "plugin name `{name}` is also claimed by {}; none of them starts until all but one are renamed or removed",
                others.join(", ")
            ),
            file_kind: manifest::FileKind::Manifest,
            plugin: Some(name.to_owned()),
        }
    }
}

impl Catalog {
    /// Loads every `*.toml` file in `dir` (not recursing), in file-name order.
    ///
    /// # Errors
    /// Only when `dir` itself cannot be read; bad manifests are in [`errors`](Self::errors).
    pub fn load_dir(dir: &Path) -> std::io::Result<Self> {
        let mut files: Vec<_> = std::fs::read_dir(dir)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml") && p.is_file())
            .collect();
        files.sort();
        let mut catalog = Self::default();
        for file in files {
            let parsed = std::fs::read_to_string(&file)
                .map_err(|e| {
                    CatalogFileError::whole_file(&file, format!("cannot read: {e}")).into()
                })
                .and_then(|text| Manifest::parse(&text, &file));
            match parsed {
                Ok(manifest) => catalog.add(manifest),
                Err(errors) => catalog.reject(errors),
            }
        }
        Ok(catalog)
    }

    /// Records the problems of a manifest that did not load, logging each.
    fn reject(&mut self, errors: impl IntoIterator<Item = CatalogFileError>) {
        for error in errors {
            tracing::warn!(target: BAD_MANIFEST_LOG_TARGET, error = %error, "skipping a bad plugin manifest");
            self.errors.push(error);
        }
    }

    /// Adds a manifest. A name that another file already claims is an error for both (and
    /// for any further claimant): none of them stays in the catalog.
    pub fn add(&mut self, manifest: Manifest) {
        let claim = Claim::of(&manifest);
        let name = manifest.name.clone();
        if let Some(claims) = self.contested.get_mut(&name) {
            let error = claim.error(&name, &claims.iter().collect::<Vec<_>>());
            claims.push(claim);
            self.reject([error]);
            return;
        }
        let Some(first) = self.plugins.remove(&name) else {
            self.plugins.insert(name, manifest);
            return;
        };
        let first = Claim::of(&first);
        self.reject([first.error(&name, &[&claim]), claim.error(&name, &[&first])]);
        self.contested.insert(name, vec![first, claim]);
    }

    /// The same catalog with each manifest replaced by `f(manifest)` (e.g. its command
    /// resolved), its [`errors`](Self::errors) kept. A name `f` makes collide with another is
    /// an error for both, as in [`add`](Self::add).
    #[must_use]
    pub fn map_manifests(mut self, mut f: impl FnMut(Manifest) -> Manifest) -> Self {
        for (_, manifest) in std::mem::take(&mut self.plugins) {
            self.add(f(manifest));
        }
        self
    }

    /// The manifest of plugin `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&Manifest> {
        self.plugins.get(name)
    }

    /// The plugins' manifests, by name.
    pub fn manifests(&self) -> impl Iterator<Item = &Manifest> {
        self.plugins.values()
    }

    /// How many plugins loaded.
    #[must_use]
    pub fn len(&self) -> usize {
        self.plugins.len()
    }

    /// Whether no plugin loaded.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.plugins.is_empty()
    }

    /// The manifests that could not be loaded.
    #[must_use]
    pub fn errors(&self) -> &[CatalogFileError] {
        &self.errors
    }

    /// The plugins whose manifests did not load ([`errors`](Self::errors)), as far as they can
    /// be told ([`CatalogFileError::plugin_named`]); sorted, each once.
    #[must_use]
    pub fn broken_names(&self) -> Vec<&str> {
        let names: std::collections::BTreeSet<&str> = self
            .errors
            .iter()
            .filter_map(CatalogFileError::plugin_named)
            .collect();
        names.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(name: &str) -> String {
        format!(
            "name = \"{name}\"\ncommand = \"bin/{name}\"\n[handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\n"
        )
    }

    #[test]
    fn one_bad_manifest_does_not_stop_the_good_ones() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.toml"), manifest("a")).unwrap();
        std::fs::write(
            dir.path().join("b.toml"),
            manifest("b") + "colour = \"red\"\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("c.toml"), manifest("c")).unwrap();
        std::fs::write(dir.path().join("c2.toml"), manifest("c")).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a manifest").unwrap();
        let catalog = Catalog::load_dir(dir.path()).unwrap();
        let names: Vec<_> = catalog.manifests().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["a"]);
        assert_eq!(catalog.errors().len(), 3);
        let bad = &catalog.errors()[0];
        assert!(bad.file.ends_with("b.toml"));
        assert_eq!(
            (bad.line, bad.key.as_deref()),
            (6, Some("handshake.colour")),
            "{bad}"
        );
        assert!(catalog.errors()[1].message.contains("also claimed"));
        assert!(catalog.errors()[2].message.contains("also claimed"));
    }

    #[test]
    fn a_name_claimed_by_two_files_is_an_error_for_both_located_at_each_name_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("probe-a.toml"), manifest("probe-a")).unwrap();
        std::fs::write(
            dir.path().join("0-addon.toml"),
            format!(
                "# an add-on\n\n{}",
                manifest("probe-a").replace("name =", "name  =")
            ),
        )
        .unwrap();
        std::fs::write(dir.path().join("b.toml"), manifest("b")).unwrap();
        let catalog = Catalog::load_dir(dir.path()).unwrap();
        assert!(catalog.get("probe-a").is_none(), "neither claimant starts");
        assert!(catalog.get("b").is_some());
        let mut errors: Vec<_> = catalog
            .errors()
            .iter()
            .map(|e| {
                let file = e.file.file_name().unwrap().to_string_lossy().into_owned();
                (file, e.line, e.column, e.key.clone())
            })
            .collect();
        errors.sort();
        assert_eq!(
            errors,
            [
                ("0-addon.toml".to_owned(), 3, 9, Some("name".to_owned())),
                ("probe-a.toml".to_owned(), 1, 8, Some("name".to_owned())),
            ],
            "{:?}",
            catalog.errors()
        );
        for e in catalog.errors() {
            let other = if e.file.ends_with("probe-a.toml") {
                "0-addon.toml"
            } else {
                "probe-a.toml"
            };
            assert!(e.message.contains(other), "{e}");
        }
    }
}
