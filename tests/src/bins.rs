//! The workspace's own programs (the example hosts and plugins, `tether`, the benchmark
//! drivers), as built by cargo in the target directory these tests run from.
//!
//! The tests launch the real binaries of the packages that own them instead of compiling those
//! packages' sources a second time. A test executable lives in `target/<profile>/deps/`, so the
//! binaries are in its parent directory. `cargo test --workspace` builds them first: each of
//! their packages has an integration test of its own, and cargo builds a package's binaries
//! for `cargo test` when it has one.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One workspace binary.
#[derive(Debug)]
pub struct Bin {
    name: &'static str,
    package: &'static str,
    path: OnceLock<String>,
}

/// `kv-plugin` (tether-examples): go-plugin's `examples/grpc` plugin.
pub static KV_PLUGIN: Bin = Bin::new("kv-plugin", "tether-examples");
/// `kv-host` (tether-examples): go-plugin's `examples/grpc` host.
pub static KV_HOST: Bin = Bin::new("kv-host", "tether-examples");
/// `counter-plugin` (tether-examples): go-plugin's `examples/bidirectional` plugin.
pub static COUNTER_PLUGIN: Bin = Bin::new("counter-plugin", "tether-examples");
/// `counter-host` (tether-examples): go-plugin's `examples/bidirectional` host.
pub static COUNTER_HOST: Bin = Bin::new("counter-host", "tether-examples");
/// `agent-demo` (tether-examples): the agent demo, both the agent and its Rust steps.
pub static AGENT_DEMO: Bin = Bin::new("agent-demo", "tether-examples");
/// `tether` (tether-cli).
pub static TETHER: Bin = Bin::new("tether", "tether-cli");
/// `kv-bench` (tether-bench): the KV benchmark driver.
pub static KV_BENCH: Bin = Bin::new("kv-bench", "tether-bench");
/// `counter-bench` (tether-bench): the callback benchmark driver.
pub static COUNTER_BENCH: Bin = Bin::new("counter-bench", "tether-bench");
/// `pingpong` (tether-bench): the raw unix-socket floor.
pub static PINGPONG: Bin = Bin::new("pingpong", "tether-bench");
/// `tether-pod-shim` (tether-pod-shim): a plugin container's first process under the Pod runner.
pub static POD_SHIM: Bin = Bin::new("tether-pod-shim", "tether-pod-shim");

impl Bin {
    const fn new(name: &'static str, package: &'static str) -> Self {
        Self {
            name,
            package,
            path: OnceLock::new(),
        }
    }

    /// The binary's path, next to the running test executable's directory.
    ///
    /// # Panics
    /// When it is not built, with the command that builds it.
    pub fn path(&self) -> &str {
        self.path.get_or_init(|| {
            let exe = std::env::current_exe().expect("the test executable's path");
            let path = target_dir(&exe).join(self.name);
            assert!(
                path.is_file(),
                "{} is not built: {} does not exist; build it with `cargo build -p {} --bin {}` (`cargo test --workspace` builds it)",
                self.name,
                path.display(),
                self.package,
                self.name
            );
            if let Some(newer) = newer_source(&path, self.package) {
                panic!(
                    "{} is older than {}: run `cargo build --workspace --bins` (or `cargo test --workspace`, which builds it) so the tests do not run a stale binary",
                    path.display(),
                    newer.display()
                );
            }
            path.into_os_string()
                .into_string()
                .expect("the target directory's path is UTF-8")
        })
    }
}

/// The workspace folders whose sources go into `package`'s binaries (the package and the
/// workspace crates it depends on, directly or not). Kept by hand: a missing folder only makes
/// the staleness check miss a case, an extra one makes it ask for a rebuild cargo would skip.
fn source_dirs(package: &str) -> &'static [&'static str] {
    const LIBRARY: [&str; 4] = ["proto", "transport", "broker", "sdk-rust"];
    match package {
        "tether-examples" => &[
            "examples", "agent", LIBRARY[0], LIBRARY[1], LIBRARY[2], LIBRARY[3],
        ],
        "tether-cli" => &[
            "cli", "agent", LIBRARY[0], LIBRARY[1], LIBRARY[2], LIBRARY[3],
        ],
        "tether-bench" => &[
            "bench", "examples", LIBRARY[0], LIBRARY[1], LIBRARY[2], LIBRARY[3],
        ],
        "tether-pod-shim" => &["sdk-rust/pod-shim", LIBRARY[0]],
        _ => &[],
    }
}

/// A source file of `package` (or of a workspace crate it depends on) modified after `binary`
/// was built, if any: `cargo test -p tether-tests` alone does not rebuild other packages'
/// binaries. Sources of crates the binary does not depend on are not looked at, since cargo
/// does not relink a binary for them.
fn newer_source(binary: &Path, package: &str) -> Option<PathBuf> {
    let built = std::fs::metadata(binary).and_then(|m| m.modified()).ok()?;
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    let mut dirs: Vec<PathBuf> = source_dirs(package)
        .iter()
        .map(|d| workspace.join(d).join("src"))
        .collect();
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                dirs.push(path);
            } else if path.extension() == Some(OsStr::new("rs"))
                && entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|m| m > built)
            {
                return Some(path);
            }
        }
    }
    None
}

/// `target/<profile>/` for a test executable in `target/<profile>/deps/` (or, for a binary
/// run directly, its own directory).
fn target_dir(exe: &Path) -> PathBuf {
    let dir = exe.parent().unwrap_or(Path::new("."));
    if dir.file_name() == Some(OsStr::new("deps")) {
        dir.parent().unwrap_or(dir).to_owned()
    } else {
        dir.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binaries_are_looked_for_in_the_profile_directory_above_deps() {
        assert_eq!(
            target_dir(Path::new("/t/target/debug/deps/cli-1234")),
            Path::new("/t/target/debug")
        );
        assert_eq!(
            target_dir(Path::new("/t/target/release/tether-bench")),
            Path::new("/t/target/release")
        );
    }

    #[test]
    #[should_panic(expected = "cargo build -p tether-nothing --bin no-such-binary")]
    fn a_missing_binary_names_the_command_that_builds_it() {
        let _ = Bin::new("no-such-binary", "tether-nothing").path();
    }
}
