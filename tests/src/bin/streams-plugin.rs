//! Serves the `streams.Streams` example service, and `streams.Exerciser`: runs the stream
//! checks against a `Streams` service the host serves on a broker id (plugin → host), and
//! serves `Streams` on a broker id of its own for the host to dial (host → plugin).

use std::process::ExitCode;

use tether_examples::streams::{self, StreamsService};
use tether_examples::streams_proto::exerciser_server::{Exerciser, ExerciserServer};
use tether_examples::streams_proto::streams_server::StreamsServer;
use tether_examples::streams_proto::{ExerciseReport, ExerciseRequest, ServeReply, ServeRequest};
use tether_sdk::GrpcBroker;
use tonic::{Request, Response, Status};

fn main() -> ExitCode {
    let plugin = tether_sdk::Plugin::new(
        tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").app_version(1),
    );
    let broker = plugin.broker();
    plugin
        .add_service(StreamsServer::new(StreamsService::default()))
        .add_service(ExerciserServer::new(ThroughBroker { broker }))
        .run()
}

struct ThroughBroker {
    broker: GrpcBroker,
}

#[tonic::async_trait]
impl Exerciser for ThroughBroker {
    async fn exercise(
        &self,
        request: Request<ExerciseRequest>,
    ) -> Result<Response<ExerciseReport>, Status> {
        let id = request.into_inner().streams_id;
        let channel = self
            .broker
            .dial(id)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let results = streams::exercise(channel).await;
        Ok(Response::new(ExerciseReport { results }))
    }

    async fn serve_streams(
        &self,
        _request: Request<ServeRequest>,
    ) -> Result<Response<ServeReply>, Status> {
        let id = self.broker.next_id();
        self.broker
            .accept_and_serve(id, StreamsServer::new(StreamsService::default()))
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?
            .detach();
        Ok(Response::new(ServeReply { streams_id: id }))
    }
}
