//! tether's host library: launch go-plugin-compatible plugins and talk gRPC to them over
//! AutoMTLS.
//!
//! A [`PluginClient`] is one running plugin. [`PluginClient::builder`] configures the launch;
//! [`start`](PluginClientBuilder::start) spawns the plugin in its own process group with an
//! almost empty environment, reads its handshake line, connects to the announced unix socket
//! (or loopback TCP address) with mutual TLS pinned to throw-away certificates, checks its gRPC
//! health and hands out a [`tonic::transport::Channel`] for any generated client.
//! [`shutdown`](PluginClient::shutdown) ends it gracefully and cleans up; dropping it ends it
//! too.
//!
//! # Example
//!
//! A host for go-plugin's `examples/grpc` KV plugin (any generated tonic client works the same
//! way; `kv` stands for the generated code):
//!
//! ```no_run
//! # mod kv {
//! #     pub mod kv_client {
//! #         pub struct KvClient<T>(T);
//! #         impl<T> KvClient<T> {
//! #             pub fn new(inner: T) -> Self { Self(inner) }
//! #             pub async fn put(&mut self, _: super::PutRequest) -> Result<(), tonic::Status> { Ok(()) }
//! #             pub async fn get(&mut self, _: super::GetRequest) -> Result<tonic::Response<super::GetResponse>, tonic::Status> { unimplemented!() }
//! #         }
//! #     }
//! #     pub struct PutRequest { pub key: String, pub value: Vec<u8> }
//! #     pub struct GetRequest { pub key: String }
//! #     pub struct GetResponse { pub value: Vec<u8> }
//! # }
//! use tether_broker::{HandshakeConfig, PluginClient};
//! use kv::kv_client::KvClient;
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // Spawn → handshake → connect (AutoMTLS) → health check.
//!     let plugin = PluginClient::builder("/usr/libexec/kv-plugin")
//!         .args(["--verbose"])
//!         .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
//!         .start()
//!         .await?;
//!     println!(
//!         "plugin pid {} speaks v{} at {} (cert {})",
//!         plugin.pid(),
//!         plugin.app_version(),
//!         plugin.address(),
//!         plugin.peer_fingerprint().unwrap_or("none: plaintext"),
//!     );
//!
//!     let mut kv = KvClient::new(plugin.channel());
//!     kv.put(kv::PutRequest { key: "a".into(), value: b"1".to_vec() }).await?;
//!     let value = kv.get(kv::GetRequest { key: "a".into() }).await?.into_inner().value;
//!     assert_eq!(value, b"1");
//!
//!     // GRPCController.Shutdown → grace → SIGTERM → grace → SIGKILL; reaped, cleaned up.
//!     let outcome = plugin.shutdown().await?;
//!     println!("plugin {outcome}");
//!     Ok(())
//! }
//! ```
//!
//! # A catalog, started lazily
//! A [`Catalog`] loads one TOML [`Manifest`] per plugin from a directory (bad manifests are
//! reported with file, line and key, and do not stop the others). A [`Broker`] built from it,
//! with [`Grants`] and a [`SecretSource`] ([`DirSecretSource`], [`EnvSecretSource`],
//! [`MemorySecretSource`]), starts a plugin on its first [`acquire`](Broker::acquire) (one
//! process however many callers ask at once), stops it after its idle timeout, kills it when
//! health checks find it hung, fails calls in flight fast when it crashes
//! ([`Lease::call`] → [`UseError::Crashed`]) and restarts it with exponential backoff up to
//! the manifest's limit ([`UseError::KeepsCrashing`]). A plugin whose manifest requests a
//! secret or config file that is not granted does not start ([`UseError::NotGranted`]).
//!
//! # What the plugin gets
//! - An environment with only [`DEFAULT_ENV_ALLOWLIST`], the names allowed with
//!   [`env_allow`](PluginClientBuilder::env_allow), variables set with
//!   [`env`](PluginClientBuilder::env), and the protocol's: the magic cookie,
//!   `PLUGIN_PROTOCOL_VERSIONS`, `PLUGIN_CLIENT_CERT` (unless plaintext), `PLUGIN_MIN_PORT`,
//!   `PLUGIN_MAX_PORT`, and `PLUGIN_UNIX_SOCKET_DIR` and `TMPDIR`, both set to a private
//!   per-launch directory (mode `0700`, removed at the end) where go-plugin plugins of every
//!   version create their socket. `PLUGIN_MULTIPLEX_GRPC` is never set.
//! - stdin from `/dev/null`; stdout and stderr are read continuously (logged with `tracing`,
//!   the plugin's name as the `plugin` field) so the plugin never blocks on them.
//! - The host's working directory unless [`current_dir`](PluginClientBuilder::current_dir)
//!   says otherwise (a [`Broker`] gives each plugin `state/<name>`).
//! - Its granted secrets and config files (see [`Delivery`]) as `0400` files in a `0700`
//!   directory on tmpfs, announced in `TETHER_SECRETS_DIR` / `TETHER_CONFIG_DIR`, removed as
//!   soon as it exits.
//!
//! # Confinement
//! Applied between fork and exec, so it works for plugins in any language
//! ([`PluginClientBuilder::sandbox`], default [`SandboxMode::Enforce`]): descriptors above
//! stderr closed at exec; an empty capability bounding set; `no_new_privs`; a Landlock domain
//! allowing only [`SYSTEM_EXEC_PATHS`], [`SYSTEM_READ_PATHS`], [`DEVICE_RW_PATHS`], the
//! binary's directory (read/execute), its secrets/config (read), its private and working
//! directories (read/write); [`Limits`] as rlimits and core dumps off; `PR_SET_PDEATHSIG` and a
//! janitor process on a lifeline pipe that kills the plugin's process group and removes its
//! directories if the host dies, even by `SIGKILL`. With
//! [`sha256`](PluginClientBuilder::sha256) the binary is verified through an open descriptor
//! and that same file executed ([`IntegrityError`]).
//!
//! Caveat: `PR_SET_PDEATHSIG` fires when the *thread* that started the plugin exits, not only
//! the host process: start plugins from long-lived threads (tokio's worker threads and the
//! thread of `#[tokio::main]` are), or a plugin started from a short-lived thread is killed
//! when that thread ends.
//!
//! # Reattach
//! [`ReattachedPlugin::connect`] connects to an already-running plugin from go-plugin's JSON
//! [`ReattachConfig`] (unix or loopback TCP, mutual TLS when [`ReattachTls`] is given). Its pid
//! is signalled only if it was verified to hold the plugin's listening socket, and then only
//! through a pidfd.
//!
//! # Timeouts and limits
//! Every one is a named constant with a builder override: [`DEFAULT_START_TIMEOUT`],
//! [`DEFAULT_CONNECT_TIMEOUT`], [`DEFAULT_HEALTH_TIMEOUT`], [`DEFAULT_SHUTDOWN_RPC_TIMEOUT`],
//! [`DEFAULT_SHUTDOWN_GRACE`], [`DEFAULT_TERMINATE_GRACE`], [`DEFAULT_MAX_STRAY_LINES`],
//! [`DEFAULT_MAX_STRAY_BYTES`], [`DEFAULT_STDERR_TAIL_LEN`], [`DEFAULT_HEALTH_INTERVAL`],
//! [`DEFAULT_HUNG_TIMEOUT`], and per manifest [`DEFAULT_IDLE_TIMEOUT`],
//! [`DEFAULT_MAX_RESTARTS`], [`DEFAULT_INITIAL_BACKOFF`], [`DEFAULT_MAX_BACKOFF`],
//! [`DEFAULT_RESTART_WINDOW`]; fixed ones are [`CRASH_SETTLE_TIMEOUT`], [`CRASH_STDERR_TIMEOUT`], [`MAX_VALUE_LEN`],
//! [`MAX_NAME_LEN`],
//! [`KILL_REAP_TIMEOUT`], [`MAX_QUOTED_STDOUT`], [`MAX_LOG_LINE_LEN`],
//! [`MAX_SOCKET_PATH_LEN`], [`SOCKET_NAME_RESERVE`], [`MAX_RUNTIME_DIR_LEN`] and
//! [`tether_proto::handshake::MAX_LINE_LEN`].
//!
//! # Not yet
//! The gRPC broker (callbacks, `GRPCBroker.StartStream`), multiplexing, structured (hclog)
//! parsing of plugin logs, and Landlock network rules.

