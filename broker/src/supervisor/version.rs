//! One version of a catalog plugin: the manifest a start runs, the plugin's metrics under that
//! manifest's attributes, and what its program file looked like when the version was made
//! (so that a reload can tell a replaced binary from an unchanged one).

use std::os::unix::fs::MetadataExt as _;

use crate::catalog::manifest::Manifest;
use crate::telemetry::metrics::{Metrics, PluginMetrics};

/// A plugin's manifest as the supervisor runs it: replaced as a whole by an upgrade.
#[derive(Debug)]
pub(crate) struct Version {
    pub(crate) manifest: Manifest,
    /// The plugin's metrics, when the supervisor measures.
    pub(crate) metrics: Option<PluginMetrics>,
    /// The program file when this version was made; `None` when it could not be read or lives
    /// elsewhere (a Pod's image).
    pub(crate) program: Option<Fingerprint>,
}

/// What identifies the contents of a program file without reading it: its device, inode, size
/// and modification time. A binary copied over, renamed into place or rebuilt changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    device: u64,
    inode: u64,
    size: u64,
    modified: (i64, i64),
}

impl Version {
    /// The first version of `manifest`'s plugin, measured on `metrics` if given.
    pub(crate) fn new(manifest: Manifest, metrics: Option<&Metrics>) -> Self {
        Self {
            metrics: metrics.map(|all| all.plugin(&manifest.name, manifest.sha256.as_deref())),
            program: Fingerprint::of(&manifest),
            manifest,
        }
    }

    /// The version after this one, running `manifest`: it keeps this version's metrics when
    /// their attributes stay the same (the same pinned digest), else gets its own.
    pub(crate) fn next(&self, manifest: Manifest, metrics: Option<&Metrics>) -> Self {
        if manifest.sha256 == self.manifest.sha256 {
            return Self {
                metrics: self.metrics.clone(),
                program: Fingerprint::of(&manifest),
                manifest,
            };
        }
        Self::new(manifest, metrics)
    }

    /// Whether `manifest` differs from this version's, or its program file from the one this
    /// version was made with.
    pub(crate) fn differs_from(&self, manifest: &Manifest) -> bool {
        self.manifest != *manifest || self.program != Fingerprint::of(manifest)
    }
}

impl Fingerprint {
    /// The fingerprint of `manifest`'s program file, if it is a file on this host.
    pub(crate) fn of(manifest: &Manifest) -> Option<Self> {
        if manifest.runner.name() == "kubernetes" {
            return None; // The command is a path in the Pod's image.
        }
        let meta = std::fs::metadata(&manifest.command).ok()?;
        Some(Self {
            device: meta.dev(),
            inode: meta.ino(),
            size: meta.size(),
            modified: (meta.mtime(), meta.mtime_nsec()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(dir: &std::path::Path, args: &str) -> Manifest {
        let text = format!(
            "name = \"p\"\ncommand = \"bin/p\"\nargs = [{args}]\n\
             [handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\n"
        );
        Manifest::parse(&text, &dir.join("p.toml")).unwrap()
    }

    #[test]
    fn a_changed_manifest_or_a_program_renamed_into_place_differs_and_an_untouched_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("bin/p"), b"one").unwrap();
        let first = manifest(dir.path(), "");
        let version = Version::new(first.clone(), None);
        assert!(!version.differs_from(&first));
        assert!(version.differs_from(&manifest(dir.path(), "\"--flag\"")));

        std::fs::write(dir.path().join("bin/p.new"), b"two").unwrap();
        std::fs::rename(dir.path().join("bin/p.new"), dir.path().join("bin/p")).unwrap();
        assert!(version.differs_from(&first));
        assert!(!Version::new(first.clone(), None).differs_from(&first));
    }

    #[test]
    fn a_missing_program_has_no_fingerprint_and_appearing_makes_the_version_differ() {
        let dir = tempfile::tempdir().unwrap();
        let first = manifest(dir.path(), "");
        let version = Version::new(first.clone(), None);
        assert_eq!(version.program, None);
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("bin/p"), b"one").unwrap();
        assert!(version.differs_from(&first));
    }
}
