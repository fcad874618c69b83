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
//!   says otherwise.
//!
//! # Timeouts and limits
//! Every one is a named constant with a builder override: [`DEFAULT_START_TIMEOUT`],
//! [`DEFAULT_CONNECT_TIMEOUT`], [`DEFAULT_HEALTH_TIMEOUT`], [`DEFAULT_SHUTDOWN_RPC_TIMEOUT`],
//! [`DEFAULT_SHUTDOWN_GRACE`], [`DEFAULT_TERMINATE_GRACE`], [`DEFAULT_MAX_STRAY_LINES`],
//! [`DEFAULT_MAX_STRAY_BYTES`], [`DEFAULT_STDERR_TAIL_LEN`]; fixed ones are
//! [`KILL_REAP_TIMEOUT`], [`MAX_QUOTED_STDOUT`], [`MAX_LOG_LINE_LEN`],
//! [`MAX_SOCKET_PATH_LEN`], [`SOCKET_NAME_RESERVE`], [`MAX_RUNTIME_DIR_LEN`] and
//! [`tether_proto::handshake::MAX_LINE_LEN`].
//!
//! # Not yet
//! The gRPC broker (callbacks, `GRPCBroker.StartStream`), multiplexing, structured (hclog)
//! parsing of plugin logs, reattaching to a running plugin and sandboxing.

mod client;
mod config;
mod connect;
mod error;
mod handshake_reader;
mod health;
mod launch;
mod output;
mod plugin_log;
mod process;
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
pub use tether_transport::{
    BrokerConfig, BrokerError, DEFAULT_BROKER_CONNECT_TIMEOUT, DEFAULT_DIAL_TIMEOUT,
    DEFAULT_STOP_GRACE, DEFAULT_UNCLAIMED_TTL, GrpcBroker, MAX_UNCLAIMED, Served,
};
