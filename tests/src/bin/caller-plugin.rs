//! A tether-sdk plugin that calls another catalog plugin through its host, for the
//! plugin-to-plugin tests (`tests/plugin_calls.rs`). Serves the KV contract (cookie
//! `BASIC_PLUGIN=hello`):
//!
//! - `Get "PLUGIN:KEY"`: opens a connection to catalog plugin `PLUGIN` through the host
//!   (`GrpcBroker::open_plugin`) and answers what that plugin's `proto.KV/Get KEY` answers;
//!   a refusal comes back with the host's status code and message.
//! - `Put`: stores nothing (`Unimplemented`).

use std::process::ExitCode;

use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::kv_server::{Kv, KvServer};
use tether_examples::kv::{Empty, GetRequest, GetResponse, PutRequest};
use tether_sdk::{GrpcBroker, GrpcBrokerError};
use tonic::{Request, Response, Status};

fn main() -> ExitCode {
    let plugin = tether_sdk::Plugin::new(
        tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").app_version(1),
    );
    let broker = plugin.broker();
    plugin.add_service(KvServer::new(Caller { broker })).run()
}

struct Caller {
    broker: GrpcBroker,
}

#[tonic::async_trait]
impl Kv for Caller {
    async fn get(&self, request: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        let probe = request.into_inner().key;
        let (plugin, key) = probe
            .split_once(':')
            .ok_or_else(|| Status::invalid_argument("expected PLUGIN:KEY"))?;
        let channel = self.broker.open_plugin(plugin).await.map_err(|e| match e {
            GrpcBrokerError::PluginRefused { status, .. } => *status,
            other => Status::unavailable(other.to_string()),
        })?;
        KvClient::new(channel)
            .get(GetRequest {
                key: key.to_owned(),
            })
            .await
    }

    async fn put(&self, _: Request<PutRequest>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("the caller plugin stores nothing"))
    }
}
