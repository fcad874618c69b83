//! The host's policy: which plugin may receive which secrets and config files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use tether_proto::ValueKind;

use crate::catalog::manifest::{FileKind, Manifest, ManifestError};
use crate::catalog::text::check_name;

/// Which plugin may receive which secrets and config files. Nothing is granted by default.
///
/// In code:
/// ```
/// let grants = tether_host::Grants::new()
///     .secret("kv", "db-password")
///     .config("kv", "settings.json");
/// assert!(grants.allows_secret("kv", "db-password"));
/// assert!(!grants.allows_secret("other", "db-password"));
/// ```
/// Or as a TOML file ([`Grants::parse`], [`Grants::load`]):
/// ```toml
/// [plugins.kv]
/// secrets = ["db-password"]
/// config = ["settings.json"]
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    plugins: BTreeMap<String, Grant>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Grant {
    secrets: BTreeSet<String>,
    config: BTreeSet<String>,
}

/// `name` as a TOML key: bare when it can be, else quoted.
fn toml_key(name: &str) -> String {
    if !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
    {
        name.to_owned()
    } else {
        format!("{name:?}")
    }
}

/// The grants file as written, with the place of every name, so that errors point at it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantsFile {
    #[serde(default)]
    plugins: BTreeMap<Spanned<String>, RawGrant>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGrant {
    #[serde(default)]
    secrets: Vec<Spanned<String>>,
    #[serde(default)]
    config: Vec<Spanned<String>>,
}

/// A secret or config file a plugin asks for but is not granted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "plugin `{plugin}` requests {kind} `{name}`, which is not granted to it; it does not start. Grant it (`[plugins.{plugin}] {} = [\"{name}\"]` in the grants file) or remove it from the manifest {}", kind.manifest_key(), manifest.display()
)]
#[non_exhaustive]
pub struct NotGranted {
    /// The plugin.
    pub plugin: String,
    /// `secret` or `config`.
    pub kind: ValueKind,
    /// The name requested.
    pub name: String,
    /// The plugin's manifest.
    pub manifest: std::path::PathBuf,
}

impl Grants {
    /// Grants nothing.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Grants `plugin` the secret `name`.
    #[must_use]
    pub fn secret(mut self, plugin: impl Into<String>, name: impl Into<String>) -> Self {
        self.plugins
            .entry(plugin.into())
            .or_default()
            .secrets
            .insert(name.into());
        self
    }

    /// Grants `plugin` the config file `name`.
    #[must_use]
    pub fn config(mut self, plugin: impl Into<String>, name: impl Into<String>) -> Self {
        self.plugins
            .entry(plugin.into())
            .or_default()
            .config
            .insert(name.into());
        self
    }

    /// Whether `plugin` may receive the secret `name`.
    #[must_use]
    pub fn allows_secret(&self, plugin: &str, name: &str) -> bool {
        self.plugins
            .get(plugin)
            .is_some_and(|g| g.secrets.contains(name))
    }

    /// Whether `plugin` may receive the config file `name`.
    #[must_use]
    pub fn allows_config(&self, plugin: &str, name: &str) -> bool {
        self.plugins
            .get(plugin)
            .is_some_and(|g| g.config.contains(name))
    }

    /// Checks everything `manifest` requests.
    ///
    /// # Errors
    /// The first request that is not granted.
    pub fn check(&self, manifest: &Manifest) -> Result<(), NotGranted> {
        let refuse = |kind, name: &String| NotGranted {
            plugin: manifest.name.clone(),
            kind,
            name: name.clone(),
            manifest: manifest.file.clone(),
        };
        if let Some(name) = manifest
            .secrets
            .iter()
            .find(|n| !self.allows_secret(&manifest.name, n))
        {
            return Err(refuse(ValueKind::Secret, name));
        }
        if let Some(name) = manifest
            .config
            .iter()
            .find(|n| !self.allows_config(&manifest.name, n))
        {
            return Err(refuse(ValueKind::Config, name));
        }
        Ok(())
    }

