//! Every unknown key of a catalog file, located: the file is parsed into a table that keeps each
//! key's place, and walked against a [`Schema`] whose key lists come from the very structs
//! that then deserialize the file ([`fields`]), so the two cannot disagree. `serde`'s
//! `deny_unknown_fields` stops at the first unknown key; this finds all of them. Pure.

use std::path::Path;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use toml::de::{DeTable, DeValue};

use crate::catalog::errors::{CatalogFileError, CatalogFileErrors, FileKind};
use crate::catalog::text::{line_column, toml_key};

/// The keys a table may have, and what the tables among them may have.
#[derive(Debug)]
pub(crate) struct Schema {
    /// The known keys ([`fields`] of the struct the table deserializes into).
    keys: Vec<&'static str>,
    /// The schemas of tables under some keys.
    tables: Vec<(&'static str, Schema)>,
    /// The schema of a table under any key (the grants file's `[plugins.NAME]`).
    any: Option<Box<Schema>>,
}

impl Schema {
    /// A table with the fields of `T`.
    pub(crate) fn of<'de, T: Deserialize<'de>>() -> Self {
        Self {
            keys: fields::<T>().to_vec(),
            tables: Vec::new(),
            any: None,
        }
    }

    /// Plus the fields of `T`: a table read by two structs (a manifest's own keys and the
    /// confinement keys it shares with the grants file).
    pub(crate) fn and<'de, T: Deserialize<'de>>(mut self) -> Self {
        self.keys.extend_from_slice(fields::<T>());
        self
    }

    /// Plus the table under `key`.
    pub(crate) fn table(mut self, key: &'static str, schema: Self) -> Self {
        self.tables.push((key, schema));
        self
    }

    /// A table whose keys are names chosen by the file, each holding a table of `schema`.
    pub(crate) fn any_key(schema: Self) -> Self {
        Self {
            keys: Vec::new(),
            tables: Vec::new(),
            any: Some(Box::new(schema)),
        }
    }
}

/// Parses `text` (a file of `kind`) into a table that keeps every key's place.
///
/// # Errors
/// The syntax error, located.
pub(crate) fn document<'t>(
    text: &'t str,
    file: &Path,
    kind: FileKind,
) -> Result<DeTable<'t>, CatalogFileError> {
    DeTable::parse(text)
        .map(toml::Spanned::into_inner)
        .map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            let mut error =
                CatalogFileError::at(file, text, offset, None, e.message().trim().to_owned());
            error.file_kind = kind;
            error
        })
}

/// The string under `key` at the top of `table` (a manifest's `name`).
pub(crate) fn string<'t>(table: &'t DeTable<'_>, key: &str) -> Option<&'t str> {
    match table.get(key)?.get_ref() {
        DeValue::String(s) => Some(&**s),
        _ => None,
    }
}

/// The line of each top-level key of `table` (parsed from `text`).
pub(crate) fn lines(table: &DeTable<'_>, text: &str) -> std::collections::BTreeMap<String, usize> {
    table
        .iter()
        .map(|(key, _)| {
            let name: &str = key.get_ref();
            (name.to_owned(), line_column(text, key.span().start).0)
        })
        .collect()
}

/// Every key of `table` that `schema` does not know, in file order.
///
/// # Errors
/// One located error per unknown key.
pub(crate) fn check(
    table: &DeTable<'_>,
    schema: &Schema,
    file: &Path,
    text: &str,
    kind: FileKind,
) -> Result<(), CatalogFileErrors> {
    let mut found = Vec::new();
    walk(table, schema, "", &mut found);
    found.sort_by_key(|(offset, _, _)| *offset);
    let mut errors = found.into_iter().map(|(offset, key, message)| {
        let mut error = CatalogFileError::at(file, text, offset, Some(key), message);
        error.file_kind = kind;
        error
    });
    match errors.next() {
        None => Ok(()),
        Some(first) => Err(CatalogFileErrors::new(first, errors.collect())),
    }
}

