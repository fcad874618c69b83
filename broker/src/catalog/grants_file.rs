//! The grants file read into [`Grants`] ([`Grants::parse`], [`Grants::load`]): every unknown
//! key located, each name checked at its place, the confinement keys read by the second pass
//! shared with manifests, and the operator's own keys (`calls`, `allow_root`, `runner`, the top-level
//! `namespaces`) checked against each other.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::catalog::confinement::{PathStyle, RawConfinement};
use crate::catalog::errors::{CatalogFileError, CatalogFileErrors, FileKind};
use crate::catalog::grants::{Grant, Grants};
use crate::catalog::keys::{self, Schema};
use crate::catalog::runner::RawRunner;
use crate::catalog::text::{check_name, line_column, toml_key};
use crate::confine::world::NamespacesMode;

/// One plugin's own keys as written, with the place of every name, so that errors point at
/// it; its confinement keys are read by a second pass ([`GrantsConfinement`]).
#[derive(Deserialize)]
struct RawGrant {
    #[serde(default)]
    secrets: Vec<Spanned<String>>,
    #[serde(default)]
    config: Vec<Spanned<String>>,
    #[serde(default)]
    calls: Vec<Spanned<String>>,
    #[serde(default)]
    allow_root: bool,
    runner: Option<Spanned<RawRunner>>,
}

#[derive(Deserialize)]
struct GrantsFile {
    namespaces: Option<Spanned<NamespacesMode>>,
    #[serde(default)]
    plugins: BTreeMap<Spanned<String>, RawGrant>,
}

/// The grants file's second pass: each plugin's confinement keys.
#[derive(Deserialize)]
struct GrantsConfinement {
    #[serde(default)]
    plugins: BTreeMap<String, RawConfinement>,
}

impl Grants {
    /// Parses a grants file's `text` (`file` names it in errors, and relative paths are
    /// relative to its directory).
    ///
    /// # Errors
    /// [`CatalogFileErrors`] (with [`FileKind::Grants`]), each naming file, line, column and key:
    /// every unknown key, or else the first bad type or value or invalid name.
    pub fn parse(text: &str, file: &Path) -> Result<Self, CatalogFileErrors> {
        let document = keys::document(text, file, FileKind::Grants)?;
        let grant = Schema::of::<RawGrant>().and::<RawConfinement>();
        let schema = Schema::of::<GrantsFile>().table("plugins", Schema::any_key(grant));
        keys::check(&document, &schema, file, text, FileKind::Grants)?;
        let mut grants = Self::parse_known(text, file)?;
        grants.key_lines = key_lines(&document, text);
        Ok(grants)
    }

