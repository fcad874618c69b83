//! Launching one plugin: the builder, the stages (spawn → handshake → connect → health), the
//! running client, its output, its ending, and reattaching to a plugin started elsewhere.

pub(crate) mod address;
pub(crate) mod builder;
pub(crate) mod client;
pub(crate) mod connect;
pub(crate) mod handshake;
pub(crate) mod health;
pub(crate) mod output;
pub(crate) mod plan;
pub(crate) mod reattach;
pub(crate) mod shutdown;
pub(crate) mod spawn;
pub(crate) mod start;
