//! Where the catalog directory of `list`, `check` and `run` comes from.

use std::fmt;

/// The environment variable naming the catalog directory when `--catalog` is not given.
pub(crate) const CATALOG_ENV: &str = "TETHER_CATALOG";

/// The catalog directory used when neither `--catalog` nor [`CATALOG_ENV`] names one, relative
/// to the current directory.
pub(crate) const DEFAULT_CATALOG: &str = "catalog";

/// Where the catalog directory came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// `--catalog DIR`.
    Flag,
    /// [`CATALOG_ENV`].
    Env,
    /// [`DEFAULT_CATALOG`] in the current directory.
    CurrentDir,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Flag => write!(f, "--catalog"),
            Self::Env => write!(f, "${CATALOG_ENV}"),
            Self::CurrentDir => write!(f, "./{DEFAULT_CATALOG} in the current directory"),
        }
    }
}
