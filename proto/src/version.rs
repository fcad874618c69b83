//! App protocol version negotiation, as go-plugin does it.
//!
//! The host lists the versions it supports in `PLUGIN_PROTOCOL_VERSIONS`; the plugin answers the
//! highest version both support, or — when there is none — its own lowest, which the host then
//! rejects with a clear message.

/// Why `PLUGIN_PROTOCOL_VERSIONS` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VersionListError {
    /// An entry is not a non-negative integer.
    #[error("protocol version {0:?} is not a number")]
    NotANumber(String),
}

/// Parses a comma-separated version list such as `1,2,5`. Empty entries and whitespace are
/// ignored (go-plugin tolerates `1,`).
///
/// # Errors
/// [`VersionListError::NotANumber`] for the first entry that is not a `u32`.
pub fn parse_list(list: &str) -> Result<Vec<u32>, VersionListError> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .map_err(|_| VersionListError::NotANumber(s.to_owned()))
        })
        .collect()
}

/// Formats versions for `PLUGIN_PROTOCOL_VERSIONS`.
#[must_use]
pub fn format_list(versions: &[u32]) -> String {
    versions
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The version a plugin supporting `plugin` should answer to a host supporting `host`: the highest
/// common version, else the plugin's lowest (which the host will refuse). `None` only when the
/// plugin supports nothing.
#[must_use]
pub fn choose(host: &[u32], plugin: &[u32]) -> Option<u32> {
    plugin
        .iter()
        .copied()
        .filter(|v| host.contains(v))
        .max()
        .or_else(|| plugin.iter().copied().min())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_with_spaces_and_trailing_commas() {
        assert_eq!(parse_list("1, 2,5,"), Ok(vec![1, 2, 5]));
        assert_eq!(parse_list(""), Ok(vec![]));
        assert_eq!(
            parse_list("1,x"),
            Err(VersionListError::NotANumber("x".into()))
        );
    }

    #[test]
    fn chooses_the_highest_common_version_else_the_plugins_lowest() {
        assert_eq!(choose(&[1, 2, 3], &[2, 3, 4]), Some(3));
        assert_eq!(choose(&[1], &[4, 2]), Some(2));
        assert_eq!(choose(&[1], &[]), None);
    }

    #[test]
    fn formats_lists_for_the_environment() {
        assert_eq!(format_list(&[1, 2]), "1,2");
        assert_eq!(parse_list(&format_list(&[7, 3])), Ok(vec![7, 3]));
    }
}
