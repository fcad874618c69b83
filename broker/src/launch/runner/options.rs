//! Which runner starts a plugin ([`Runner`]) and the gVisor runner's options
//! ([`GvisorOptions`]). Plain data, chosen by the builder or a manifest's `runner` key.

use std::fmt;
use std::path::PathBuf;

/// The `runsc` program the gVisor runner runs when no other is configured (looked up in the
/// host's `PATH`). Override with [`GvisorOptions::runsc`].
pub const DEFAULT_RUNSC: &str = "runsc";

/// How to install `runsc` when it is missing (Debian and Ubuntu package it).
pub const RUNSC_INSTALL_HINT: &str = "install gVisor's runsc (Debian/Ubuntu: `apt-get install runsc`) or set its path with GvisorOptions::runsc";

/// Where a plugin runs.
///
/// ```
/// use tether_broker::launch::{GvisorOptions, Runner};
/// let runner = Runner::Gvisor(GvisorOptions::new());
/// assert_eq!(runner.name(), "gvisor");
/// assert_eq!(Runner::default().name(), "process");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
// The Pod runner's options are larger than the others': a `Runner` is made once per plugin
// and read by reference, never moved on a hot path, so boxing would only cost its users.
#[allow(clippy::large_enum_variant)]
pub enum Runner {
    /// A child process of the host, confined by the [sandbox](crate::SandboxMode) (Landlock,
    /// rlimits, a pids cgroup, no new privileges) and ended by the janitor if the host dies.
    #[default]
    Process,
    /// An OCI container under gVisor's `runsc`: the plugin talks to gVisor's user-space kernel,
    /// not to the host's, and sees only its binary and libraries, its socket directory, its own
    /// delivered files, its state directory and a `/tmp` of its own.
    Gvisor(GvisorOptions),
    /// A Pod of its own on a Kubernetes cluster (cargo feature `kubernetes`): its image pinned
    /// by digest, only its granted values in a Secret of its own, reached over the multiplexed
    /// broker at the Pod's IP or through the API server's port-forward.
    #[cfg(feature = "kubernetes")]
    Kubernetes(crate::launch::runner::kubernetes::options::KubernetesOptions),
}

impl Runner {
    /// The runner's name as manifests and `tether check` spell it: `process`, `gvisor` or
    /// `kubernetes`.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Process => "process",
            Self::Gvisor(_) => "gvisor",
            #[cfg(feature = "kubernetes")]
            Self::Kubernetes(_) => "kubernetes",
        }
    }
}

/// The runner's name, and a gVisor sandbox's cgroup limits when set: `gvisor (memory 256
/// MiB, cpu 500 millicores)`; a Pod's image, limits and runtime class: `kubernetes (image
/// reg.example/kv@sha256:…, memory 256Mi, cpu 500m, runtime class gvisor)`.
impl fmt::Display for Runner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        let limits: Vec<String> = match self {
            Self::Process => Vec::new(),
            Self::Gvisor(options) => [
                options.memory_mib.map(|mib| format!("memory {mib} MiB")),
                options
                    .cpu_millis
                    .map(|millis| format!("cpu {millis} millicores")),
            ]
            .into_iter()
            .flatten()
            .collect(),
            #[cfg(feature = "kubernetes")]
            Self::Kubernetes(options) => [
                Some(format!("image {}", options.image.escape_debug())),
                options
                    .memory_limit
                    .as_ref()
                    .map(|q| format!("memory {}", q.escape_debug())),
                options
                    .cpu_limit
                    .as_ref()
                    .map(|q| format!("cpu {}", q.escape_debug())),
                options
                    .runtime_class
                    .as_ref()
                    .map(|c| format!("runtime class {}", c.escape_debug())),
            ]
            .into_iter()
            .flatten()
            .collect(),
        };
        if limits.is_empty() {
            Ok(())
        } else {
            write!(f, " ({})", limits.join(", "))
        }
    }
}

