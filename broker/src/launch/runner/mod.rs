//! Runners: where a plugin runs. The seam between the launch's plan and the stages after it.
//!
//! A runner takes a prepared launch — the plan's environment, the files to expose (the
//! private socket directory, the delivered secrets/config directory, the state directory, the
//! operator's read-only allowances) and the program — and gives back a `Launched` plugin:
//! its stdout and stderr streams, a process group to wait for and to signal (`wait`, `kill`,
//! an id), exit hooks that remove what the runner made, a janitor registration, the
//! `PluginView` that translates socket paths between the plugin's view and the host's, and a
//! `Diagnose` hook that turns the runner's own failure output into an error message.
//! Handshake, connect, health, the client, shutdown, reattach and the supervisor see only
//! that; none of them knows which runner ran a plugin.
//!
//! - The **process runner** (`process/`) is the host's child process with all its confinement
//!   (Landlock, rlimits, a pids cgroup, the janitor): `process::start` confines, then spawns
//!   (`process::spawn`, started without copying the host: `process::vfork`).
//! - The **gVisor runner** (`gvisor/`) runs `runsc run` of a per-launch OCI bundle
//!   (`gvisor::bundle`, `gvisor::oci`) whose root file system holds the binary and its ELF
//!   dependencies (`gvisor::elf`). `runsc run` is the child the host waits for and signals: its stdout/stderr are
//!   the container's, it exits with the plugin, and killing it ends the sandbox (runsc ties an
//!   attached sandbox to it); its exit hook deletes the container.
//! - The **Pod runner** (`kubernetes/`, cargo feature `kubernetes`) makes a Pod per plugin
//!   instance: its container's log stream is the plugin's stdout, its deletion the signal,
//!   a `Remote` leader reports its end, and the view translates the one address its shim
//!   announces to the Pod's IP or a port-forward.
//!
//! Both take the launch's `Resources` and hand back `Spawned` (`launch/launched.rs`). The set
//! of runners is closed (chosen by [`Runner`]), so the seam is one `match` in `start.rs` over
//! that shared result type rather than a trait object.

use crate::launch::error::{Failure, StartErrorKind};

pub(crate) mod gvisor;
#[cfg(feature = "kubernetes")]
pub(crate) mod kubernetes;
pub(crate) mod options;
pub(crate) mod process;
pub(crate) mod view;

/// A runner's reading of the plugin's failure output (its stderr tail): a message about the
/// runner itself (e.g. `runsc failed: …`) when the runner, not the plugin, failed.
pub(crate) type Diagnose = fn(&str) -> Option<String>;

/// `failure` as the runner's own when the plugin "exited" because the runner failed: the
/// runner's `diagnose` hook recognises its message in `stderr_tail`.
pub(crate) fn diagnosed(
    failure: Failure,
    runner: &'static str,
    diagnose: Option<Diagnose>,
    stderr_tail: &str,
) -> Failure {
    match (&failure.kind, diagnose.and_then(|d| d(stderr_tail))) {
        (StartErrorKind::Exited { .. }, Some(problem)) => {
            StartErrorKind::Runner { runner, problem }.into()
        }
        _ => failure,
    }
}
