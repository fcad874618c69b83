//! What is wrong with a catalog file (a manifest or the grants file): [`CatalogFileError`], one
//! located problem, and [`CatalogFileErrors`], every problem found in one file.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::catalog::text::{key_at, line_column};

/// Which kind of catalog file a [`CatalogFileError`] is about, and so who fixes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileKind {
    /// A plugin manifest (written by the plugin's author).
    Manifest,
    /// The operator's grants file ([`Grants`](crate::Grants)).
    Grants,
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Manifest => "manifest",
            Self::Grants => "grants file",
        })
    }
}

/// A manifest or grants file that cannot be used: which file, where, which key and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}:{column}: {}{message}; fix the {file_kind}", file.display(), key.as_ref().map(|k| format!("key `{k}`: ")).unwrap_or_default())]
#[non_exhaustive]
pub struct CatalogFileError {
    /// The manifest file.
    pub file: PathBuf,
    /// 1-based line of the problem (1 when the file could not be read).
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// The key at fault, dotted (`limits.memory_mib`), when known.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
    /// Whether [`file`](Self::file) is a manifest or the grants file.
    pub file_kind: FileKind,
    /// The plugin a manifest declares (its `name` string), when the file is TOML that has
    /// one: a broken manifest is still that plugin's (`None` for the grants file).
    pub plugin: Option<String>,
}

impl CatalogFileError {
    /// The plugin a manifest's problem belongs to, as far as it can be told: the name it
    /// declares ([`plugin`](Self::plugin)), else its file name without `.toml`.
    #[must_use]
    pub fn plugin_named(&self) -> Option<&str> {
        self.plugin
            .as_deref()
            .or_else(|| self.file.file_stem().and_then(|s| s.to_str()))
    }

    pub(crate) fn whole_file(file: &Path, message: impl fmt::Display) -> Self {
        Self {
            file: file.to_owned(),
            line: 1,
            column: 1,
            key: None,
            message: message.to_string(),
            file_kind: FileKind::Manifest,
            plugin: None,
        }
    }

    pub(crate) fn at(
        file: &Path,
        text: &str,
        offset: usize,
        key: Option<String>,
        message: String,
    ) -> Self {
        let (line, column) = line_column(text, offset);
        let key = key.or_else(|| key_at(text, offset));
        Self {
            file: file.to_owned(),
            line,
            column,
            key,
            message,
            file_kind: FileKind::Manifest,
            plugin: None,
        }
    }
}

/// Every problem found in one manifest or grants file, in file order; never empty. Unknown
/// keys are all reported (a misspelt key rarely comes alone); of the other problems, the
/// first.
///
/// ```
/// let text = "name = \"kv\"\ncommand = \"kv\"\ncolour = 1\n[handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\nflavour = 2\n";
/// let errors = tether_broker::Manifest::parse(text, "/cat/kv.toml".as_ref()).unwrap_err();
/// let keys: Vec<_> = errors.iter().map(|e| (e.line, e.key.as_deref())).collect();
/// assert_eq!(keys, [(3, Some("colour")), (7, Some("handshake.flavour"))]);
/// assert_eq!(errors.first().plugin.as_deref(), Some("kv"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogFileErrors {
    /// At least one.
    errors: Vec<CatalogFileError>,
}

impl CatalogFileErrors {
    /// `first` and then `more`.
    pub(crate) fn new(first: CatalogFileError, more: Vec<CatalogFileError>) -> Self {
        let mut errors = vec![first];
        errors.extend(more);
        Self { errors }
    }

    /// The first problem (in file order).
    #[must_use]
    pub fn first(&self) -> &CatalogFileError {
        // `new` and `From` put at least one in; nothing removes any.
        &self.errors[0]
    }

    /// Every problem, in file order.
    pub fn iter(&self) -> std::slice::Iter<'_, CatalogFileError> {
        self.errors.iter()
    }

    /// Every problem, in file order.
    #[must_use]
    pub fn as_slice(&self) -> &[CatalogFileError] {
        &self.errors
    }

    /// Each problem with `plugin` as the plugin its file declares.
    pub(crate) fn declared_by(mut self, plugin: Option<&str>) -> Self {
        for error in &mut self.errors {
            error.plugin = plugin.map(ToOwned::to_owned);
        }
        self
    }

    /// Each problem as one of `kind`'s file.
    pub(crate) fn of_kind(mut self, kind: FileKind) -> Self {
        for error in &mut self.errors {
            error.file_kind = kind;
        }
        self
    }
}

impl From<CatalogFileError> for CatalogFileErrors {
    fn from(error: CatalogFileError) -> Self {
        Self {
            errors: vec![error],
        }
    }
}

impl IntoIterator for CatalogFileErrors {
    type Item = CatalogFileError;
    type IntoIter = std::vec::IntoIter<CatalogFileError>;

    fn into_iter(self) -> Self::IntoIter {
        self.errors.into_iter()
    }
}

impl<'a> IntoIterator for &'a CatalogFileErrors {
    type Item = &'a CatalogFileError;
    type IntoIter = std::slice::Iter<'a, CatalogFileError>;

    fn into_iter(self) -> Self::IntoIter {
        self.errors.iter()
    }
}

impl fmt::Display for CatalogFileErrors {
    /// One problem per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CatalogFileErrors {}
