//! Write tether plugins in Rust. A tether plugin is also a go-plugin plugin: HashiCorp
//! go-plugin hosts (Terraform-style, `AllowedProtocols: [grpc]`) launch it like one of theirs.
//!
//! A plugin is a program. Its host launches it with a few environment variables, reads one
//! line from its stdout (where to connect, and the plugin's TLS certificate), and calls its gRPC
//! services. This crate does all of that; the author writes the services.
//!
//! # A complete plugin
//!
//! The KV plugin of go-plugin's `examples/grpc`, keeping values in memory (not compiled here:
//! its generated `kv` code lives in the examples crate's `OUT_DIR`; the same plugin, built the
//! author's way, is the Rust plugin guide's crate, which `tests/tests/guides.rs` compiles and runs):
//!
//! ```ignore
//! use std::collections::HashMap;
//! use std::sync::Mutex;
//!
//! use kv::kv_server::{Kv, KvServer};
//! use kv::{Empty, GetRequest, GetResponse, PutRequest};
//! use tonic::{Request, Response, Status};
//!
//! // The code generated from go-plugin's `kv.proto` (package `proto`) by the plugin's
//! // `build.rs`, `tether_build::compile_protos(&["proto/kv.proto"], &["proto"])`:
//! // mod kv { tonic::include_proto!("proto"); }
//!
//! #[derive(Default)]
//! struct MemoryKv(Mutex<HashMap<String, Vec<u8>>>);
//!
//! #[tonic::async_trait]
//! impl Kv for MemoryKv {
//!     async fn get(&self, request: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
//!         let key = request.into_inner().key;
//!         let values = self.0.lock().expect("no handler panics while holding the lock");
//!         match values.get(&key) {
//!             Some(value) => Ok(Response::new(GetResponse { value: value.clone() })),
//!             None => Err(Status::not_found(format!("no value for {key:?}"))),
//!         }
//!     }
//!
//!     async fn put(&self, request: Request<PutRequest>) -> Result<Response<Empty>, Status> {
//!         let PutRequest { key, value } = request.into_inner();
//!         let mut values = self.0.lock().expect("no handler panics while holding the lock");
//!         values.insert(key, value);
//!         Ok(Response::new(Empty {}))
//!     }
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").app_version(1);
//!     tether_sdk::Plugin::new(options)
//!         .add_service(KvServer::new(MemoryKv::default()))
//!         .run() // on failure prints `[ERROR] plugin failed: <what, because of what>`, exits 1
//! }
//! ```
//!
//! The repository's guide `docs/plugin-rust.md` is the same as a whole crate — `Cargo.toml`,
//! `build.rs`, `.proto`, service, `main` and tests — built and tested by CI.
//!
//! [`Plugin::run`] blocks, builds its own runtime, prints errors to stderr and returns the exit
//! status. [`Plugin::try_run`] returns a typed [`Error`] instead, and [`Plugin::run_async`]
//! runs on a tokio runtime the author already has.
//!
//! # What happens at start-up
//!
//! 1. **Configuration check.** An empty cookie, no app versions, a service added for a version
//!    the [`ServeOptions`] do not list, or two services with one gRPC name are [`Error`]s.
//! 2. **Cookie.** If the cookie variable is missing or wrong, the plugin was run by hand (or by
//!    another application's host): [`Plugin::run`] prints go-plugin's message for humans
//!    ([`NOT_LAUNCHED_BY_HOST_MESSAGE`]) to stderr and exits with status 1. Nothing is printed
//!    to stdout.
//! 3. **Negotiation.** The app protocol version is the highest of
//!    [`ServeOptions::app_versions`] that the host offers in `PLUGIN_PROTOCOL_VERSIONS`, else the
//!    plugin's lowest (the host then refuses the plugin with a clear message). Services added
//!    with [`Plugin::add_service_for`] are served only for their version.
//! 4. **Listening.** By default a unix socket: with a random name inside
//!    `PLUGIN_UNIX_SOCKET_DIR` if the host sets it, else as `plugin.sock` in a fresh private
//!    (0700) directory under `TMPDIR` (or `/tmp`). With [`Transport::Tcp`], the first free port
//!    of `PLUGIN_MIN_PORT..=PLUGIN_MAX_PORT` (default 10000–25000) on `127.0.0.1`, with
//!    `TCP_NODELAY` on every connection.
//! 5. **AutoMTLS.** If the host sets `PLUGIN_CLIENT_CERT`, the plugin makes a throw-away key
//!    pair and certificate, accepts only clients presenting exactly the host's certificate,
//!    and announces its own certificate in the handshake. TLS handshakes run concurrently,
//!    each limited by [`ServeOptions::tls_handshake_timeout`]; one that fails is logged and
//!    does not disturb the others. Without the variable the plugin serves plaintext gRPC.
//! 6. **Handshake.** Once the socket is listening, the plugin prints the handshake line
//!    (`1|APP|unix|/path|grpc|CERT`) as its first stdout output and flushes it. go-plugin's
//!    seventh (multiplexing) field is printed only when the host set `PLUGIN_MULTIPLEX_GRPC`
//!    (hosts before go-plugin 1.6 would take it for part of the certificate): `|true` when the
//!    host asked for multiplexing (the value is `true`, as Go's `ParseBool` reads it), else
//!    `|false`. Multiplexed, the host's one connection carries yamux and the main server gets
//!    the streams opened without a knock (see below).
//!
//! The gRPC server then serves the author's services, `grpc.health.v1.Health` (service
//! `"plugin"` is `SERVING`), `plugin.GRPCController`, `plugin.GRPCBroker` and
//! `plugin.GRPCStdio`.
//!
//! # Stopping
//!
//! The plugin stops — gracefully: no new connections, in-flight calls finish, for at most
//! [`ServeOptions::shutdown_grace`] — and the process exits with status 0 when:
//!
//! - the host calls `GRPCController.Shutdown` (the call still gets its response);
//! - the process receives SIGTERM, or SIGINT (unless [`ServeOptions::ignore_sigint`]);
//! - **the host exits.** [`Plugin::new`] records the parent process id; when serving starts the
//!   plugin opens a pidfd on that process and waits for it to become readable, which the
//!   kernel signals when the process exits — no polling. The race between recording the pid
//!   and opening the pidfd is closed by checking `getppid()` again after opening: if the
//!   parent changed, the host is already gone. Turn this off with [`ServeOptions::exit_with_host`].
//!   pidfds need Linux 5.3; elsewhere, or if `pidfd_open` is refused, a warning is logged and
//!   the plugin relies on the host to stop it.
//!
//! On the way out the plugin removes its socket, and the private directory if it made one.
//! [`Plugin::try_run`] and [`Plugin::run_async`] say why it stopped ([`StopReason`]).
//!
//! # Logging
//!
//! The SDK logs with `tracing`. Unless told otherwise ([`ServeOptions::log_to_stderr`]) it installs
//! a subscriber that writes one hclog JSON object per event (`@level`, `@message`, `@module`,
//! `@timestamp` with six fractional digits, then the event's fields) to the plugin's real
//! stderr, which go-plugin and tether hosts log at the matching level ([`HclogJson`] is the
//! format, for a subscriber of your own; `RUST_LOG` filters). Stdout carries only the
//! handshake line (and whatever the author prints after it).
//!
//! # Calling back into the host
//!
//! [`Plugin::broker`] is go-plugin's `GRPCBroker`. The host serves a service under an id and
//! sends the id in a request; the plugin dials it (go-plugin's `examples/bidirectional`;
//! `counter` stands for the generated code):
//!
//! ```no_run
//! // mod counter { tonic::include_proto!("proto"); } // from counter.proto, by build.rs
//! # mod counter { include!(concat!(env!("CARGO_MANIFEST_DIR"), "/../cli/src/conformance/generated/counter.rs")); }
//! use counter::add_helper_client::AddHelperClient;
//! use counter::counter_server::{Counter, CounterServer};
//! use counter::{Empty, GetRequest, GetResponse, PutRequest, SumRequest};
//! use tonic::{Request, Response, Status};
//!
//! struct MyCounter {
//!     broker: tether_sdk::GrpcBroker,
//! }
//!
//! #[tonic::async_trait]
//! impl Counter for MyCounter {
//!     async fn put(&self, request: Request<PutRequest>) -> Result<Response<Empty>, Status> {
//!         let PutRequest { add_server, value, .. } = request.into_inner();
//!         let channel = self.broker.dial(add_server).await
//!             .map_err(|e| Status::unavailable(e.to_string()))?;
//!         let sum = AddHelperClient::new(channel)
//!             .sum(SumRequest { a: 0, b: value })
//!             .await?
//!             .into_inner()
//!             .r;
//!         # let _ = sum;
//!         Ok(Response::new(Empty {}))
//!     }
//!     # async fn get(&self, _: Request<GetRequest>) -> Result<Response<GetResponse>, Status> { todo!() }
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello");
//!     let plugin = tether_sdk::Plugin::new(options);
//!     let broker = plugin.broker();
//!     plugin.add_service(CounterServer::new(MyCounter { broker })).run()
//! }
//! ```
//!
//! Services a tether host registered with `host_service` need no id: `broker.host_services()`
//! returns one shared channel to all of them (go-plugin hosts have none).
//!
//! The plugin can also serve something to the host: `broker.accept_and_serve(broker.next_id(),
//! service)` and send the id. Brokered sockets go next to the main one; connections use the
//! same pinned mTLS identities as the main connection, whichever side accepts. When the host
//! asked for go-plugin's multiplexed broker, the same calls work unchanged but no socket is
//! made: every brokered connection is a yamux stream of the host's one connection (agreed by
//! a knock and its acknowledgement on the broker stream); `broker.mode()` tells which mode
//! runs.
//!
//! # Stdio
//!
//! After the handshake the plugin's fd 1 is a pipe (unless [`ServeOptions::capture_stdio`] is
//! off): whatever is written there — `print!`, C libraries, child processes — is streamed to a
//! host that opens `plugin.GRPCStdio` (tether hosts and go-plugin ≥ 1.1), through a bounded
//! queue of [`STDIO_QUEUE_LEN`] chunks, or else written to the original fd after
//! [`STDIO_OPEN_WAIT`]. At shutdown fd 1 is put back and what is still in the pipe goes to
//! the host's stream before it ends (waiting at most [`DEFAULT_STDIO_DRAIN_TIMEOUT`], see
//! [`ServeOptions::stdio_drain_timeout`]). fd 2 stays the host's stderr pipe, which every host
//! drains and parses as log lines and which, unlike in-process capture, survives a crash.
//!
//! # Secrets and config files
//!
//! What the host granted this plugin arrives as files, never in environment variables:
//! [`Plugin::granted`] gives a [`Granted`] to hand to services ([`Granted::secret`] is a
//! `secrecy` value, wiped when dropped, read with [`ExposeSecret`]; tests point it at their
//! own directory), and [`secrets::read`], [`config::read`] / [`config::read_string`] read the
//! same files directly. A name that was not requested, not granted or not delivered gives
//! a [`DeliveredError`] that says so and what to do.
//!
//! # Building a plugin to ship
//!
//! A plugin is started at every launch and stays resident, so its code size is launch time and
//! memory. The recommended release build is a profile of your own crate, statically linked:
//!
//! ```toml
//! [profile.plugin]
//! inherits = "release"
//! lto = "fat"
//! codegen-units = 1
//! opt-level = "s"
//! ```
//!
//! ```text
//! RUSTFLAGS="-C target-feature=+crt-static" \
//!     cargo build --profile plugin --target x86_64-unknown-linux-gnu --bin my-plugin
//! ```
//!
//! (`--target` keeps the flag off build scripts and proc macros; the binary lands in
//! `target/x86_64-unknown-linux-gnu/plugin/`.) Measured on the KV example against the plain
//! release build (bench/BENCHMARKS.md, Decisions): idle RSS 8.6 → 5.2 MB, launch → first call
//! 3.9 → 3.6 ms, calls no slower; the cost is a slower build. `panic = "abort"` is not part of
//! it: with unwinding, a panicking handler fails its call, not the plugin.
//!
//! # Not yet
//!
//! `PLUGIN_UNIX_SOCKET_GROUP`.