/// Collects `(offset, dotted key, message)` of every unknown key below `prefix`.
fn walk(
    table: &DeTable<'_>,
    schema: &Schema,
    prefix: &str,
    found: &mut Vec<(usize, String, String)>,
) {
    for (key, value) in table {
        let name: &str = key.get_ref();
        let dotted = format!("{prefix}{}", toml_key(name));
        let sub = schema
            .tables
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, s)| s)
            .or(schema.any.as_deref());
        if sub.is_none() && !schema.keys.contains(&name) {
            let expected: Vec<String> = schema.keys.iter().map(|k| format!("`{k}`")).collect();
            let message = match expected.is_empty() {
                true => "unknown key".to_owned(),
                false => format!("unknown key; expected one of {}", expected.join(", ")),
            };
            found.push((key.span().start, dotted, message));
            continue;
        }
        // A value of the wrong type is left to the deserializer, which says what it expects.
        if let (Some(sub), DeValue::Table(inner)) = (sub, value.get_ref()) {
            walk(inner, sub, &format!("{dotted}."), found);
        }
    }
}

/// The field names `T`'s derived `Deserialize` accepts, asked of it through a deserializer that
/// only listens (`deserialize_struct` is told them); empty for a type that is no struct.
pub(crate) fn fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut listener = FieldListener(&[]);
    // It always fails: the listener never produces a value, it only records the names.
    let _ = T::deserialize(&mut listener);
    listener.0
}

/// A deserializer that records the field list it is asked for and produces nothing.
struct FieldListener(&'static [&'static str]);

/// Why the [`FieldListener`] produced nothing (never shown).
#[derive(Debug)]
struct Listened;

impl std::fmt::Display for Listened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field names listened to")
    }
}

impl std::error::Error for Listened {}

impl de::Error for Listened {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Self
    }
}

impl<'de> Deserializer<'de> for &mut FieldListener {
    type Error = Listened;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Listened> {
        Err(Listened)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Listened> {
        self.0 = fields;
        Err(Listened)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    #[allow(dead_code)] // Only its field names are read.
    struct Inner {
        depth: u32,
    }

    #[derive(Deserialize)]
    #[allow(dead_code)] // Only its field names are read.
    struct Outer {
        name: String,
        inner: Inner,
    }

    #[test]
    fn the_fields_of_a_struct_are_read_from_its_deserialize() {
        assert_eq!(fields::<Outer>(), ["name", "inner"]);
        assert_eq!(fields::<Inner>(), ["depth"]);
        assert!(fields::<String>().is_empty());
    }

    #[test]
    fn every_unknown_key_is_found_in_file_order_with_its_dotted_key_and_place() {
        let text = "zeta = 1\nname = \"n\"\nalpha = 2\n[inner]\ndepth = 1\ndeep = 2\n[more.\"a b\"]\nx = 1\n";
        let schema = Schema::of::<Outer>()
            .table("inner", Schema::of::<Inner>())
            .table("more", Schema::any_key(Schema::of::<Inner>()));
        let file = Path::new("/f.toml");
        let doc = document(text, file, FileKind::Grants).unwrap();
        let errors = check(&doc, &schema, file, text, FileKind::Grants).unwrap_err();
        let found: Vec<_> = errors
            .iter()
            .map(|e| (e.line, e.column, e.key.clone().unwrap(), e.file_kind))
            .collect();
        assert_eq!(
            found,
            [
                (1, 1, "zeta".to_owned(), FileKind::Grants),
                (3, 1, "alpha".to_owned(), FileKind::Grants),
                (6, 1, "inner.deep".to_owned(), FileKind::Grants),
                (8, 1, "more.\"a b\".x".to_owned(), FileKind::Grants),
            ],
            "{errors}"
        );
        assert!(
            errors
                .first()
                .message
                .contains("expected one of `name`, `inner`"),
            "{errors}"
        );
        assert!(check(&doc, &Schema::of::<Outer>(), file, text, FileKind::Grants).is_err());
    }

    #[test]
    fn a_syntax_error_is_located() {
        let err =
            document("a = 1\nb = = 2\n", Path::new("/f.toml"), FileKind::Manifest).unwrap_err();
        assert_eq!(err.line, 2, "{err}");
    }
}
