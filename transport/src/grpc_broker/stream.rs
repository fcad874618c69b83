//! The broker stream, `plugin.GRPCBroker/StartStream`: the `ConnInfo`s (announcements, knocks,
//! acknowledgements) both sides exchange. The host opens it as a client, the plugin serves it;
//! what arrives goes to the mode it belongs to.

use std::pin::{Pin, pin};

use tether_proto::plugin::ConnInfo;
use tether_proto::plugin::grpc_broker_client::GrpcBrokerClient;
use tether_proto::plugin::grpc_broker_server::{self, GrpcBrokerServer};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::{Stream, StreamExt as _};
use tonic::transport::Channel;

use super::broker::{GrpcBroker, PeerStream};
use super::{default_mode, multiplexed};
use crate::internal::lock;

impl GrpcBroker {
    /// The `ConnInfo`s this side sends to the peer, once: the host sends them as the request
    /// stream of `StartStream`, a plugin as its response stream. Ends when the broker closes.
    /// `None` after the first call.
    #[doc(hidden)]
    pub fn take_outbound(&self) -> Option<impl Stream<Item = ConnInfo> + Send + 'static> {
        lock(&self.inner.outbound_rx)
            .take()
            .map(UnboundedReceiverStream::new)
    }

    /// Routes the `ConnInfo`s the peer sends to waiting and future dials, until `stream` ends
    /// or the broker closes.
    #[doc(hidden)]
    pub async fn run_inbound<S>(&self, stream: S)
    where
        S: Stream<Item = Result<ConnInfo, tonic::Status>> + Send,
    {
        self.set_peer_stream(PeerStream::Open);
        let mut stream = pin!(stream);
        let mut closed = self.inner.closed.subscribe();
        loop {
            let next = tokio::select! {
                _ = closed.wait_for(|c| *c) => break,
                next = stream.next() => next,
            };
            match next {
                Some(Ok(info)) => self.receive(info),
                Some(Err(status)) => {
                    tracing::debug!(peer = self.inner.peer, %status, "the broker stream ended");
                    break;
                }
                None => break,
            }
        }
        self.set_peer_stream(PeerStream::Ended);
    }

    /// Host side: opens `plugin.GRPCBroker/StartStream` on the plugin's `channel` and routes
    /// what arrives, in a background task. A plugin without the service is noted (dials then
    /// say so) and otherwise ignored.
    #[doc(hidden)]
    pub fn open_stream(&self, channel: Channel) {
        let Some(outbound) = self.take_outbound() else {
            return;
        };
        let broker = self.clone();
        tokio::spawn(async move {
            let mut client = GrpcBrokerClient::new(channel);
            let mut closed = broker.inner.closed.subscribe();
            // go-plugin answers with headers only when it first sends, so this can wait long;
            // our requests flow meanwhile.
            let opened = tokio::select! {
                opened = client.start_stream(outbound) => opened,
                _ = closed.wait_for(|c| *c) => return,
            };
            match opened {
                Ok(response) => broker.run_inbound(response.into_inner()).await,
                Err(status) if status.code() == tonic::Code::Unimplemented => {
                    tracing::debug!(
                        peer = broker.inner.peer,
                        "the plugin does not serve plugin.GRPCBroker; callbacks are unavailable"
                    );
                    broker.set_peer_stream(PeerStream::Unsupported);
                }
                Err(status) => {
                    tracing::debug!(peer = broker.inner.peer, %status, "the broker stream ended");
                    broker.set_peer_stream(PeerStream::Ended);
                }
            }
        });
    }

    /// Plugin side: the `plugin.GRPCBroker` service to serve to the host.
    #[doc(hidden)]
    #[must_use]
    pub fn service(&self) -> GrpcBrokerServer<impl grpc_broker_server::GrpcBroker> {
        GrpcBrokerServer::new(BrokerService(self.clone()))
    }

    /// A `ConnInfo` from the peer: a knock (multiplexed mode) or an announcement.
    fn receive(&self, info: ConnInfo) {
        match info.knock {
            Some(knock) => multiplexed::receive_knock(self, info.service_id, knock),
            None => default_mode::receive(self, info),
        }
    }
}

/// The plugin side's `plugin.GRPCBroker` service.
struct BrokerService(GrpcBroker);

#[tonic::async_trait]
impl grpc_broker_server::GrpcBroker for BrokerService {
    type StartStreamStream =
        Pin<Box<dyn Stream<Item = Result<ConnInfo, tonic::Status>> + Send + 'static>>;

    async fn start_stream(
        &self,
        request: tonic::Request<tonic::Streaming<ConnInfo>>,
    ) -> Result<tonic::Response<Self::StartStreamStream>, tonic::Status> {
        let Some(outbound) = self.0.take_outbound() else {
            return Err(tonic::Status::already_exists(
                "the broker stream is already open",
            ));
        };
        let broker = self.0.clone();
        let inbound = request.into_inner();
        tokio::spawn(async move { broker.run_inbound(inbound).await });
        Ok(tonic::Response::new(Box::pin(outbound.map(Ok))))
    }
}
