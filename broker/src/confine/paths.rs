//! Lexical facts about the paths a plugin may be allowed (sandbox allowances, grants of
//! them). Pure: nothing here looks at the file system.

use std::path::{Component, Path, PathBuf};

/// `path` with `.` and `..` removed lexically (`..` at the root stays at the root).
pub(crate) fn normalized(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_are_removed_and_parents_cannot_climb_above_the_root() {
        assert_eq!(normalized(Path::new("/a/./b/../c")), Path::new("/a/c"));
        assert_eq!(normalized(Path::new("/../../etc")), Path::new("/etc"));
        assert_eq!(normalized(Path::new("a/../../b")), Path::new("b"));
        assert_eq!(normalized(Path::new("/usr/lib/")), Path::new("/usr/lib"));
    }
}
