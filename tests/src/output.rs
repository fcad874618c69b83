//! What a program run by a test printed, as text.

use std::process::Output;

/// Its standard output (invalid UTF-8 replaced).
#[must_use]
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Its standard error (invalid UTF-8 replaced).
#[must_use]
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
