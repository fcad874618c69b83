//! tether's host library: launch go-plugin-compatible plugins and talk gRPC to them over
//! AutoMTLS.
//!
//! A [`PluginClient`] is one running plugin. [`PluginClient::builder`] configures the launch;
//! [`start`](PluginClientBuilder::start) spawns the plugin in its own process group (and, where
//! the host can make one, its own pids cgroup: see [`ProcessLimit`](crate::confine::ProcessLimit)) with an almost empty
//! environment, reads its handshake line, connects to the announced unix socket
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
//! reported with file, line and key, and do not stop the others). A [`Supervisor`] built from it,
//! with [`Grants`] and a [`ValueSource`] ([`DirValueSource`], [`EnvValueSource`],
//! [`MemoryValueSource`]), starts a plugin on its first [`acquire`](Supervisor::acquire) (one
//! process however many callers ask at once), stops it after its idle timeout, kills it when
//! health checks find it hung or when its calls keep running out their deadline
//! ([`DEFAULT_RECYCLE_AFTER_DEADLINES`](crate::supervisor::DEFAULT_RECYCLE_AFTER_DEADLINES), [`UseErrorKind::DeadlineExceeded`](error::UseErrorKind::DeadlineExceeded)), fails calls in flight
//! fast when it crashes
//! ([`Lease::call`] → [`UseErrorKind::Crashed`](error::UseErrorKind::Crashed)) and restarts it with exponential backoff up to
//! the manifest's limit ([`UseErrorKind::KeepsCrashing`](error::UseErrorKind::KeepsCrashing)). A plugin whose manifest requests a
//! secret or config file that is not granted does not start ([`UseErrorKind::NotGranted`](error::UseErrorKind::NotGranted)).
//! [`Supervisor::upgrade`] replaces a running plugin with a new version without a failed call:
//! the new instance starts and passes its health check beside the old one, new leases get it,
//! the old one serves the leases taken before the switch up to
//! [`DEFAULT_UPGRADE_GRACE`](crate::supervisor::DEFAULT_UPGRADE_GRACE), and a new version that
//! does not start changes nothing ([`UpgradeError`](error::UpgradeError));
//! [`Supervisor::reload`] does it for every plugin of a catalog that changed.
//!
//! # What the plugin gets
//! - An environment with only [`DEFAULT_ENV_ALLOWLIST`](crate::launch::DEFAULT_ENV_ALLOWLIST), the names allowed with
//!   [`env_allow`](PluginClientBuilder::env_allow), variables set with
//!   [`env`](PluginClientBuilder::env), and the protocol's: the magic cookie,
//!   `PLUGIN_PROTOCOL_VERSIONS`, `PLUGIN_CLIENT_CERT` (unless plaintext), `PLUGIN_MIN_PORT`,
//!   `PLUGIN_MAX_PORT`, and `PLUGIN_UNIX_SOCKET_DIR` and `TMPDIR`, both set to a private
//!   per-launch directory (mode `0700`, removed at the end) where go-plugin plugins of every
//!   version create their socket. `PLUGIN_MULTIPLEX_GRPC=true` only when
//!   [`multiplex`](PluginClientBuilder::multiplex) asks for go-plugin's multiplexed broker.
//! - stdin from `/dev/null`; stdout, stderr and the `plugin.GRPCStdio` stream are read
//!   continuously (logged with `tracing`, see below) so the plugin never blocks on them.
//! - As working directory its private directory, unless
//!   [`current_dir`](PluginClientBuilder::current_dir) grants it another (a [`Supervisor`]
//!   gives each plugin `state/<name>`); never the host's working directory.
//! - Its granted secrets and config files (see [`Delivery`]) as `0400` files in a `0700`
//!   directory on tmpfs, announced in `TETHER_SECRETS_DIR` / `TETHER_CONFIG_DIR`, removed as
//!   soon as it exits.
//!
//! # Confinement
//! Applied between fork and exec, so it works for plugins in any language
//! ([`PluginClientBuilder::sandbox`], default [`SandboxMode::Enforce`]): a session of its own
//! without a controlling terminal; descriptors above
//! stderr closed at exec; an empty capability bounding set; `no_new_privs`; a Landlock domain
//! allowing only [`SYSTEM_EXEC_PATHS`](crate::confine::SYSTEM_EXEC_PATHS), [`SYSTEM_READ_PATHS`](crate::confine::SYSTEM_READ_PATHS), [`DEVICE_RW_PATHS`](crate::confine::DEVICE_RW_PATHS), the
//! binary's directory (read/execute), its secrets/config (read), its private and working
//! directories (read/write; the working directory only when one was set); [`Limits`] as rlimits and core dumps off; `PR_SET_PDEATHSIG` and
//! one janitor process per host (a `sh` started on the first launch, watching a lifeline
//! socket) that, if the host dies, even by `SIGKILL`, kills the process group and removes the
//! directories of every plugin the host had not yet ended. With
//! [`sha256`](PluginClientBuilder::sha256) the binary is verified through an open descriptor
//! and that same file executed ([`IntegrityError`](crate::confine::IntegrityError)).
//!
//! Independent of the sandbox mode: a seccomp filter
//! ([`PluginClientBuilder::seccomp`], default [`SeccompMode::Default`](crate::confine::SeccompMode::Default),
//! the profile and how it differs from Docker's in [`confine::seccomp`]); no network
//! ([`PluginClientBuilder::network`], default [`NetworkMode::None`](crate::confine::NetworkMode::None):
//! an empty network namespace or a filter on socket families, see [`confine::network`]); and,
//! on a root host, another user ([`PluginClientBuilder::run_as`]).
//!
//! Caveat: `PR_SET_PDEATHSIG` fires when the *thread* that started the plugin exits, not only
//! the host process: start plugins from long-lived threads (tokio's worker threads and the
//! thread of `#[tokio::main]` are), or a plugin started from a short-lived thread is killed
//! when that thread ends.
//!
//! # Reattach
//! [`ReattachedPlugin::connect`] connects to an already-running plugin from go-plugin's JSON
//! [`ReattachConfig`] (unix or loopback TCP, mutual TLS when [`ReattachTls`](crate::launch::ReattachTls) is given). Its pid
//! is signalled only if it was verified to hold the plugin's listening socket, and then only
//! through a pidfd.
//!
//! # Timeouts and limits
//! Every one is a named constant with a builder override: [`DEFAULT_START_TIMEOUT`](crate::launch::DEFAULT_START_TIMEOUT),
//! [`DEFAULT_AFTER_STRAY_TIMEOUT`](crate::launch::DEFAULT_AFTER_STRAY_TIMEOUT),
//! [`DEFAULT_CONNECT_TIMEOUT`](crate::launch::DEFAULT_CONNECT_TIMEOUT), [`DEFAULT_HEALTH_TIMEOUT`](crate::launch::DEFAULT_HEALTH_TIMEOUT), [`DEFAULT_SHUTDOWN_RPC_TIMEOUT`](crate::launch::DEFAULT_SHUTDOWN_RPC_TIMEOUT),
//! [`DEFAULT_SHUTDOWN_GRACE`](crate::launch::DEFAULT_SHUTDOWN_GRACE), [`DEFAULT_TERMINATE_GRACE`](crate::launch::DEFAULT_TERMINATE_GRACE), [`DEFAULT_MAX_STRAY_LINES`](crate::launch::DEFAULT_MAX_STRAY_LINES),
//! [`DEFAULT_MAX_STRAY_BYTES`](crate::launch::DEFAULT_MAX_STRAY_BYTES), [`DEFAULT_STDERR_TAIL_LEN`](crate::launch::DEFAULT_STDERR_TAIL_LEN), [`DEFAULT_HEALTH_INTERVAL`](crate::supervisor::DEFAULT_HEALTH_INTERVAL),
//! [`DEFAULT_HUNG_TIMEOUT`](crate::supervisor::DEFAULT_HUNG_TIMEOUT), and per manifest [`DEFAULT_IDLE_TIMEOUT`](crate::catalog::DEFAULT_IDLE_TIMEOUT),
//! [`DEFAULT_MAX_RESTARTS`](crate::catalog::DEFAULT_MAX_RESTARTS), [`DEFAULT_INITIAL_BACKOFF`](crate::catalog::DEFAULT_INITIAL_BACKOFF), [`DEFAULT_MAX_BACKOFF`](crate::catalog::DEFAULT_MAX_BACKOFF),
//! [`DEFAULT_RESTART_WINDOW`](crate::catalog::DEFAULT_RESTART_WINDOW); fixed ones are [`CRASH_SETTLE_TIMEOUT`](crate::supervisor::CRASH_SETTLE_TIMEOUT), [`CRASH_STDERR_TIMEOUT`](crate::supervisor::CRASH_STDERR_TIMEOUT), [`MAX_VALUE_LEN`](crate::catalog::MAX_VALUE_LEN),
//! [`MAX_NAME_LEN`](crate::catalog::MAX_NAME_LEN),
//! [`KILL_REAP_TIMEOUT`](crate::launch::KILL_REAP_TIMEOUT), [`MAX_QUOTED_STDOUT`](crate::launch::MAX_QUOTED_STDOUT), [`MAX_QUOTED_STRAY_LINE`](crate::launch::MAX_QUOTED_STRAY_LINE), [`MAX_LOG_LINE_LEN`](crate::launch::MAX_LOG_LINE_LEN),
//! [`MAX_SOCKET_PATH_LEN`](crate::launch::MAX_SOCKET_PATH_LEN), [`SOCKET_NAME_RESERVE`](crate::launch::SOCKET_NAME_RESERVE), [`MAX_PRIVATE_DIR_BASE_LEN`](crate::launch::MAX_PRIVATE_DIR_BASE_LEN) and
//! [`tether_proto::handshake::MAX_LINE_LEN`]. The broker's are in [`GrpcBrokerConfig`](crate::callbacks::GrpcBrokerConfig)
//! ([`DEFAULT_DIAL_TIMEOUT`](crate::callbacks::DEFAULT_DIAL_TIMEOUT), [`DEFAULT_UNCLAIMED_TTL`](crate::callbacks::DEFAULT_UNCLAIMED_TTL), [`DEFAULT_BROKER_CONNECT_TIMEOUT`](crate::callbacks::DEFAULT_BROKER_CONNECT_TIMEOUT),
//! [`DEFAULT_STOP_GRACE`](crate::callbacks::DEFAULT_STOP_GRACE); fixed: [`MAX_UNCLAIMED`](crate::callbacks::MAX_UNCLAIMED)), set with
//! [`grpc_broker`](PluginClientBuilder::grpc_broker).
//!
//! # Callbacks
//!
//! [`PluginClient::broker`] is go-plugin's `GRPCBroker`. Serve a service to the plugin for the
//! duration of one call and pass its id in the request (go-plugin's `examples/bidirectional`;
//! `counter` stands for the generated code):
//!
//! ```no_run
//! # mod counter { include!(concat!(env!("CARGO_MANIFEST_DIR"), "/../cli/src/conformance/generated/counter.rs")); }
//! use counter::add_helper_server::{AddHelper, AddHelperServer};
//! use counter::counter_client::CounterClient;
//! use counter::{PutRequest, SumRequest, SumResponse};
//! use tonic::{Request, Response, Status};
//!
//! struct Adder;
//!
//! #[tonic::async_trait]
//! impl AddHelper for Adder {
//!     async fn sum(&self, r: Request<SumRequest>) -> Result<Response<SumResponse>, Status> {
//!         let SumRequest { a, b } = r.into_inner();
//!         Ok(Response::new(SumResponse { r: a + b }))
//!     }
//! }
//!
//! # async fn f(plugin: tether_broker::PluginClient) -> Result<(), Box<dyn std::error::Error>> {
//! let broker = plugin.broker();
//! let id = broker.next_id();
//! let served = broker.accept_and_serve(id, AddHelperServer::new(Adder)).await?;
//! CounterClient::new(plugin.channel())
//!     .put(PutRequest { add_server: id, key: "c".into(), value: 5 })
//!     .await?;
//! drop(served); // stops serving and removes the socket
//! # Ok(()) }
//! ```
//!
//! Services every plugin should reach for its whole life, without ids, are *host services*:
//! register them with [`host_service`](PluginClientBuilder::host_service) and the plugin gets a
//! channel with `tether_sdk::GrpcBroker::host_services()` (tether plugins only). The
//! plugin's own services are reached with [`GrpcBroker::dial`]. Brokered sockets live in the
//! launch's private directory; dials accept only addresses the connect policy accepts (inside
//! that directory, or loopback TCP) and use the same pinned mTLS identities as the main
//! connection.
//!
//! # Plugin output and logs
//! Each stderr line (pipe, and `plugin.GRPCStdio` stderr) is parsed as hclog JSON (`@level`,
//! `@message`, `@module`, `@timestamp`, other keys as fields), as `[LEVEL] text`, or else taken
//! as debug text, and emitted as a `tracing` event on target `tether_broker::plugin` at that
//! level with fields `plugin`, `pid`, `source` (`stderr` or `grpc-stdio`), `module`,
//! `timestamp` and `fields`. Stdout lines (pipe or `GRPCStdio`) are emitted at info. Lines
//! longer than [`MAX_LOG_LINE_LEN`](crate::launch::MAX_LOG_LINE_LEN) are cut into pieces, so memory stays bounded. A host can
//! take these lines itself instead, as [`OutputLine`]s:
//! [`output_sink`](PluginClientBuilder::output_sink).
//!
//! # Callback modes
//! Callbacks ([`GrpcBroker`]) work in go-plugin's default mode — a unix socket in the private
//! directory per served id — or, with [`multiplex(true)`](PluginClientBuilder::multiplex) and a
//! plugin that accepts (go-plugin ≥ 1.6, tether SDK), in its multiplexed mode: one connection
//! to the plugin's socket carries yamux, and the main connection and every callback in both
//! directions are streams of it. [`PluginClient::broker_mode`] tells which was negotiated.
//! Reattached plugins always use the default mode.
//!
//! # Not yet
//! Port-level network rules (Landlock ABI ≥ 4 could allow chosen TCP ports); blocking pathname
//! unix sockets outside the plugin's directories (see
//! [`pathname_sockets_blocked`](crate::confine::pathname_sockets_blocked)).

pub mod callbacks;
pub mod catalog;
pub mod confine;
pub mod error;
pub mod launch;
pub mod supervisor;
pub mod telemetry;

pub use callbacks::GrpcBroker;
pub use catalog::{
    Catalog, DirValueSource, EnvValueSource, Grants, Manifest, MemoryValueSource, ValueSource,
};
pub use confine::{Confinement, Limits, SandboxMode};
pub use error::{BoxError, ShutdownError, ShutdownOutcome, StartError, UseError};
pub use launch::{
    Delivery, HandshakeConfig, OutputLimits, OutputLine, OutputSink, PluginClient,
    PluginClientBuilder, ReattachConfig, ReattachedPlugin, Runtime, Timeouts,
};
pub use supervisor::{Lease, Supervisor, SupervisorBuilder};