mod broker;
mod catalog;
mod client;
mod config;
mod connect;
mod delivery;
mod error;
mod grants;
mod handshake_reader;
mod health;
mod integrity;
mod launch;
mod manifest;
mod output;
mod process;
mod reattach;
mod sandbox;
mod secrets;
mod shutdown;
mod stdio;

pub use client::PluginClient;
pub use config::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_ENV_ALLOWLIST, DEFAULT_HEALTH_TIMEOUT,
    DEFAULT_MAX_STRAY_BYTES, DEFAULT_MAX_STRAY_LINES, DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_SHUTDOWN_RPC_TIMEOUT, DEFAULT_START_TIMEOUT, DEFAULT_STDERR_TAIL_LEN,
    DEFAULT_TERMINATE_GRACE, HandshakeConfig, KILL_REAP_TIMEOUT, MAX_LOG_LINE_LEN,
    MAX_QUOTED_STDOUT, MAX_RUNTIME_DIR_LEN, MAX_SOCKET_PATH_LEN, NoHandshake, PluginClientBuilder,
    SOCKET_NAME_RESERVE,
};
pub use error::{
    AddressProblem, BoxError, Incompatibility, OutputLimit, Phase, PluginOutput, ShutdownError,
    ShutdownOutcome, StartError,
};
pub use tether_proto::handshake::Address;

pub use broker::{
    Broker, BrokerBuilder, CRASH_SETTLE_TIMEOUT, CRASH_STDERR_TIMEOUT, DEFAULT_HEALTH_INTERVAL,
    DEFAULT_HUNG_TIMEOUT, Lease, UseError,
};
pub use catalog::Catalog;
pub use delivery::{Delivery, delivery_base};
pub use grants::{Grants, NotGranted};
pub use integrity::{IntegrityError, sha256_file};
pub use manifest::{
    DEFAULT_IDLE_TIMEOUT, DEFAULT_INITIAL_BACKOFF, DEFAULT_MAX_BACKOFF, DEFAULT_MAX_RESTARTS,
    DEFAULT_RESTART_WINDOW, MAX_NAME_LEN, Manifest, ManifestError, RestartPolicy,
};
pub use reattach::{
    ReattachAddr, ReattachConfig, ReattachError, ReattachTls, ReattachedOutcome, ReattachedPlugin,
};
pub use sandbox::{
    DEVICE_RW_PATHS, Limits, SYSTEM_EXEC_PATHS, SYSTEM_READ_PATHS, SandboxError, SandboxMode,
    TARGET_LANDLOCK_ABI, kernel_landlock_abi,
};
pub use secrecy::SecretSlice;
pub use secrets::{
    DirSecretSource, EnvSecretSource, MAX_VALUE_LEN, MemorySecretSource, SecretSource,
};
