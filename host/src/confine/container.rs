//! A gVisor container of a plugin, as the host and the [janitor](super::janitor) delete it:
//! `runsc --root ROOT delete --force ID`.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// A gVisor container of a plugin: deleted with `RUNSC --root ROOT delete --force ID`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Container {
    /// The `runsc` program (absolute).
    pub(crate) runsc: PathBuf,
    /// runsc's state root (`--root`).
    pub(crate) root: PathBuf,
    /// The container id: only `[A-Za-z0-9._-]`.
    pub(crate) id: String,
}

impl Container {
    /// Deletes the container (killing it if it still runs) and waits for runsc; failures are
    /// logged, the janitor retries if the host dies first.
    pub(crate) fn delete(&self) {
        let status = Command::new(&self.runsc)
            .arg("--root")
            .arg(&self.root)
            .args(["delete", "--force"])
            .arg(&self.id)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        match status {
            Ok(status) if status.success() => {}
            Ok(status) => tracing::warn!(container = self.id, %status, "runsc delete failed"),
            Err(e) => tracing::warn!(container = self.id, error = %e, "cannot run runsc delete"),
        }
    }
}
