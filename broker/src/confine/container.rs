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
    ///
    /// When runsc's state root holds nothing of the container — `runsc run` destroys its
    /// container when it exits normally — there is nothing to delete and runsc is not run
    /// (a `runsc delete` costs tens of milliseconds, a noticeable part of a launch).
    pub(crate) fn delete(&self) {
        if !self.has_state() {
            return;
        }
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

    /// Whether runsc's state root may hold state of this container (its files are named
    /// `ID_sandbox:ID.state` and `.lock`); `true` when the root cannot be read.
    fn has_state(&self) -> bool {
        let prefix = format!("{}_", self.id);
        match std::fs::read_dir(&self.root) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .any(|e| e.file_name().to_string_lossy().starts_with(&prefix)),
            Err(e) => e.kind() != std::io::ErrorKind::NotFound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_container_without_state_in_the_root_needs_no_runsc_delete() {
        let root = tempfile::tempdir().unwrap();
        let container = Container {
            // Never run: a container with state would fail the test through this program.
            runsc: "/nonexistent/runsc".into(),
            root: root.path().to_owned(),
            id: "tether-abc-1".into(),
        };
        assert!(!container.has_state());
        std::fs::write(
            root.path().join("tether-abc-2_sandbox:tether-abc-2.state"),
            "",
        )
        .unwrap();
        assert!(!container.has_state(), "another container's state");
        std::fs::write(
            root.path().join("tether-abc-1_sandbox:tether-abc-1.state"),
            "",
        )
        .unwrap();
        assert!(container.has_state());
        let gone = Container {
            root: root.path().join("missing"),
            ..container
        };
        assert!(!gone.has_state());
    }
}
