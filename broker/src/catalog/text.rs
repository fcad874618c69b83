//! Text facts shared by the catalog's TOML files (manifests, grants): valid names, keys and
//! strings written as TOML, where a byte offset is (line, column, dotted key), and `${NAME}`
//! expansion. Pure string functions.

pub use crate::launch::delivery::MAX_NAME_LEN;
pub(crate) use crate::launch::delivery::check_name;

/// `name` as a TOML key: bare when it can be, else quoted.
pub(crate) fn toml_key(name: &str) -> String {
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

/// `s` as a TOML basic string (`"…"`, escaped by toml's own writer).
pub(crate) fn toml_string(s: &str) -> String {
    use toml_writer::ToTomlValue as _;
    toml_writer::TomlStringBuilder::new(s)
        .as_basic()
        .to_toml_value()
}

/// 1-based line and column of byte `offset` in `text`.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    (line, offset - line_start + 1)
}

/// The dotted key whose entry holds byte `offset`: the nearest `key =` at or above its line,
/// prefixed with the enclosing `[table]`.
pub(crate) fn key_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let upto = &text[..text[offset..].find('\n').map_or(text.len(), |p| offset + p)];
    let mut key = None;
    for line in upto.lines().rev() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            let table = header.trim_start_matches('[').split(']').next()?.trim();
            return Some(match key {
                Some(k) => format!("{table}.{k}"),
                None => table.to_owned(),
            });
        }
        if key.is_none()
            && let Some((k, _)) = line.split_once('=')
            && !k.trim().is_empty()
            && !k.contains(['"', '\'', ','])
        {
            key = Some(k.trim().to_owned());
        }
        // Other lines are parts of a multi-line value: keep looking upwards for its key.
    }
    key
}

/// Expands `${NAME}` and `${NAME:-default}` in `text` with `lookup` (an unset or empty
/// variable takes the default; without one it is an error). A `$` not starting `${NAME…}` is
/// an error, so a typo cannot silently become part of a path.
pub(crate) fn expand_env(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let bad = || {
            format!("`{text}`: write environment variables as `${{NAME}}` or `${{NAME:-default}}`")
        };
        let inner_end = after
            .strip_prefix('{')
            .and_then(|a| a.find('}'))
            .ok_or_else(bad)?;
        let inner = &after[1..=inner_end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        let valid_name = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid_name {
            return Err(bad());
        }
        match (lookup(name).filter(|v| !v.is_empty()), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                return Err(format!(
                    "`{text}` uses the environment variable `{name}`, which is not set (or empty) in the host's environment; set it or give a default: `${{{name}:-/path}}`"
                ));
            }
        }
        rest = &after[inner_end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toml_string_reads_back_as_the_same_text_whatever_it_holds() {
        let texts = [
            "/opt/py",
            r#"a "quoted" \ path"#,
            "line\nbreak\ttab",
            "nul\0 del\u{7f} esc\u{1b}",
            "ünï ✓",
        ];
        for text in texts {
            let line = format!("v = {}", toml_string(text));
            assert!(line.starts_with("v = \""), "a basic string: {line}");
            let table: toml::Table =
                toml::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(table["v"].as_str(), Some(text), "{line}");
        }
    }
}
