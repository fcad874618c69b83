//! The confinement keys a manifest and the grants file share (`sandbox`, `network`,
//! `seccomp`, `namespaces`, `run_as`, `env_allow`, `env`, `sandbox_allow_exec`, `sandbox_allow_read`): one struct deserializes
//! them from both files and one function turns them into a [`Confinement`]. In a manifest they
//! are what the plugin asks for; in a grants file's `[plugins.NAME]` what it may ask for.
//!
//! A new grantable key is a field of [`RawConfinement`] and a line of [`RawConfinement::read`];
//! both files then accept it, and the schema check knows it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::catalog::errors::CatalogFileError;
use crate::catalog::text::{expand_env, toml_string};
use crate::confine::confinement::Confinement;
use crate::confine::network::NetworkMode;
use crate::confine::sandbox::SandboxMode;
use crate::confine::seccomp::SeccompMode;
use crate::confine::world::NamespacesMode;

/// The shared keys as written, each name and path with its place so that errors point at it.
/// Deserialized from the same table as the file's own keys (a second pass over it): toml's
/// spans do not survive `#[serde(flatten)]`.
#[derive(Deserialize, Default)]
pub(crate) struct RawConfinement {
    #[serde(default)]
    sandbox: SandboxMode,
    #[serde(default)]
    network: NetworkMode,
    #[serde(default)]
    seccomp: SeccompMode,
    namespaces: Option<Spanned<NamespacesMode>>,
    run_as: Option<Spanned<String>>,
    #[serde(default)]
    env_allow: Vec<Spanned<String>>,
    /// `env = { NAME = "value" }`: fixed values (TOML forbids a name twice).
    #[serde(default)]
    env: BTreeMap<Spanned<String>, Spanned<String>>,
    #[serde(default)]
    sandbox_allow_exec: Vec<Spanned<String>>,
    #[serde(default)]
    sandbox_allow_read: Vec<Spanned<String>>,
}

/// How a file's confinement paths are read: both are relative to the file's directory; a
/// manifest's may also use the host's environment (`${NAME}`, `${NAME:-default}`), because
/// interpreter locations differ between machines, while the operator writes literal paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathStyle {
    /// `${NAME}` expanded (a manifest).
    Expanded,
    /// Taken as written (the grants file).
    Literal,
}

impl RawConfinement {
    /// The names of `env_allow`, with their places (a manifest refuses one listed twice).
    pub(crate) fn env_allow(&self) -> &[Spanned<String>] {
        &self.env_allow
    }

    /// Where `namespaces` is written (its value's byte range), when it is.
    pub(crate) fn namespaces_at(&self) -> Option<std::ops::Range<usize>> {
        self.namespaces.as_ref().map(Spanned::span)
    }

    /// `run_as` as written, when it is.
    pub(crate) fn run_as(&self) -> Option<&Spanned<String>> {
        self.run_as.as_ref()
    }

    /// The [`Confinement`] these keys describe, paths resolved against `dir`; other fields
    /// (those no file sets: `plugin_ids`, `allow_root`, …) keep their defaults. `error`
    /// locates a problem at a value under a key.
    ///
    /// # Errors
    /// The first bad value: a `run_as` that is not `"UID:GID"`, an environment variable name
    /// that is empty or holds `=` or NUL, an `env` name the protocol owns or a value with NUL,
    /// a path that is empty or holds NUL, or (with
    /// [`PathStyle::Expanded`]) names an unset variable.
    pub(crate) fn read(
        self,
        dir: &Path,
        style: PathStyle,
        error: impl Fn(&Spanned<String>, &str, String) -> CatalogFileError,
    ) -> Result<Confinement, CatalogFileError> {
        let mut confinement = Confinement::default()
            .sandbox(self.sandbox)
            .network(self.network)
            .seccomp(self.seccomp)
            .namespaces(
                self.namespaces
                    .map_or_else(NamespacesMode::default, Spanned::into_inner),
            );
        if let Some(written) = &self.run_as {
            let (uid, gid) =
                run_as(written.get_ref()).map_err(|why| error(written, "run_as", why))?;
            confinement = confinement.run_as(uid, gid);
        }
        for name in &self.env_allow {
            let value = name.get_ref();
            if value.is_empty() || value.contains(['=', '\0']) {
                return Err(error(
                    name,
                    "env_allow",
                    "must be an environment variable name (not empty, no `=` or NUL)".into(),
                ));
            }
            confinement.env_allow.push(value.clone());
        }
        for (name, value) in &self.env {
            env_name(name.get_ref()).map_err(|why| error(name, "env", why))?;
            if value.get_ref().contains('\0') {
                return Err(error(value, "env", "contains a NUL byte".into()));
            }
            confinement = confinement.env(name.get_ref(), value.get_ref());
        }
        for (key, values, into) in [
            (
                "sandbox_allow_exec",
                &self.sandbox_allow_exec,
                &mut confinement.sandbox_allow_exec,
            ),
            (
                "sandbox_allow_read",
                &self.sandbox_allow_read,
                &mut confinement.sandbox_allow_read,
            ),
        ] {
            for value in values {
                into.push(path(value, key, dir, style, &error)?);
            }
        }
        Ok(confinement)
    }
}

