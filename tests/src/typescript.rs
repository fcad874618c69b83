//! The TypeScript interop peer: Node (≥ 20) running plugins written with `sdk-typescript/`
//! (grpc-js), compiled once per test process with the package's own `npm run build`.
//!
//! When Node, npm or the package's dependencies are missing, tests print why and skip —
//! unless `TETHER_REQUIRE_PEERS=1` (CI sets it), in which case they fail. Install the
//! dependencies with `npm ci` in `sdk-typescript/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::example_host::Contract;
use crate::peers::{or_skip, repo_root};
use crate::sdk_plugin::{self, SdkPeer};

/// The interpreter the tests run (found on `PATH`).
pub const NODE: &str = "node";

/// Oldest Node major version the SDK supports (`engines` in its `package.json`).
pub const MIN_NODE_MAJOR: u32 = 20;

/// A usable Node with the SDK built.
#[derive(Debug, Clone)]
pub struct NodePeer {
    /// The real `node` executable (symlinks resolved).
    pub node: PathBuf,
    /// Node's installation prefix (the executable's `bin/`'s parent).
    pub prefix: PathBuf,
    /// `sdk-typescript/`: the compiled examples, the SDK and its `node_modules`.
    pub sdk: PathBuf,
}

impl NodePeer {
    /// `sdk-typescript/dist/examples/<name>.js`.
    #[must_use]
    pub fn example(&self, name: &str) -> PathBuf {
        self.sdk.join("dist/examples").join(format!("{name}.js"))
    }

    /// An example plugin as a command line for `KV_PLUGIN` / `COUNTER_PLUGIN`
    /// (`/usr/bin/node /…/dist/examples/kv.js`).
    #[must_use]
    pub fn command(&self, example: &str) -> String {
        sdk_plugin::command_line(&self.node, &self.example(example), None)
    }

    /// A library host for an example, run as tether runs Node plugins: the `node` runtime
    /// ([`Runtime::Node`](tether_broker::Runtime::Node)) asks Node for its real executable and
    /// module directories and allows exactly those, OpenSSL's configuration and the script's
    /// project (`sdk-typescript/`) — no hand-written sandbox allowances.
    pub fn builder(&self, example: &str) -> tether_broker::PluginClientBuilder {
        tether_broker::PluginClient::builder(&self.node)
            .args([self.example(example)])
            .runtime(tether_broker::Runtime::Node)
    }
}

impl SdkPeer for NodePeer {
    fn plugin_command(&self, contract: Contract, tmpdir: Option<&Path>) -> String {
        let example = match contract {
            Contract::Kv => "kv",
            Contract::Counter => "counter",
        };
        sdk_plugin::command_line(&self.node, &self.example(example), tmpdir)
    }

    /// None: the example hosts resolve the `node` runtime by themselves (`Runtime::Auto`, the
    /// program is `node`).
    fn tether_host_options(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Checks Node and builds the SDK (once per process).
///
/// # Errors
/// What is missing or what failed, to print when skipping.
pub fn node() -> Result<NodePeer, String> {
    static PEER: OnceLock<Result<NodePeer, String>> = OnceLock::new();
    PEER.get_or_init(check).clone()
}

/// Like [`node`], but when the peer is unusable: see [`or_skip`].
#[must_use]
pub fn node_or_skip(test: &str) -> Option<NodePeer> {
    or_skip(node(), "the TypeScript peer", test)
}

fn check() -> Result<NodePeer, String> {
    let output = Command::new(NODE)
        .args(["-p", "process.versions.node + '\\n' + process.execPath"])
        .output()
        .map_err(|e| format!("cannot run {NODE}: {e}"))?;
    if !output.status.success() {
        return Err(format!("{NODE} -p failed: {}", output.status));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines();
    let version = lines.next().unwrap_or_default().to_owned();
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .ok_or_else(|| format!("{NODE} printed no version ({stdout:?})"))?;
    if major < MIN_NODE_MAJOR {
        return Err(format!(
            "{NODE} is {version}; the SDK needs Node {MIN_NODE_MAJOR} or newer"
        ));
    }
    let exec_path = PathBuf::from(lines.next().unwrap_or_default());
    let node = exec_path
        .canonicalize()
        .map_err(|e| format!("{}: {e}", exec_path.display()))?;
    let prefix = node
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("{} has no installation prefix", node.display()))?
        .to_owned();

    let sdk = repo_root().join("sdk-typescript");
    let sdk = sdk
        .canonicalize()
        .map_err(|e| format!("{}: {e}", sdk.display()))?;
    if !sdk.join("node_modules/@grpc/grpc-js").is_dir() {
        return Err(format!(
            "the SDK's dependencies are not installed; run: (cd {} && npm ci)",
            sdk.display()
        ));
    }
    // Compiles the SDK and its examples, so the tests never run stale JavaScript.
    let build = Command::new("npm")
        .args(["run", "--silent", "build"])
        .current_dir(&sdk)
        .output()
        .map_err(|e| format!("cannot run npm: {e}"))?;
    if !build.status.success() {
        return Err(format!(
            "npm run build failed in {}: {}{}",
            sdk.display(),
            String::from_utf8_lossy(&build.stdout),
            String::from_utf8_lossy(&build.stderr)
        ));
    }
    Ok(NodePeer { node, prefix, sdk })
}
