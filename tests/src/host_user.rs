//! Security tests for a root host **and** a non-root host (issue 22): a test calls
//! [`root_and_unprivileged`] first; as root, that runs the same test again in a child test
//! process whose user and group are [`UNPRIVILEGED`] and fails if the child fails, then lets
//! the test go on as root. Not as root, the test runs once, as the user it was started as (CI
//! also runs the security test binaries that way: `.ci/run`, "as an unprivileged user").
//!
//! [`UNPRIVILEGED`] is a fixed uid and gid with no `/etc/passwd` entry, as a Kubernetes Pod's
//! `runAsUser` often is: nothing is added to the machine. What the child needs must be
//! readable and executable by it: the test binaries, the plugin binaries in the target
//! directory and the repository's files (the usual `0755`/`0644` modes; a checkout under a
//! `0700` home directory is not). When the child cannot start, the test fails if
//! `TETHER_REQUIRE_PEERS=1` (CI), else it says so and goes on as root only.

use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::process::Command;

use crate::peers::{REQUIRE_PEERS_ENV, peers_required};

/// The user and group the unprivileged run of a test has: no name, no supplementary groups.
/// Not `nobody` (65534), which the `run_as` tests give their plugins.
pub const UNPRIVILEGED: (u32, u32) = (61_234, 61_234);

/// Set (to the uid) in the child test process of the unprivileged run.
pub const CHILD_ENV: &str = "TETHER_TEST_UNPRIVILEGED_CHILD";

/// Who the host of this run of a test is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// The test runs as root (uid 0).
    Root,
    /// The test runs as a user other than root (the unprivileged child, or a run started as
    /// that user).
    NonRoot,
}

impl Host {
    /// The host of this process.
    #[must_use]
    pub fn current() -> Self {
        if rustix::process::geteuid().is_root() {
            Self::Root
        } else {
            Self::NonRoot
        }
    }

    /// Whether the host is root.
    #[must_use]
    pub fn is_root(self) -> bool {
        self == Self::Root
    }
}

/// Runs the test named `test` (its function name) a second time as [`UNPRIVILEGED`] when this
/// process is root, and returns who runs the body here ([`Host::Root`] in the parent,
/// [`Host::NonRoot`] in the child or when not started as root) in a guard that fails the test
/// at its end if the unprivileged run failed. The root body runs either way, so one run shows
/// how the test fails for both hosts.
///
/// # Panics
/// When the unprivileged run cannot start while `TETHER_REQUIRE_PEERS=1`; when the guard is
/// dropped after the unprivileged run failed or did not run the test.
pub fn root_and_unprivileged(test: &str) -> BothHosts {
    let host = Host::current();
    if host == Host::NonRoot || std::env::var_os(CHILD_ENV).is_some() {
        eprintln!(
            "{test}: running as uid {}",
            rustix::process::geteuid().as_raw()
        );
        return BothHosts {
            host,
            unprivileged: None,
        };
    }
    let unprivileged = match run_unprivileged(test) {
        Ok(Ok(output)) => {
            eprintln!("{test}: the unprivileged run passed:\n{output}");
            None
        }
        Ok(Err(failure)) => {
            eprintln!("{failure}");
            Some(failure)
        }
        Err(Unavailable(why)) if peers_required() => {
            panic!("{test}: the unprivileged run cannot start and {REQUIRE_PEERS_ENV}=1: {why}")
        }
        Err(Unavailable(why)) => {
            eprintln!("SKIPPED the unprivileged run of {test}: {why}");
            None
        }
    };
    eprintln!("{test}: running as root");
    BothHosts { host, unprivileged }
}

/// Who runs a test's body, and the unprivileged run's failure to report at the test's end.
#[derive(Debug)]
#[must_use = "keep it to the end of the test: dropping it fails the test if the unprivileged run failed"]
pub struct BothHosts {
    /// Who runs the body in this process.
    pub host: Host,
    unprivileged: Option<String>,
}

impl Drop for BothHosts {
    fn drop(&mut self) {
        if let Some(failure) = self.unprivileged.take() {
            if std::thread::panicking() {
                eprintln!("the test also failed for the non-root host (see above)");
            } else {
                panic!("{failure}");
            }
        }
    }
}

/// Why the unprivileged child could not start.
struct Unavailable(String);

/// Runs `test` in a child test process as [`UNPRIVILEGED`]: its output when it passed, else
/// the failure to report.
fn run_unprivileged(test: &str) -> Result<Result<String, String>, Unavailable> {
    let (uid, gid) = UNPRIVILEGED;
    let exe = std::env::current_exe().map_err(|e| Unavailable(format!("current_exe: {e}")))?;
    // A home of its own: the root's (HOME=/root) is not the child's to read or write.
    let home = tempfile::Builder::new()
        .prefix("tether-unprivileged-")
        .tempdir()
        .map_err(|e| Unavailable(format!("home directory: {e}")))?;
    std::os::unix::fs::chown(home.path(), Some(uid), Some(gid))
        .and_then(|()| {
            std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o700))
        })
        .map_err(|e| Unavailable(format!("home directory: {e}")))?;
    let output = Command::new(&exe)
        .args([
            test,
            "--exact",
            "--nocapture",
            "--test-threads=1",
            "--include-ignored",
        ])
        .env(CHILD_ENV, uid.to_string())
        .env("HOME", home.path())
        // Root's runtime directory (/run/user/0) is not the child's.
        .env_remove("XDG_RUNTIME_DIR")
        // std drops the supplementary groups (setgroups(0)) when root sets a uid.
        .uid(uid)
        .gid(gid)
        .output()
        .map_err(|e| {
            Unavailable(format!(
                "{} cannot be started as uid {uid} ({e}): the target directory and the \
                 repository must be readable and searchable by every user",
                exe.display()
            ))
        })?;
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(if !output.status.success() {
        Err(format!(
            "{test} FAILED as uid {uid} (the non-root host), {}:\n{text}",
            output.status
        ))
    } else if !text.contains("1 passed") {
        Err(format!("{test} did not run as uid {uid}:\n{text}"))
    } else {
        Ok(text)
    })
}