    /// Parses a grants file's `text` (`file` names it in errors).
    ///
    /// # Errors
    /// A [`ManifestError`] (with [`FileKind::Grants`]) naming file, line, column and key for
    /// unknown keys, bad types or invalid names.
    pub fn parse(text: &str, file: &Path) -> Result<Self, ManifestError> {
        let error = |offset, key: Option<String>, message: String| {
            let mut e = ManifestError::at(file, text, offset, key, message);
            e.file_kind = FileKind::Grants;
            e
        };
        let parsed: GrantsFile = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            error(offset, None, e.message().trim().to_owned())
        })?;
        let mut plugins = BTreeMap::new();
        for (plugin, raw) in parsed.plugins {
            let table = format!("plugins.{}", toml_key(plugin.get_ref()));
            check_name(plugin.get_ref())
                .map_err(|why| error(plugin.span().start, Some(table.clone()), why))?;
            let mut grant = Grant::default();
            for (key, names, into) in [
                ("secrets", &raw.secrets, &mut grant.secrets),
                ("config", &raw.config, &mut grant.config),
            ] {
                for name in names {
                    check_name(name.get_ref()).map_err(|why| {
                        error(name.span().start, Some(format!("{table}.{key}")), why)
                    })?;
                    into.insert(name.get_ref().clone());
                }
            }
            plugins.insert(plugin.into_inner(), grant);
        }
        Ok(Self { plugins })
    }

    /// Reads and parses the grants file at `path`.
    ///
    /// # Errors
    /// As [`parse`](Self::parse), or when the file cannot be read.
    pub fn load(path: &Path) -> Result<Self, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            let mut error = ManifestError::whole_file(path, format!("cannot read: {e}"));
            error.file_kind = FileKind::Grants;
            error
        })?;
        Self::parse(&text, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(secrets: &str) -> Manifest {
        let text = format!(
            "name = \"a\"\ncommand = \"a\"\nsecrets = {secrets}\n[handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\n"
        );
        Manifest::parse(&text, Path::new("/cat/a.toml")).unwrap()
    }

    #[test]
    fn a_request_that_is_not_granted_names_plugin_and_secret() {
        let grants = Grants::new().secret("a", "x").secret("b", "y");
        grants.check(&manifest("[\"x\"]")).unwrap();
        let err = grants.check(&manifest("[\"x\", \"y\"]")).unwrap_err();
        assert_eq!(
            (err.plugin.as_str(), err.kind, err.name.as_str()),
            ("a", ValueKind::Secret, "y")
        );
        assert!(
            err.to_string()
                .starts_with("plugin `a` requests secret `y`"),
            "{err}"
        );
    }

    #[test]
    fn the_grants_file_equals_the_code_api() {
        let text = "[plugins.a]\nsecrets = [\"x\"]\nconfig = [\"c.json\"]\n[plugins.b]\nsecrets = [\"y\"]\n";
        let parsed = Grants::parse(text, Path::new("grants.toml")).unwrap();
        let built = Grants::new()
            .secret("a", "x")
            .config("a", "c.json")
            .secret("b", "y");
        assert_eq!(parsed, built);
    }

    #[test]
    fn a_typo_in_the_grants_file_is_located() {
        let err =
            Grants::parse("[plugins.a]\nsecret = [\"x\"]\n", Path::new("g.toml")).unwrap_err();
        assert_eq!(err.line, 2, "{err}");
        assert!(err.message.contains("unknown field"), "{err}");
    }

    #[test]
    fn a_bad_name_in_the_grants_file_is_located_at_its_own_entry_and_asks_to_fix_the_grants_file() {
        let text = "# grants for `k v` and others\n[plugins.kv]\nsecrets = [\"ok\"]\n\n[plugins.b]\nsecrets = [\"x\", \"k v\"]\nconfig = [\"\"]\n";
        let file = Path::new("/etc/tether/grants.toml");
        let err = Grants::parse(text, file).unwrap_err();
        assert_eq!(
            (err.line, err.column, err.key.as_deref()),
            (6, 17, Some("plugins.b.secrets")),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with("/etc/tether/grants.toml:6:17: key `plugins.b.secrets`: "),
            "{err}"
        );
        assert!(err.to_string().ends_with("; fix the grants file"), "{err}");
        let err = Grants::parse(&text.replace("\"k v\"", "\"y\""), file).unwrap_err();
        assert_eq!(
            (err.line, err.column, err.key.as_deref()),
            (7, 11, Some("plugins.b.config")),
            "an empty name is located too: {err}"
        );
        let err = Grants::parse("[plugins.\"k v\"]\nsecrets = []\n", file).unwrap_err();
        assert_eq!(
            (err.line, err.key.as_deref()),
            (1, Some("plugins.\"k v\"")),
            "{err}"
        );
        let err = Grants::parse("[plugins.a]\nsecret = [\"x\"]\n", file).unwrap_err();
        assert!(err.to_string().ends_with("; fix the grants file"), "{err}");
    }
}
