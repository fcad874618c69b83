//! Connections shared by tether's host library (`tether-broker`) and plugin SDK
//! (`tether-sdk`): one implementation of each piece, used by both sides.
//!
//! - [`accept`](accept()) — an accept loop over a unix or TCP [`Listener`] that runs TLS
//!   handshakes concurrently (each bounded) and feeds tonic's `serve_with_incoming`.
//! - [`connect`] — a tonic [`Channel`](tonic::transport::Channel) over a unix socket or
//!   loopback TCP with pinned mutual TLS (tonic refuses TLS on `unix:` endpoints, so tether
//!   drives the connector itself).
//! - [`bind`] — randomly named unix sockets in a directory, the first free port of a range.
//! - [`GrpcBroker`] — go-plugin's `plugin.GRPCBroker` (callbacks): ids, `accept_and_serve`,
//!   `dial`, on either side.
//!
//! # Example
//!
//! Two brokers wired to each other in memory (a host and a plugin do this over
//! `plugin.GRPCBroker/StartStream`): one serves the health service under a fresh id, the other
//! dials it over mutual TLS.
//!
//! ```
//! use std::sync::Arc;
//! use tether_proto::tls::Identity;
//! use tether_transport::{BrokerConfig, BrokerSetup, BrokerTls, GrpcBroker, ListenOn, Target};
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
//! let host = GrpcBroker::new("plugin `demo`", BrokerConfig::new());
//! let plugin = GrpcBroker::new("the host", BrokerConfig::new());
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

mod accept;
pub mod bind;
mod conn;
mod dial;
mod error;
mod grpc_broker;
mod mux;

pub use accept::{
    AcceptOptions, DEFAULT_ACCEPT_ERROR_BACKOFF, DEFAULT_TLS_HANDSHAKE_TIMEOUT, Incoming, Listener,
    accept,
};
pub use conn::{Conn, Io, Target};
pub use dial::{Alive, BoxError, ConnectError, connect, connect_raw, connect_streams};
pub use error::BrokerError;
pub use grpc_broker::{
    AddressPolicy, BrokerConfig, BrokerSetup, BrokerTls, DEFAULT_BROKER_CONNECT_TIMEOUT,
    DEFAULT_DIAL_TIMEOUT, DEFAULT_STOP_GRACE, DEFAULT_UNCLAIMED_TTL, GrpcBroker, HOST_SERVICES_ID,
    ListenOn, MAX_UNCLAIMED, Served,
};
pub use mux::{BrokerMode, Mux, StreamListener, StreamOpener};
