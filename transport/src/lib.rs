//! **An internal crate of tether**: the connection code its host library (`tether-broker`)
//! and its plugin SDK (`tether-sdk`) share, one implementation of each piece used by both
//! sides. If you are writing a host or a plugin you probably want `tether-broker` or
//! `tether-sdk` instead: they re-export what their users need from here, and this crate's API
//! follows their needs, with fewer stability promises.
//!
//! # What users meet (re-exported by `tether-broker` and `tether-sdk`)
//!
//! - [`GrpcBroker`] — go-plugin's `plugin.GRPCBroker` (callbacks): ids, `accept_and_serve`,
//!   `dial`, on either side, in go-plugin's default mode or its multiplexed one
//!   ([`BrokerMode`]); its [`GrpcBrokerConfig`], its [`GrpcBrokerError`], the [`Served`] handle.
//! - [`GrpcService`] — the one bound for "a tonic service tether can serve".
//! - [`telemetry`] — trace context across the boundary, [`TracedChannel`](telemetry::TracedChannel)
//!   (every channel tether hands out), traced served routes, per-call metrics hooks.
//! - The defaults of their timeouts and limits ([`DEFAULT_DIAL_TIMEOUT`], [`MAX_UNCLAIMED`],
//!   [`DEFAULT_REPEATED_WARNING_INTERVAL`], …).
//!
//! # Internals (hidden from these docs; used by the sibling crates)
//!
//! - `accept` — an accept loop over a unix, TCP or multiplexed `Listener` that runs TLS
//!   handshakes concurrently (each bounded) and feeds tonic's `serve_with_incoming`.
//! - `connect`, `connect_streams` — a tonic `Channel` over a unix socket, loopback TCP or
//!   yamux streams with pinned mutual TLS (tonic refuses TLS on `unix:` endpoints, so tether
//!   drives the connector itself); why it fails is the public [`ConnectError`].
//! - `bind` — randomly named unix sockets in a directory, the first free port of a range.
//! - `Mux` — go-plugin's multiplexed broker transport: one connection carrying yamux, every
//!   gRPC connection a stream of it (routed by knock/ack on the broker stream).
//! - `BrokerSetup` and `GrpcBroker::connect` / `take_outbound` / `run_inbound` /
//!   `open_stream` / `service` — how the host library and the SDK wire a broker to its peer.
//! - `internal::lock` — the poison-tolerant lock helper of all tether crates.
//!
//! # Example
//!
//! How the host library and the SDK wire brokers: here two brokers wired to each other in
//! memory (a host and a plugin do this over `plugin.GRPCBroker/StartStream`); one serves the
//! health service under a fresh id, the other dials it over mutual TLS.
//!
//! ```
//! use std::sync::Arc;
//! use tether_proto::tls::Identity;
//! use tether_transport::{GrpcBrokerConfig, BrokerSetup, BrokerTls, GrpcBroker, ListenOn, Target};
//! use tether_proto::handshake::Address;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (host_id, plugin_id) = (Identity::generate()?, Identity::generate()?);
//! let dir = tempfile::tempdir()?;
//! let setup = |own: &Identity, peer: &Identity| BrokerSetup {
//!     tls: Some(BrokerTls::new(own, peer.cert_der().clone()).unwrap()),
//!     listen: ListenOn::Unix(dir.path().to_owned()),
//!     policy: Arc::new(|address: &Address| match address {
//!         Address::Unix(path) => Ok(Target::Unix(path.clone())),
//!         Address::Tcp(_) => Err("only unix sockets".into()),
//!     }),
//!     mux: None,
//! };
//! let host = GrpcBroker::new("plugin `demo`", GrpcBrokerConfig::new());
//! let plugin = GrpcBroker::new("the host", GrpcBrokerConfig::new());
//! host.connect(setup(&host_id, &plugin_id));
//! plugin.connect(setup(&plugin_id, &host_id));
//! // The stream each side sends is the other's inbound stream.
//! use tokio_stream::StreamExt as _;
//! let to_plugin = host.take_outbound().unwrap().map(Ok);
//! let to_host = plugin.take_outbound().unwrap().map(Ok);
//! let (h, p) = (host.clone(), plugin.clone());
//! tokio::spawn(async move { p.run_inbound(to_plugin).await });
//! tokio::spawn(async move { h.run_inbound(to_host).await });
//!
//! let (_reporter, health) = tonic_health::server::health_reporter();
//! let id = host.next_id();
//! let _served = host.accept_and_serve(id, health).await?;
//! let channel = plugin.dial(id).await?;
//! # drop(channel);
//! # Ok(()) }
//! ```
//!
//! # Multiplexed
//!
//! The same brokers over one connection (go-plugin ≥ 1.6 `PLUGIN_MULTIPLEX_GRPC`): the plugin
//! side accepts the host's single connection with `Mux::serve_first_connection`, the host
//! wraps it with `Mux::client`, and both brokers get their `Mux` in `BrokerSetup::mux`.
//! Serving and dialling are unchanged; no socket is made per id.
//!
//! ```
//! use std::sync::Arc;
//! use tether_proto::handshake::Address;
//! use tether_transport::{
//!     AcceptOptions, GrpcBrokerConfig, BrokerMode, BrokerSetup, GrpcBroker, ListenOn, Listener, Mux,
//!     Target,
//! };
//! use tokio_stream::StreamExt as _;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let socket = dir.path().join("plugin.sock");
//! // Plugin side: the first connection becomes the yamux session; streams opened without a
//! // knock would go to `_main` (the plugin's main gRPC server).
//! let plugin_mux = Mux::new();
//! let _main = plugin_mux.serve_first_connection(
//!     Listener::Unix(tokio::net::UnixListener::bind(&socket)?),
//!     AcceptOptions::new(None),
//! );
//! // Host side: its one connection to the plugin.
//! let host_mux = Mux::client(tokio::net::UnixStream::connect(&socket).await?);
//! let setup = |mux| BrokerSetup {
//!     tls: None, // plaintext here; pass `BrokerTls` for AutoMTLS, as in the default mode
//!     listen: ListenOn::Unix(dir.path().to_owned()),
//!     policy: Arc::new(|_: &Address| -> Result<Target, String> {
//!         Err("multiplexed: nothing is dialled by address".into())
//!     }),
//!     mux: Some(mux),
//! };
//! let host = GrpcBroker::new("plugin `demo`", GrpcBrokerConfig::new());
//! let plugin = GrpcBroker::new("the host", GrpcBrokerConfig::new());
//! host.connect(setup(host_mux));
//! plugin.connect(setup(plugin_mux));
//! let to_plugin = host.take_outbound().unwrap().map(Ok);
//! let to_host = plugin.take_outbound().unwrap().map(Ok);
//! let (h, p) = (host.clone(), plugin.clone());
//! tokio::spawn(async move { p.run_inbound(to_plugin).await });
//! tokio::spawn(async move { h.run_inbound(to_host).await });
//!
//! let (_reporter, health) = tonic_health::server::health_reporter();
//! let id = plugin.next_id();
//! let _served = plugin.accept_and_serve(id, health).await?;
//! let channel = host.dial(id).await?; // knock, ack, then a yamux stream
//! assert_eq!(host.mode(), BrokerMode::Multiplexed);
//! assert_eq!(std::fs::read_dir(dir.path())?.count(), 1); // only the plugin's socket
//! # drop(channel);
//! # Ok(()) }
//! ```

