//! [`GrpcBrokerError`]: why a brokered connection could not be served or dialled.

use std::io;
use std::time::Duration;

use tether_proto::text::escape;

use crate::dial::ConnectError;

/// Why [`GrpcBroker::accept_and_serve`](crate::GrpcBroker::accept_and_serve) or
/// [`GrpcBroker::dial`](crate::GrpcBroker::dial) failed. Every variant names the peer (the
/// plugin on the host side, `the host` on the plugin side) and, where it applies, the broker id.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GrpcBrokerError {
    /// Used before the connection to the peer exists (a plugin's broker works once it
    /// serves, i.e. inside call handlers).
    #[error(
        "the broker for {peer} is not connected yet; use it only once the plugin serves (for example inside a call handler)"
    )]
    NotConnected {
        /// The peer.
        peer: String,
    },
    /// The broker has been closed (the plugin was shut down, or the host went away).
    #[error("the broker for {peer} is closed (the connection to it has ended)")]
    Closed {
        /// The peer.
        peer: String,
    },
    /// Accepting: the listening socket could not be made.
    #[error("cannot listen for broker id {id} of {peer}: {source}; check the socket directory")]
    Bind {
        /// The peer.
        peer: String,
        /// The broker id.
        id: u32,
        /// The error from `bind`.
        #[source]
        source: io::Error,
    },
    /// Dialling: no connection info for the id arrived in time.
    #[error(
        "no connection info for broker id {id} arrived from {peer} within {timeout:?} ({stream}); check that the peer called accept_and_serve with this id"
    )]
    NoConnInfo {
        /// The peer.
        peer: String,
        /// The broker id.
        id: u32,
        /// How long the dial waited ([`GrpcBrokerConfig::dial_timeout`](crate::GrpcBrokerConfig::dial_timeout)).
        timeout: Duration,
        /// The state of the peer's broker stream, as a hint.
        stream: &'static str,
    },
    /// Plugin side: the host said at launch that it serves no host services
    /// (`TETHER_HOST_SERVICES=none`), so [`GrpcBroker::host_services`](crate::GrpcBroker::host_services)
    /// fails at once instead of waiting for an announcement that will not come.
    #[error(
        "{peer} serves no host services (it announced none at launch; go-plugin hosts never serve any, a tether host does when it registers host_service)"
    )]
    NoHostServices {
        /// The peer.
        peer: String,
    },
    /// Plugin side: the host did not open a connection to the catalog plugin asked for with
    /// [`GrpcBroker::open_plugin`](crate::GrpcBroker::open_plugin): not granted
    /// (`PermissionDenied`, naming the grants line to add), not in its catalog (`NotFound`),
    /// or it could not start (`Unavailable`).
    #[error("{peer} did not open a connection to plugin {plugin:?}: {}", escape(status.message()))]
    PluginRefused {
        /// The peer (the host).
        peer: String,
        /// The catalog plugin asked for.
        plugin: String,
        /// The host's answer.
        status: Box<tonic::Status>,
    },
    /// Dialling: the peer announced an address this side refuses (outside the private
    /// directory, not loopback, unparsable).
    #[error(
        "{peer} announced address {address:?} for broker id {id}, which is refused: {}",
        escape(reason)
    )]
    BadAddress {
        /// The peer.
        peer: String,
        /// The broker id.
        id: u32,
        /// `network:address` as announced.
        address: String,
        /// Why it was refused.
        reason: String,
    },
    /// Dialling: the announced address could not be connected to.
    #[error(
        "cannot connect to broker id {id} of {peer} at {}: {source}",
        escape(target)
    )]
    Connect {
        /// The peer.
        peer: String,
        /// The broker id.
        id: u32,
        /// Where.
        target: String,
        /// Why.
        #[source]
        source: ConnectError,
    },
}
