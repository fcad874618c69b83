//! go-plugin's `GRPCBroker`, identical on the host and the plugin side, in both of go-plugin's
//! modes.
//!
//! Each side numbers its own ids ([`GrpcBroker::next_id`]); an id travels to the peer inside an
//! app message. In the default mode ([`default_mode`]) [`GrpcBroker::accept_and_serve`] opens a
//! new listener, announces it as a `ConnInfo{service_id, network, address}` on the
//! `plugin.GRPCBroker/StartStream` stream ([`stream`]) and serves gRPC there; the peer's
//! [`GrpcBroker::dial`] waits for that `ConnInfo` and connects. In the multiplexed mode
//! ([`multiplexed`], [`BrokerSetup::mux`]) nothing is announced: the dialler knocks on the
//! stream, the server acknowledges, and the dialler opens a yamux stream that is routed to the
//! id (see [`Mux`](crate::mux::Mux)). Brokered connections use the same pinned TLS identities
//! as the main connection; whichever side accepts is the TLS server.
//!
//! The files, bottom up: [`config`] and [`setup`] (what a broker is given), [`table`] (the
//! sans-IO connection-info table: TTL, claim, knock, cap), [`served`] (the [`Served`] handle),
//! [`broker`] (the [`GrpcBroker`] state), the two modes, then [`serve`], [`dial`] and
//! [`stream`], which pick the mode.

mod broker;
mod config;
mod default_mode;
mod dial;
mod multiplexed;
mod serve;
mod served;
mod setup;
mod stream;
mod table;

pub use broker::GrpcBroker;
pub use config::{
    DEFAULT_BROKER_CONNECT_TIMEOUT, DEFAULT_DIAL_TIMEOUT, DEFAULT_HOST_SERVICES_ANNOUNCE_INTERVAL,
    DEFAULT_STOP_GRACE, DEFAULT_UNCLAIMED_TTL, GrpcBrokerConfig,
};
pub use serve::HOST_SERVICES_REANNOUNCE_DELAY;
pub use served::Served;
pub use setup::{AddressPolicy, BROKER_TLS13_TICKETS, BrokerSetup, BrokerTls, ListenOn};
pub use table::{HOST_SERVICES_ID, MAX_UNCLAIMED};
