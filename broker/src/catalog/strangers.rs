//! Grants for plugins the catalog does not have ([`Grants::strangers`]): a misspelt name
//! grants nothing, and a removed plugin's grants linger. `tether check` lists them as warnings;
//! a [`Supervisor`](crate::Supervisor) logs each once when it is built. Pure.

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;

use crate::catalog::Catalog;
use crate::catalog::grants::Grants;

/// A plugin the grants grant something although the catalog has no manifest for it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stranger {
    /// The name under `[plugins.NAME]` (or given to a [`Grants`] builder call).
    pub name: String,
    /// Where that name is in the grants file: the file, line and column (1-based); `None`
    /// for grants made in code.
    pub place: Option<(PathBuf, usize, usize)>,
    /// The catalog plugin whose name is closest to [`name`](Self::name), when one is close
    /// enough to be a typo of it.
    pub closest: Option<String>,
}

impl fmt::Display for Stranger {
    /// `FILE:LINE:COLUMN: grants for plugin `X`, which is not in the catalog; did you mean
    /// `Y`? …` and what to do.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((file, line, column)) = &self.place {
            write!(f, "{}:{line}:{column}: ", file.display())?;
        }
        write!(
            f,
            "grants for plugin `{}`, which is not in the catalog",
            self.name
        )?;
        match &self.closest {
            Some(closest) => write!(
                f,
                "; did you mean `{closest}`? A misspelt name grants nothing: rename `[plugins.{}]` to `[plugins.{closest}]`, or remove it",
                self.name
            ),
            None => f.write_str(
                "; remove them from the grants file or add the plugin's manifest (a misspelt name grants nothing)",
            ),
        }
    }
}

impl Grants {
    /// The plugins these grants grant something (a `[plugins.NAME]` table, even an empty one,
    /// or a builder call) that `catalog` has no manifest for, by name, each with its place in
    /// the grants file and the catalog plugin it is most likely a typo of. A plugin whose
    /// manifest did not load ([`Catalog::broken_names`]) is in the catalog: its problems are
    /// reported already.
    #[must_use]
    pub fn strangers(&self, catalog: &Catalog) -> Vec<Stranger> {
        let loaded: BTreeSet<&str> = catalog.manifests().map(|m| m.name.as_str()).collect();
        let broken = catalog.broken_names();
        self.plugins()
            .filter(|(name, _)| !loaded.contains(name) && !broken.contains(name))
            .map(|(name, place)| Stranger {
                name: name.to_owned(),
                place: self
                    .file()
                    .zip(place)
                    .map(|(file, (line, column))| (file.to_owned(), line, column)),
                closest: closest(name, loaded.iter().copied()).map(ToOwned::to_owned),
            })
            .collect()
    }
}

/// The name among `known` closest to `name` by edit distance (ignoring case), if it is close
/// enough to be a typo: at most one edit in a name of up to 5 characters, two up to 8, three
/// beyond; the first in `known`'s order among equally close ones.
fn closest<'k>(name: &str, known: impl Iterator<Item = &'k str>) -> Option<&'k str> {
    let allowed = name.chars().count().max(3) / 3;
    let name = name.to_lowercase();
    known
        .map(|k| (strsim::levenshtein(&name, &k.to_lowercase()), k))
        .filter(|(d, _)| *d <= allowed)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::catalog::manifest::Manifest;

    fn catalog(names: &[&str]) -> Catalog {
        let mut catalog = Catalog::default();
        for name in names {
            let text = format!(
                "name = \"{name}\"\ncommand = \"bin/{name}\"\n[handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\n"
            );
            catalog.add(Manifest::parse(&text, Path::new("/cat/x.toml")).unwrap());
        }
        catalog
    }

    // The plain Levenshtein distance `closest` relies on: a swap of two letters is two edits.
    use strsim::levenshtein as distance;

    #[test]
    fn the_edit_distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(distance("kv", "kv"), 0);
        assert_eq!(distance("ghost", "host"), 1);
        assert_eq!(distance("notifer", "notifier"), 1);
        assert_eq!(distance("ab", "ba"), 2);
        assert_eq!(distance("", "abc"), 3);
    }

    #[test]
    fn a_grant_for_an_unknown_plugin_is_a_stranger_located_with_its_likely_typo() {
        let file = Path::new("/etc/tether/grants.toml");
        let text = "[plugins.kv]\nsecrets = []\n\n[plugins.notifer]\nnetwork = \"host\"\n\n[plugins.zzz-unrelated]\n";
        let grants = Grants::parse(text, file).unwrap();
        let strangers = grants.strangers(&catalog(&["kv", "notifier", "counter"]));
        assert_eq!(
            strangers,
            [
                Stranger {
                    name: "notifer".into(),
                    place: Some((file.to_owned(), 4, 10)),
                    closest: Some("notifier".into()),
                },
                Stranger {
                    name: "zzz-unrelated".into(),
                    place: Some((file.to_owned(), 7, 10)),
                    closest: None,
                },
            ]
        );
        assert_eq!(
            strangers[0].to_string(),
            "/etc/tether/grants.toml:4:10: grants for plugin `notifer`, which is not in the catalog; did you mean `notifier`? A misspelt name grants nothing: rename `[plugins.notifer]` to `[plugins.notifier]`, or remove it"
        );
        assert!(
            strangers[1]
                .to_string()
                .ends_with("not in the catalog; remove them from the grants file or add the plugin's manifest (a misspelt name grants nothing)")
        );
        assert!(
            grants
                .strangers(&catalog(&["kv", "notifer", "zzz-unrelated"]))
                .is_empty()
        );
    }

    #[test]
    fn grants_made_in_code_and_plugins_whose_manifest_is_broken_are_handled() {
        let in_code = Grants::new().secret("kvv", "x");
        let strangers = in_code.strangers(&catalog(&["kv"]));
        assert_eq!(strangers.len(), 1);
        assert_eq!(
            (strangers[0].place.as_ref(), strangers[0].closest.as_deref()),
            (None, Some("kv"))
        );
        // A manifest claimed twice does not load, but its name is the catalog's.
        let mut contested = catalog(&["kv"]);
        contested.add(catalog(&["kv"]).get("kv").unwrap().clone());
        assert!(contested.get("kv").is_none());
        assert!(
            Grants::new()
                .secret("kv", "x")
                .strangers(&contested)
                .is_empty()
        );
    }
}