mod delivered;
mod env;
mod error;
mod granted;
mod host;
mod listen;
mod log;
mod options;
mod plugin;
mod serve;
mod stdio;

pub mod config;
pub mod secrets;
pub mod telemetry;

pub use delivered::DeliveredError;
pub use error::{Error, NOT_LAUNCHED_BY_HOST_MESSAGE, StopReason};
pub use granted::Granted;
pub use log::HclogJson;
pub use options::{
    DEFAULT_ACCEPT_ERROR_BACKOFF, DEFAULT_APP_VERSION, DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_TLS_HANDSHAKE_TIMEOUT, RuntimeFlavor, ServeOptions, Transport,
};
pub use plugin::Plugin;
/// What reading a secret needs: [`ExposeSecret::expose_secret`] shows the value, the types
/// wrap it (wiped when dropped). Re-exported so that a plugin need not depend on `secrecy`.
pub use secrecy::{ExposeSecret, SecretSlice, SecretString};
pub use stdio::{DEFAULT_STDIO_DRAIN_TIMEOUT, STDIO_CHUNK_LEN, STDIO_OPEN_WAIT, STDIO_QUEUE_LEN};
pub use tether_transport::{
    BrokerMode, DEFAULT_BROKER_CONNECT_TIMEOUT, DEFAULT_DIAL_TIMEOUT, DEFAULT_STOP_GRACE,
    DEFAULT_UNCLAIMED_TTL, GrpcBroker, GrpcBrokerConfig, GrpcBrokerError, HOST_SERVICES_ID,
    MAX_UNCLAIMED, Served,
};
