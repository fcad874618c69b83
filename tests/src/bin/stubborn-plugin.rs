//! A tether-sdk KV plugin that will not stop: it starts a `sleep` grandchild that ignores
//! SIGTERM, and once its server has stopped (after `GRPCController.Shutdown` or SIGTERM) it
//! ignores SIGTERM itself and keeps running. Only SIGKILL to its process group ends both.

use tether_examples::kv::kv_server::{Kv, KvServer};
use tether_examples::kv::{Empty, GetRequest, GetResponse, PutRequest};
use tonic::{Request, Response, Status};

fn main() {
    let mut grandchild = std::process::Command::new("/bin/sh");
    grandchild
        .args(["-c", "trap '' TERM; exec sleep 3600"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    std::mem::forget(grandchild.spawn().expect("/bin/sh is installed"));
    let code = tether_sdk::Plugin::new(
        tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").app_version(1),
    )
    .add_service(KvServer::new(Stubborn))
    .run();
    // SAFETY: setting a signal's disposition to "ignore" has no preconditions.
    unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
    eprintln!("server stopped ({code:?}), but this plugin keeps running");
    tether_tests::misbehave::park_forever();
}

struct Stubborn;

#[tonic::async_trait]
impl Kv for Stubborn {
    async fn get(&self, request: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        Ok(Response::new(GetResponse {
            value: request.into_inner().key.into_bytes(),
        }))
    }

    async fn put(&self, _request: Request<PutRequest>) -> Result<Response<Empty>, Status> {
        Ok(Response::new(Empty {}))
    }
}