/// `reference` pins an image by digest: `name@sha256:` and 64 lower-case hex digits.
pub(crate) fn check_pinned(reference: &str) -> Result<(), String> {
    let pinned = reference
        .rsplit_once("@sha256:")
        .is_some_and(|(name, digest)| {
            !name.is_empty()
                && digest.len() == 64
                && digest
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
    if pinned {
        Ok(())
    } else {
        Err(format!(
            "the image `{}` is not pinned by digest (`repository@sha256:<64 hex digits>`): a \
             tag can change under the host; pin it, e.g. with the digest `docker buildx \
             imagetools inspect IMAGE` prints",
            reference.escape_debug()
        ))
    }
}

/// Options of the gVisor runner.
///
/// ```
/// use tether_broker::launch::GvisorOptions;
/// let options = GvisorOptions::new().runsc("/usr/bin/runsc").memory_mib(256);
/// assert_eq!(options.runsc_program(), std::path::Path::new("/usr/bin/runsc"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GvisorOptions {
    pub(crate) runsc: PathBuf,
    pub(crate) rootfs: Option<PathBuf>,
    pub(crate) state_root: Option<PathBuf>,
    pub(crate) memory_mib: Option<u64>,
    pub(crate) cpu_millis: Option<u64>,
    pub(crate) ignore_cgroups: bool,
}

impl Default for GvisorOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl GvisorOptions {
    /// `runsc` from the host's `PATH`, a root file system assembled from the plugin's binary
    /// and its ELF libraries, cgroups left alone (`--ignore-cgroups`) unless a limit needs them. The network is the
    /// builder's [`network`](crate::PluginClientBuilder::network) for every runner: none by
    /// default (`--network=none`), the host's (`--network=host`) only when asked (and granted).
    #[must_use]
    pub fn new() -> Self {
        Self {
            runsc: PathBuf::from(DEFAULT_RUNSC),
            rootfs: None,
            state_root: None,
            memory_mib: None,
            cpu_millis: None,
            ignore_cgroups: true,
        }
    }

    /// The `runsc` program (a path, or a name looked up in the host's `PATH`).
    #[must_use]
    pub fn runsc(mut self, program: impl Into<PathBuf>) -> Self {
        self.runsc = program.into();
        self
    }

    /// The configured `runsc` program.
    #[must_use]
    pub fn runsc_program(&self) -> &std::path::Path {
        &self.runsc
    }

    /// The `runsc` that a launch would run: the configured path, or the first executable of
    /// that name in the host's `PATH`; `None` when there is none (`tether check` reports it).
    #[must_use]
    pub fn installed_runsc(&self) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt as _;
        let executable = |p: &std::path::Path| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        };
        if self.runsc.components().count() != 1 || self.runsc.is_absolute() {
            return (self.runsc.is_absolute() && executable(&self.runsc))
                .then(|| self.runsc.clone());
        }
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|dir| dir.join(&self.runsc))
            .find(|candidate| candidate.is_absolute() && executable(candidate))
    }

    /// An operator-supplied root file system directory (mounted read-only) instead of one
    /// assembled from the binary's ELF dependencies. runsc creates missing mount points in it.
    #[must_use]
    pub fn rootfs(mut self, dir: impl Into<PathBuf>) -> Self {
        self.rootfs = Some(dir.into());
        self
    }

    /// runsc's state directory (`runsc --root`), private to the host (`0700`). Default: a
    /// `tether-runsc` directory in the private-directory base.
    #[must_use]
    pub fn state_root(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_root = Some(dir.into());
        self
    }

    /// A memory limit in MiB for the whole sandbox (`linux.resources.memory.limit`: the
    /// sandbox's memory cgroup, which runsc then creates and removes; a plugin going past it is
    /// stopped by the kernel's OOM killer). Setting it lets runsc manage cgroups, as
    /// [`manage_cgroups`](Self::manage_cgroups) does.
    #[must_use]
    pub fn memory_mib(mut self, mib: u64) -> Self {
        self.memory_mib = Some(mib);
        self
    }

    /// A CPU limit in thousandths of a CPU (`linux.resources.cpu`: a CFS quota per 100 ms on
    /// the sandbox's cgroup); like [`memory_mib`](Self::memory_mib), it lets runsc manage
    /// cgroups.
    #[must_use]
    pub fn cpu_millis(mut self, millis: u64) -> Self {
        self.cpu_millis = Some(millis);
        self
    }

    /// Lets runsc configure cgroups (drops `--ignore-cgroups`) even without a memory or CPU
    /// limit. Off by default: with no limit to apply, making and removing a cgroup per
    /// launch is work for nothing. runsc uses the v1 hierarchies where the host has them (as
    /// on hybrid v1 + v2 hosts) and needs root to write them.
    #[must_use]
    pub fn manage_cgroups(mut self, on: bool) -> Self {
        self.ignore_cgroups = !on;
        self
    }

    /// Whether runsc configures cgroups: asked for, or needed by a memory or CPU limit.
    pub(crate) fn cgroups_managed(&self) -> bool {
        !self.ignore_cgroups || self.memory_mib.is_some() || self.cpu_millis.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_runsc_is_not_found_and_a_present_program_is() {
        let missing = |p: &str| GvisorOptions::new().runsc(p).installed_runsc();
        assert!(missing("/nonexistent/runsc").is_none());
        assert!(missing("surely-no-such-runsc-here").is_none());
        assert!(missing("sh").is_some_and(|p| p.is_absolute()));
    }

    #[test]
    fn a_memory_or_cpu_limit_lets_runsc_manage_cgroups_and_none_leaves_them_alone() {
        assert!(!GvisorOptions::new().cgroups_managed());
        assert!(GvisorOptions::new().memory_mib(64).cgroups_managed());
        assert!(GvisorOptions::new().cpu_millis(500).cgroups_managed());
        assert!(GvisorOptions::new().manage_cgroups(true).cgroups_managed());
    }
}
