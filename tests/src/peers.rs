//! The Go go-plugin interop peers, built once per test process by `tests/go/build.sh`.
//!
//! When a toolchain is missing the peers cannot be built: tests then print why and skip —
//! unless `TETHER_REQUIRE_PEERS=1` (CI sets it), in which case they fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::procs::target_profile_dir;

/// Environment variable that turns a missing interop peer into a test failure.
pub const REQUIRE_PEERS_ENV: &str = "TETHER_REQUIRE_PEERS";

/// Which go-plugin a Go peer is built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoPlugin {
    /// The newest go-plugin (v1.8.x), as a Go module, with the machine's Go.
    V18,
    /// Debian's go-plugin 1.0.1, GOPATH mode, Debian's Go 1.19.
    V101,
}

impl GoPlugin {
    /// The suffix `tests/go/build.sh` gives this variant's binaries.
    #[must_use]
    pub fn suffix(self) -> &'static str {
        match self {
            Self::V18 => "v18",
            Self::V101 => "v101",
        }
    }
}

/// Paths of one variant's Go binaries.
#[derive(Debug, Clone)]
pub struct GoPeers {
    /// The go-plugin KV plugin.
    pub plugin: PathBuf,
    /// The go-plugin KV host.
    pub host: PathBuf,
    /// The go-plugin probe plugin (reports what it can reach; `tests/go/probeplugin`).
    pub probe: PathBuf,
    /// The go-plugin counter plugin (examples/bidirectional: calls back via the broker).
    pub counter_plugin: PathBuf,
    /// The go-plugin counter host.
    pub counter_host: PathBuf,
}

/// The repository root.
#[must_use]
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Whether missing peers must fail tests instead of skipping them.
#[must_use]
pub fn peers_required() -> bool {
    std::env::var(REQUIRE_PEERS_ENV).is_ok_and(|v| v == "1")
}

/// Builds (once per process) and returns the Go peers of `variant`, or why they are unavailable.
///
/// # Errors
/// A description of what is missing or what failed, to print when skipping.
pub fn go(variant: GoPlugin) -> Result<GoPeers, String> {
    static V18: OnceLock<Result<GoPeers, String>> = OnceLock::new();
    static V101: OnceLock<Result<GoPeers, String>> = OnceLock::new();
    let cell = match variant {
        GoPlugin::V18 => &V18,
        GoPlugin::V101 => &V101,
    };
    cell.get_or_init(|| build(variant)).clone()
}

/// Like [`go`], but when the peers are unavailable: see [`or_skip`].
#[must_use]
pub fn go_or_skip(variant: GoPlugin, test: &str) -> Option<GoPeers> {
    or_skip(go(variant), &format!("go-plugin {variant:?}"), test)
}

/// What `found` found; when `peer` is unavailable instead, panics if [`peers_required`], else
/// prints why and returns `None` (the caller returns early, skipping `test`).
#[must_use]
pub fn or_skip<T>(found: Result<T, String>, peer: &str, test: &str) -> Option<T> {
    match found {
        Ok(found) => Some(found),
        Err(why) if peers_required() => {
            panic!("{test}: {peer} is unavailable and {REQUIRE_PEERS_ENV}=1: {why}")
        }
        Err(why) => {
            eprintln!("SKIPPED {test}: {peer} is unavailable: {why}");
            None
        }
    }
}

fn build(variant: GoPlugin) -> Result<GoPeers, String> {
    let out = target_profile_dir()
        .parent()
        .map(|target| target.join("go-peers"))
        .ok_or("cannot locate the cargo target directory")?;
    let script = repo_root().join("tests/go/build.sh");
    if !writable(&out) {
        // An unprivileged run of the tests (`tether_tests::host_user`, CI's step "as an
        // unprivileged user") uses the peers its owner built.
        return built(&out, variant).map_err(|missing| {
            format!(
                "{missing}, and {} is not writable by this user: build the peers as its owner \
                 first (bash {} {})",
                out.display(),
                script.display(),
                out.display()
            )
        });
    }
    let output = Command::new("bash")
        .arg(&script)
        .arg(&out)
        .env("GO_INTEROP_VARIANTS", variant.suffix())
        .output()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            script.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    built(&out, variant)
}

/// Whether this user may write `dir` (or, when it does not exist yet, its parent).
fn writable(dir: &Path) -> bool {
    let existing = if dir.exists() {
        dir
    } else {
        dir.parent().unwrap_or(dir)
    };
    rustix::fs::access(existing, rustix::fs::Access::WRITE_OK).is_ok()
}

/// The peers of `variant` already in `out`, or which one is missing.
fn built(out: &Path, variant: GoPlugin) -> Result<GoPeers, String> {
    let peers = GoPeers {
        plugin: out.join(format!("kvplugin-{}", variant.suffix())),
        host: out.join(format!("kvhost-{}", variant.suffix())),
        probe: out.join(format!("probeplugin-{}", variant.suffix())),
        counter_plugin: out.join(format!("counterplugin-{}", variant.suffix())),
        counter_host: out.join(format!("counterhost-{}", variant.suffix())),
    };
    for bin in [
        &peers.plugin,
        &peers.host,
        &peers.probe,
        &peers.counter_plugin,
        &peers.counter_host,
    ] {
        if !bin.is_file() {
            return Err(format!("{} was not built", bin.display()));
        }
    }
    Ok(peers)
}