    /// [`parse`](Self::parse) of a file whose keys are all known: the first problem.
    fn parse_known(text: &str, file: &Path) -> Result<Self, CatalogFileError> {
        let error = |offset, key: Option<String>, message: String| {
            let mut e = CatalogFileError::at(file, text, offset, key, message);
            e.file_kind = FileKind::Grants;
            e
        };
        let located = |e: toml::de::Error| {
            let offset = e.span().map_or(0, |s| s.start);
            error(offset, None, e.message().trim().to_owned())
        };
        let parsed: GrantsFile = toml::from_str(text).map_err(located)?;
        let mut confinements = toml::from_str::<GrantsConfinement>(text)
            .map_err(located)?
            .plugins;
        let dir = file.parent().unwrap_or(Path::new("."));
        let mut plugins = BTreeMap::new();
        let mut places = BTreeMap::new();
        let namespaces_line = parsed
            .namespaces
            .as_ref()
            .map(|n| line_column(text, n.span().start).0);
        let policy = parsed
            .namespaces
            .map_or_else(NamespacesMode::default, Spanned::into_inner);
        for (plugin, raw) in parsed.plugins {
            places.insert(
                plugin.get_ref().clone(),
                line_column(text, plugin.span().start),
            );
            let table = format!("plugins.{}", toml_key(plugin.get_ref()));
            let at = |value: &Spanned<String>, key: &str, why: String| {
                error(value.span().start, Some(format!("{table}.{key}")), why)
            };
            check_name(plugin.get_ref())
                .map_err(|why| error(plugin.span().start, Some(table.clone()), why))?;
            let mut grant = Grant::default();
            if let Some(runner) = &raw.runner {
                if *runner.get_ref() != RawRunner::Kubernetes {
                    return Err(error(
                        runner.span().start,
                        Some(format!("{table}.runner")),
                        format!(
                            "the {} runner needs no grant; only `runner = \"kubernetes\"` does",
                            runner.get_ref().name()
                        ),
                    ));
                }
                grant.kubernetes_runner = true;
            }
            for (key, names, into) in [
                ("secrets", &raw.secrets, &mut grant.secrets),
                ("config", &raw.config, &mut grant.config),
                ("calls", &raw.calls, &mut grant.calls),
            ] {
                for name in names {
                    check_name(name.get_ref()).map_err(|why| at(name, key, why))?;
                    into.insert(name.get_ref().clone());
                }
            }
            let raw_confinement = confinements.remove(plugin.get_ref()).unwrap_or_default();
            let run_as = raw_confinement.run_as().cloned();
            let namespaces_at = raw_confinement.namespaces_at();
            grant.confinement = raw_confinement.read(dir, PathStyle::Literal, at)?;
            grant.confinement.allow_root = raw.allow_root;
            if let (Some(written), Some((uid, gid))) = (&run_as, grant.confinement.run_as)
                && (uid == 0 || gid == 0)
                && !raw.allow_root
            {
                return Err(at(
                    written,
                    "run_as",
                    format!(
                        "uid or gid 0 is the host's root: the plugin would hold root over every file it reaches; to mean it, add `allow_root = true` under `[{table}]`, else choose another user"
                    ),
                ));
            }
            if let Some(span) = namespaces_at
                && policy == NamespacesMode::Required
                && grant.confinement.namespaces == NamespacesMode::Off
            {
                let line = namespaces_line.unwrap_or(1);
                return Err(error(
                    span.start,
                    Some(format!("{table}.namespaces")),
                    format!(
                        "contradicts the top-level `namespaces = \"required\"` (line {line}), which no plugin's grant can loosen; remove one of them"
                    ),
                ));
            }
            plugins.insert(plugin.into_inner(), grant);
        }
        Ok(Self {
            plugins,
            namespaces: policy,
            namespaces_line,
            file: Some(file.to_owned()),
            places,
            key_lines: BTreeMap::new(),
        })
    }

    /// Reads and parses the grants file at `path`.
    ///
    /// # Errors
    /// As [`parse`](Self::parse), or when the file cannot be read.
    pub fn load(path: &Path) -> Result<Self, CatalogFileErrors> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            CatalogFileErrors::from(CatalogFileError::whole_file(
                path,
                format!("cannot read: {e}"),
            ))
            .of_kind(FileKind::Grants)
        })?;
        Self::parse(&text, path)
    }
}

/// The line where each key's value starts under each `[plugins.NAME]` of `document` (parsed
/// from `text`), by plugin and key.
fn key_lines(document: &DeTable<'_>, text: &str) -> BTreeMap<String, BTreeMap<String, usize>> {
    let Some(DeValue::Table(plugins)) = document.get("plugins").map(Spanned::get_ref) else {
        return BTreeMap::new();
    };
    plugins
        .iter()
        .filter_map(|(plugin, grant)| {
            let DeValue::Table(keys) = grant.get_ref() else {
                return None;
            };
            let lines = keys
                .iter()
                .map(|(key, value)| {
                    let key: &str = key.get_ref();
                    (key.to_owned(), line_column(text, value.span().start).0)
                })
                .collect();
            let plugin: &str = plugin.get_ref();
            Some((plugin.to_owned(), lines))
        })
        .collect()
}
