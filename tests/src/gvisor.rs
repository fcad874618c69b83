//! The gVisor peer: `runsc` (Debian package `runsc`), run as root, for the tests of the gVisor
//! runner.
//!
//! When `runsc` is missing or the tests do not run as root they print why and skip — unless
//! `TETHER_REQUIRE_PEERS=1` (CI sets it), in which case they fail.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::peers::or_skip;

/// Where the tests look for `runsc` (the Debian package's path).
pub const RUNSC: &str = "/usr/bin/runsc";

/// `runsc`, or why the gVisor runner cannot run here.
///
/// # Errors
/// What is missing, to print when skipping.
pub fn runsc() -> Result<PathBuf, String> {
    let runsc = PathBuf::from(RUNSC);
    if !runsc.is_file() {
        return Err(format!(
            "{RUNSC} is missing; install it with `apt-get install runsc`"
        ));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("the gVisor runner's tests run as root".into());
    }
    Ok(runsc)
}

/// Like [`runsc`], but when it is unavailable: see [`or_skip`].
#[must_use]
pub fn runsc_or_skip(test: &str) -> Option<PathBuf> {
    or_skip(runsc(), "gVisor", test)
}

/// The containers runsc lists for state root `root` (none when the root does not exist).
///
/// # Panics
/// When `runsc list` fails on an existing root.
#[must_use]
pub fn containers(root: &Path) -> Vec<String> {
    if !root.exists() {
        return Vec::new();
    }
    let out = Command::new(RUNSC)
        .arg("--root")
        .arg(root)
        .args(["list", "-quiet"])
        .output()
        .expect("runsc list runs");
    assert!(
        out.status.success(),
        "runsc list: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}