/// The ids of `run_as = "UID:GID"`: two decimal numbers, neither `4294967295` (which the
/// kernel's `setresuid` reads as "unchanged"). Names are not looked up: the ids are the same
/// on every host that reads the file, and `/etc/passwd` is not consulted.
pub(crate) fn run_as(written: &str) -> Result<(u32, u32), String> {
    let id = |part: &str| {
        part.parse::<u32>()
            .ok()
            .filter(|id| *id != u32::MAX && part.bytes().all(|b| b.is_ascii_digit()))
    };
    match written.split_once(':') {
        Some((uid, gid)) => match (id(uid), id(gid)) {
            (Some(uid), Some(gid)) => Ok((uid, gid)),
            _ => Err(format!(
                "`{written}` is not `\"UID:GID\"`: write two numeric ids below 4294967295, e.g. `run_as = \"65534:65534\"` (names are not looked up)"
            )),
        },
        None => Err(format!(
            "`{written}` is not `\"UID:GID\"`: write the user id and the group id, e.g. `run_as = \"65534:65534\"`"
        )),
    }
}

/// Whether `name` may be an `env` entry: a variable name (not empty, no `=` or NUL) that the
/// protocol does not own.
fn env_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains(['=', '\0']) {
        return Err(format!(
            "{} is not an environment variable name (not empty, no `=` or NUL)",
            toml_string(name)
        ));
    }
    if tether_proto::env::ALL.contains(&name) {
        return Err(format!(
            "`{name}` is set by the host for every plugin (the plugin protocol's variable): remove it from `env`"
        ));
    }
    Ok(())
}

/// One confinement path of a file in directory `dir`.
fn path(
    value: &Spanned<String>,
    key: &str,
    dir: &Path,
    style: PathStyle,
    error: &impl Fn(&Spanned<String>, &str, String) -> CatalogFileError,
) -> Result<PathBuf, CatalogFileError> {
    let written = value.get_ref();
    if written.contains('\0') {
        return Err(error(value, key, "contains a NUL byte".into()));
    }
    let path = match style {
        PathStyle::Literal => written.clone(),
        PathStyle::Expanded => expand_env(written, |name| std::env::var(name).ok())
            .map_err(|why| error(value, key, why))?,
    };
    if path.is_empty() {
        return Err(error(value, key, "is empty".into()));
    }
    // An absolute entry replaces `dir` in the join.
    Ok(dir.join(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_as_is_two_numeric_ids_and_nothing_else() {
        assert_eq!(run_as("65534:65534"), Ok((65534, 65534)));
        assert_eq!(run_as("0:0"), Ok((0, 0)));
        assert_eq!(run_as("1000:100"), Ok((1000, 100)));
        for bad in [
            "65534",
            "nobody:nogroup",
            "1000:",
            ":1000",
            "+1:1",
            "1:2:3",
            " 1:1",
            "4294967295:1",
            "1:4294967296",
        ] {
            let why = run_as(bad).expect_err(bad);
            assert!(why.contains("UID:GID"), "{bad}: {why}");
        }
    }
}
