//! The Python interop peer: `python3` with grpcio, grpcio-health-checking, grpcio-reflection,
//! protobuf and cryptography, running plugins written with `sdk-python/`.
//!
//! When Python or a package is missing, tests print why and skip — unless
//! `TETHER_REQUIRE_PEERS=1` (CI sets it), in which case they fail. Install the packages with
//! `pip install -r sdk-python/requirements-dev.txt`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::example_host::Contract;
use crate::peers::{or_skip, repo_root};
use crate::sdk_plugin::{self, SdkPeer};

/// The interpreter the tests run (found on `PATH`, which tether hosts pass to plugins).
pub const PYTHON: &str = "python3";

/// What the Python SDK needs at run time, as one import statement.
/// Then prints the real interpreter and its prefixes, one per line.
const IMPORT_CHECK: &str = "import grpc, grpc_health.v1.health, grpc_reflection.v1alpha.reflection, \
     google.protobuf, cryptography, os, sys; sys.path.insert(0, sys.argv[1]); import tether_plugin; \
     print(os.path.realpath(sys.executable)); print(sys.base_prefix); print(sys.prefix)";

/// A usable Python with the SDK's dependencies.
#[derive(Debug, Clone)]
pub struct PythonPeer {
    /// `sdk-python/examples/kv_plugin.py`, the Python KV plugin.
    pub kv_plugin: PathBuf,
    /// The real interpreter behind `python3` (not a pyenv shim).
    pub interpreter: PathBuf,
    /// Its installation prefixes (`sys.base_prefix`, `sys.prefix`): the standard library and
    /// site-packages, which a confined plugin must be allowed to read and execute.
    pub prefixes: Vec<PathBuf>,
    /// `sdk-python/`: the example plugins and the SDK they import, read by the plugin.
    pub sdk: PathBuf,
}

impl PythonPeer {
    /// The KV plugin as a command line for `KV_PLUGIN` (`/path/python3 /path/kv_plugin.py`).
    #[must_use]
    pub fn kv_plugin_command(&self) -> String {
        self.plugin_command(Contract::Kv, None)
    }

    /// `kv-host` options that let its confined plugin use this interpreter and the SDK.
    #[must_use]
    pub fn kv_host_sandbox_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        for prefix in &self.prefixes {
            args.push("--allow-exec".to_owned());
            args.push(prefix.to_string_lossy().into_owned());
        }
        args.push("--allow-read".to_owned());
        args.push(self.sdk.to_string_lossy().into_owned());
        args
    }

    /// The same allowances for a host built with the library.
    pub fn allow<H>(
        &self,
        mut builder: tether_broker::PluginClientBuilder<H>,
    ) -> tether_broker::PluginClientBuilder<H> {
        for prefix in &self.prefixes {
            builder = builder.sandbox_allow_exec(prefix);
        }
        builder.sandbox_allow_read(&self.sdk)
    }
}

impl SdkPeer for PythonPeer {
    fn plugin_command(&self, contract: Contract, tmpdir: Option<&Path>) -> String {
        let script = match contract {
            Contract::Kv => self.kv_plugin.clone(),
            Contract::Counter => self.sdk.join("examples/counter_plugin.py"),
        };
        sdk_plugin::command_line(&self.interpreter, &script, tmpdir)
    }

    fn tether_host_options(&self) -> Vec<String> {
        self.kv_host_sandbox_args()
    }
}

/// Checks (once per process) that Python and the SDK's dependencies are importable.
///
/// # Errors
/// What is missing, to print when skipping.
pub fn python() -> Result<PythonPeer, String> {
    static PEER: OnceLock<Result<PythonPeer, String>> = OnceLock::new();
    PEER.get_or_init(check).clone()
}

/// Like [`python`], but when Python is unusable: see [`or_skip`].
#[must_use]
pub fn python_or_skip(test: &str) -> Option<PythonPeer> {
    or_skip(python(), "the Python peer", test)
}

fn check() -> Result<PythonPeer, String> {
    let sdk = repo_root().join("sdk-python");
    let output = Command::new(PYTHON)
        .arg("-c")
        .arg(IMPORT_CHECK)
        .arg(sdk.join("src"))
        .output()
        .map_err(|e| format!("cannot run {PYTHON}: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.trim().lines().last().unwrap_or_default();
        return Err(format!(
            "{PYTHON} cannot import the SDK's dependencies ({last}); run: pip install -r sdk-python/requirements-dev.txt"
        ));
    }
    let kv_plugin = sdk.join("examples/kv_plugin.py");
    if !kv_plugin.is_file() {
        return Err(format!("{} is missing", kv_plugin.display()));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines().map(PathBuf::from);
    let interpreter = lines
        .next()
        .ok_or_else(|| format!("{PYTHON} did not print its executable"))?;
    let mut prefixes: Vec<PathBuf> = Vec::new();
    for prefix in lines {
        if !prefixes.contains(&prefix) {
            prefixes.push(prefix);
        }
    }
    let sdk = sdk
        .canonicalize()
        .map_err(|e| format!("{}: {e}", sdk.display()))?;
    Ok(PythonPeer {
        kv_plugin: sdk.join("examples/kv_plugin.py"),
        interpreter,
        prefixes,
        sdk,
    })
}
