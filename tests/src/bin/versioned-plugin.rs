//! A plugin that says which version it is, for the upgrade tests: `versioned-plugin VERSION`
//! serves the KV contract (cookie `BASIC_PLUGIN=hello`) and answers
//!
//! - `Get "version:"`: `VERSION`, its first argument (a manifest's `args`), so that two
//!   manifests of one binary are two versions a caller tells apart;
//! - `Get "pid:"`: its process id;
//! - `Put`: nothing kept, `OK`.

use std::process::ExitCode;

use tether_examples::kv::kv_server::{Kv, KvServer};
use tether_examples::kv::{Empty, GetRequest, GetResponse, PutRequest};
use tonic::{Request, Response, Status};

fn main() -> ExitCode {
    let Some(version) = std::env::args().nth(1) else {
        eprintln!("usage: versioned-plugin VERSION");
        return ExitCode::from(2);
    };
    tether_sdk::Plugin::new(tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").app_version(1))
        .add_service(KvServer::new(Versioned { version }))
        .run()
}

struct Versioned {
    version: String,
}

#[tonic::async_trait]
impl Kv for Versioned {
    async fn get(&self, request: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        let value = match request.into_inner().key.as_str() {
            "version:" => self.version.clone(),
            "pid:" => std::process::id().to_string(),
            other => return Err(Status::not_found(format!("no key {other:?}"))),
        };
        Ok(Response::new(GetResponse {
            value: value.into_bytes(),
        }))
    }

    async fn put(&self, _: Request<PutRequest>) -> Result<Response<Empty>, Status> {
        Ok(Response::new(Empty {}))
    }
}
