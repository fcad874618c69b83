//! Support code for tether's integration tests and the misbehaving plugins in `src/bin/`.
//!
//! - [`bins`]: the workspace's programs (example hosts and plugins, `tether`, benchmark
//!   drivers), found in the target directory.
//! - [`example_host`]: drive the example hosts (KV, counter) as a user would.
//! - [`procs`]: find processes a test left behind.
//! - [`leftovers`]: what a killed host or plugin left behind, and the events to kill it at.
//! - [`cgroups`]: whether plugins must get pids cgroups here, and reading one.
//! - [`cluster`]: the Kubernetes test cluster (`tests/k8s/cluster.sh`) and a namespace per test.
//! - [`peers`]: locate (and build, once) the Go go-plugin interop peers.
//! - [`gvisor`]: check for `runsc` (the gVisor runner's tests), list a state root's containers.
//! - [`kubelet`]: a stand-in kubelet that runs the Pod runner's Pods as local processes.
//! - [`pods`]: the Pod runner's test world (cluster, namespace, stand-in kubelet, images).
//! - [`python`]: check for the Python interop peer (the SDK in `sdk-python/`).
//! - [`typescript`]: check for Node and build the TypeScript interop peer (`sdk-typescript/`).
//! - [`sdk_plugin`]: what every other language's SDK plugins must do, checked the same way.
//! - [`guides`]: the guides' code blocks (`docs/*.md`), scratch projects and checked shell runs.
//! - [`world`]: a throw-away catalog, secret source and broker directories.
//! - [`misbehave`]: small pieces the misbehaving plugins share.
//! - [`otel`]: the real telemetry receivers (an OpenTelemetry Collector, `promcheck`).
//! - [`promcheck`]: a Prometheus exposition read by `promcheck`: lint problems and samples.
//! - [`escape`]: escape attempts the probe plugin makes from inside its confinement.
//! - [`shared_world`]: escape attempts through what a plugin shares with its host (issue 22).
//! - [`loosening`]: a set-uid file, device node or file capability left in a writable directory.
//! - [`host_user`]: run a test as root and again as an unprivileged user.
//! - [`hostile_text`]: terminal escapes a hostile plugin sends, and what a terminal may show.
//! - [`terminal`]: run a program on a real pseudo-terminal and read what it showed.

pub mod bins;
pub mod cgroups;
pub mod cluster;
pub mod escape;
pub mod example_host;
pub mod guides;
pub mod gvisor;
pub mod host_user;
pub mod hostile_text;
pub mod kubelet;
pub mod lease;
pub mod leftovers;
pub mod loosening;
pub mod misbehave;
pub mod otel;
pub mod output;
pub mod peers;
pub mod pods;
pub mod procs;
pub mod promcheck;
pub mod python;
pub mod sdk_plugin;
pub mod shared_world;
pub mod terminal;
pub mod typescript;
pub mod world;
