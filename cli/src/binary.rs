//! Where a plugin's program was looked for, so that a missing one is reported with every
//! place searched — the catalog's `bin/`, the `--bin-dir` fallback, `PATH` — not only the last.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

/// One place a program was looked for, and why there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Place {
    /// The path tried.
    pub(crate) path: PathBuf,
    /// Why it was tried (`the catalog's bin/`, `--bin-dir`, `PATH`, …).
    pub(crate) why: &'static str,
}

/// The places of a [`CliError::MissingBinary`](crate::error::CliError::MissingBinary), `PATH (a, b)` style.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Searched(pub(crate) Vec<Place>);

impl fmt::Display for Searched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, place) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{} ({})", place.path.display(), place.why)?;
        }
        Ok(())
    }
}

/// The places a catalog command `manifest_command` (as the manifest resolves it) was looked
/// for, given where the catalog found it (`resolved`): both when `bin/NAME` fell back to the
/// bin directory, else the manifest's own path.
pub(crate) fn catalog_places(
    manifest_command: &Path,
    resolved: &Path,
    bin_dir_flag: bool,
) -> Searched {
    let mut places = Vec::new();
    if manifest_command != resolved {
        places.push(Place {
            path: manifest_command.to_owned(),
            why: "the catalog's bin/",
        });
        places.push(Place {
            path: resolved.to_owned(),
            why: if bin_dir_flag {
                "--bin-dir"
            } else {
                "next to this tether; --bin-dir DIR looks elsewhere"
            },
        });
    } else {
        places.push(Place {
            path: resolved.to_owned(),
            why: "the manifest's command",
        });
    }
    Searched(places)
}

/// Checks that `--cmd`'s program exists: a path as it is, a bare name in each `PATH`
/// directory (`path_var`, the value of `PATH`), as the host's spawn will look for it; else
/// every place searched, once each.
pub(crate) fn check_program(program: &str, path_var: Option<&OsStr>) -> Result<(), Searched> {
    let mut places: Vec<Place> = if program.contains('/') {
        vec![Place {
            path: PathBuf::from(program),
            why: "--cmd",
        }]
    } else {
        std::env::split_paths(path_var.unwrap_or_default())
            .map(|dir| Place {
                path: dir.join(program),
                why: "PATH",
            })
            .collect()
    };
    if places.iter().any(|p| p.path.is_file()) {
        return Ok(());
    }
    let mut seen = std::collections::HashSet::new();
    places.retain(|p| seen.insert(p.path.clone()));
    Err(Searched(places))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bin_command_that_fell_back_names_both_places() {
        let searched = catalog_places(Path::new("/c/bin/p"), Path::new("/t/p"), false);
        assert_eq!(
            searched.to_string(),
            "/c/bin/p (the catalog's bin/), /t/p (next to this tether; --bin-dir DIR looks elsewhere)"
        );
        let own = catalog_places(Path::new("/c/x"), Path::new("/c/x"), false);
        assert_eq!(own.to_string(), "/c/x (the manifest's command)");
    }

    #[test]
    fn a_bare_program_is_looked_for_in_every_path_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("here"), "").unwrap();
        let path = std::env::join_paths([
            Path::new("/nonexistent"),
            dir.path(),
            Path::new("/nonexistent"),
        ])
        .unwrap();
        assert!(check_program("here", Some(&path)).is_ok());
        let err = check_program("gone", Some(&path)).unwrap_err().to_string();
        assert_eq!(err.matches("/nonexistent/gone (PATH)").count(), 1, "{err}");
        assert!(
            err.contains(&format!("{}/gone (PATH)", dir.path().display())),
            "{err}"
        );
        assert!(check_program("/nonexistent/p", None).is_err());
    }
}