mod accept;
#[doc(hidden)]
pub mod bind;
mod conn;
mod dial;
mod error;
mod grpc_broker;
#[doc(hidden)]
pub mod internal;
mod mux;
mod repeated;
mod service;
pub mod telemetry;
mod yielding;

pub use accept::{DEFAULT_ACCEPT_ERROR_BACKOFF, DEFAULT_TLS_HANDSHAKE_TIMEOUT};
pub use dial::{BoxError, ConnectError};
pub use error::GrpcBrokerError;
pub use grpc_broker::{
    BROKER_TLS13_TICKETS, DEFAULT_BROKER_CONNECT_TIMEOUT, DEFAULT_DIAL_TIMEOUT,
    DEFAULT_HOST_SERVICES_ANNOUNCE_INTERVAL, DEFAULT_STOP_GRACE, DEFAULT_UNCLAIMED_TTL, GrpcBroker,
    GrpcBrokerConfig, HOST_SERVICES_ID, HOST_SERVICES_REANNOUNCE_DELAY, MAX_UNCLAIMED, Served,
};
pub use mux::BrokerMode;
pub use repeated::DEFAULT_REPEATED_WARNING_INTERVAL;
pub use service::GrpcService;

// Internals: public for `tether-broker` and `tether-sdk` only.
#[doc(hidden)]
pub use accept::{AcceptOptions, Incoming, Listener, StreamListener, accept};
#[doc(hidden)]
pub use conn::{Conn, Io, Sockets, Target};
#[doc(hidden)]
pub use dial::{Alive, connect, connect_raw, connect_streams};
#[doc(hidden)]
pub use grpc_broker::{AddressPolicy, BrokerSetup, BrokerTls, ListenOn};
#[doc(hidden)]
pub use mux::{Mux, StreamOpener};
