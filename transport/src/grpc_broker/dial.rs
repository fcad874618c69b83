//! Dialling a service the peer serves under a broker id, in either mode.

use tether_proto::plugins::OpenRequest;
use tether_proto::plugins::plugins_client::PluginsClient;

use super::broker::GrpcBroker;
use super::table::HOST_SERVICES_ID;
use super::{default_mode, multiplexed};
use crate::error::GrpcBrokerError;
use crate::telemetry::TracedChannel;

impl GrpcBroker {
    /// Connects to the service the peer serves under `id`: waits (at most
    /// [`GrpcBrokerConfig::dial_timeout`](super::GrpcBrokerConfig::dial_timeout)) for the peer's
    /// `ConnInfo`, checks the address and connects with the pinned TLS identities. In the
    /// multiplexed mode it knocks for the id instead and connects over a stream of the one
    /// connection.
    ///
    /// # Errors
    /// [`GrpcBrokerError::NotConnected`], [`GrpcBrokerError::Closed`], [`GrpcBrokerError::NoConnInfo`],
    /// [`GrpcBrokerError::BadAddress`], [`GrpcBrokerError::Connect`].
    ///
    /// The channel is a [`TracedChannel`]: each call on it is a client span whose trace
    /// context goes to the peer in the call's metadata.
    pub async fn dial(&self, id: u32) -> Result<TracedChannel, GrpcBrokerError> {
        let setup = self.setup()?;
        let channel = match &setup.mux {
            Some(mux) => multiplexed::dial(self, setup, mux, id).await,
            None => default_mode::dial(self, setup, id).await,
        }?;
        Ok(TracedChannel::for_calls(
            channel,
            &self.inner.config.telemetry,
        ))
    }

    /// Plugin side: a channel to the services the host serves to all its plugins (a tether
    /// host's `host_service`s), without being sent an id. Dialled on first use (waiting up to
    /// [`GrpcBrokerConfig::dial_timeout`](super::GrpcBrokerConfig::dial_timeout) for the host's
    /// announcement), then shared.
    ///
    /// # Errors
    /// As [`dial`](Self::dial); at once [`GrpcBrokerError::NoHostServices`] when the host
    /// announced at launch that it serves none (tether hosts do), else
    /// [`GrpcBrokerError::NoConnInfo`] after the dial timeout when the host serves none
    /// (go-plugin hosts never do, and never announce it).
    pub async fn host_services(&self) -> Result<TracedChannel, GrpcBrokerError> {
        if self
            .inner
            .no_host_services
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Err(GrpcBrokerError::NoHostServices {
                peer: self.inner.peer.clone(),
            });
        }
        self.inner
            .host_services
            .get_or_try_init(|| self.dial(HOST_SERVICES_ID))
            .await
            .cloned()
    }

    /// Plugin side: a channel to the services of the host's catalog plugin `plugin`, relayed
    /// by the host (a tether `Supervisor`), which starts it if needed — when the operator's
    /// grants let this plugin call it (`calls = ["NAME"]` under `[plugins.THIS]`). The channel
    /// speaks `plugin`'s own services; this plugin never learns its address or secrets.
    ///
    /// Asks `tether.plugins.v1.Plugins/Open` on the [host services](Self::host_services) for a
    /// broker id, then [dials](Self::dial) it.
    ///
    /// # Errors
    /// As [`host_services`](Self::host_services) and [`dial`](Self::dial);
    /// [`GrpcBrokerError::PluginRefused`] when the host refuses (not granted: the message names
    /// the grants line to add).
    pub async fn open_plugin(&self, plugin: &str) -> Result<TracedChannel, GrpcBrokerError> {
        let host = self.host_services().await?;
        let refused = |status| GrpcBrokerError::PluginRefused {
            peer: self.inner.peer.clone(),
            plugin: plugin.to_owned(),
            status: Box::new(status),
        };
        let opened = PluginsClient::new(host)
            .open(OpenRequest {
                plugin: plugin.to_owned(),
            })
            .await
            .map_err(refused)?;
        self.dial(opened.into_inner().broker_id).await
    }
}
