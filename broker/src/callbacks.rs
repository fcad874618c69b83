//! Callbacks: go-plugin's `GRPCBroker` in both of its modes (see the crate docs), its
//! configuration, errors and limits. Reached through [`PluginClient::broker`](crate::PluginClient::broker).

pub use tether_transport::{
    BrokerMode, DEFAULT_BROKER_CONNECT_TIMEOUT, DEFAULT_DIAL_TIMEOUT,
    DEFAULT_HOST_SERVICES_ANNOUNCE_INTERVAL, DEFAULT_STOP_GRACE, DEFAULT_UNCLAIMED_TTL, GrpcBroker,
    GrpcBrokerConfig, GrpcBrokerError, HOST_SERVICES_ID, MAX_UNCLAIMED, Served,
};
