//! A plugin whose every output is hostile to its host (issue 22, holes 7 and 8): terminal
//! escapes ([`hostile_text`](tether_tests::hostile_text)) in each text a plugin controls, and server streams of 1 MiB
//! messages.
//!
//! - Before the handshake: a stray stdout line, and stderr lines as plain text, as `[WARN]`
//!   text and as hclog JSON (message, a field's key and a field's value).
//! - Server reflection lists a service whose name is hostile.
//! - `proto.KV/Get` fails with a hostile gRPC message; first it writes a `[WARN]` line to
//!   stderr and one to stdout (both through GRPCStdio).
//! - `proto.KV/Put` of key `crash` writes a hostile stderr line and exits 3 during the call;
//!   of key `broker-flood:N` serves `N` fresh broker ids one after another, stopping each at
//!   once: the host receives `N` connection infos nobody claims.
//! - `tether.agent.v1.Executor/Execute` answers hostile strings (for JSON output).
//! - `tether.agent.v1.Host/FetchArtifact` of name `flood:N` streams `N` chunks of
//!   [`CHUNK_BYTES`] (`flood:0`: without end); `stall` sends one chunk and never ends.
//!
//! `hostile-plugin exit-early` prints its hostile stdout and stderr and exits 1 before the
//! handshake.

use std::io::Write as _;
use std::pin::Pin;
use std::process::ExitCode;

use prost::Message as _;
use tether_agent::v1::executor_server::{Executor, ExecutorServer};
use tether_agent::v1::host_server::{Host, HostServer};
use tether_agent::v1::{
    Ack, ArtifactChunk, ExecuteRequest, ExecuteResponse, FetchArtifactRequest, LogLine, Phase,
    ProgressReport,
};
use tether_examples::kv::kv_server::{Kv, KvServer};
use tether_examples::kv::{Empty, GetRequest, GetResponse, PutRequest};
use tether_tests::hostile_text::hostile;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// The size of each chunk of a `FetchArtifact` flood.
const CHUNK_BYTES: usize = 1024 * 1024;

fn main() -> ExitCode {
    print_before_the_handshake();
    if std::env::args().nth(1).as_deref() == Some("exit-early") {
        return ExitCode::FAILURE;
    }
    let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").app_version(1);
    let plugin = tether_sdk::Plugin::new(options);
    let hostile = Hostile {
        broker: plugin.broker(),
    };
    plugin
        .add_service(KvServer::new(hostile.clone()))
        .add_service(ExecutorServer::new(hostile.clone()))
        .add_service(HostServer::new(hostile))
        .file_descriptor_set(tether_examples::kv::FILE_DESCRIPTOR_SET)
        .file_descriptor_set(tether_agent::v1::FILE_DESCRIPTOR_SET)
        .file_descriptor_set(hostile_service_descriptor())
        .run()
}

fn print_before_the_handshake() {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{}", hostile("stray-stdout"));
    let _ = stdout.flush();
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{}", hostile("stderr-plain").replace('\n', " "));
    let _ = writeln!(
        stderr,
        "[WARN] {}",
        hostile("stderr-warn").replace('\n', " ")
    );
    let hclog = serde_json::json!({
        "@level": "warn",
        "@message": hostile("hclog-message"),
        "@module": hostile("hclog-module"),
        hostile("hclog-key"): hostile("hclog-value"),
    });
    let _ = writeln!(stderr, "{hclog}");
}

/// A file descriptor set whose one service has a hostile name, leaked (reflection keeps it for
/// the life of the process).
fn hostile_service_descriptor() -> &'static [u8] {
    let set = prost_types::FileDescriptorSet {
        file: vec![prost_types::FileDescriptorProto {
            name: Some("hostile.proto".into()),
            package: Some("hostile".into()),
            service: vec![prost_types::ServiceDescriptorProto {
                name: Some(hostile("reflection-name").replace('\n', " ")),
                ..Default::default()
            }],
            syntax: Some("proto3".into()),
            ..Default::default()
        }],
    };
    Box::leak(set.encode_to_vec().into_boxed_slice())
}

#[derive(Clone)]
struct Hostile {
    broker: tether_sdk::GrpcBroker,
}

#[tonic::async_trait]
impl Kv for Hostile {
    async fn get(&self, _request: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        eprintln!("[WARN] {}", hostile("grpc-stdio-stderr").replace('\n', " "));
        println!("{}", hostile("grpc-stdio-stdout").replace('\n', " "));
        Err(Status::permission_denied(hostile("grpc-error")))
    }

    async fn put(&self, request: Request<PutRequest>) -> Result<Response<Empty>, Status> {
        let key = request.into_inner().key;
        if let Some(n) = key.strip_prefix("broker-flood:") {
            let n: u32 = n
                .parse()
                .map_err(|_| Status::invalid_argument("broker-flood:N"))?;
            for _ in 0..n {
                let id = self.broker.next_id();
                let served = self
                    .broker
                    .accept_and_serve(id, KvServer::new(self.clone()))
                    .await
                    .map_err(|e| Status::internal(e.to_string()))?;
                served.stop().await;
            }
            return Ok(Response::new(Empty {}));
        }
        if key == "crash" {
            // Straight to the stderr pipe (GRPCStdio would not deliver it before the exit).
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "{}", hostile("crash-stderr"));
            let _ = stderr.flush();
            std::process::exit(3);
        }
        Ok(Response::new(Empty {}))
    }
}

#[tonic::async_trait]
impl Executor for Hostile {
    async fn execute(
        &self,
        _request: Request<ExecuteRequest>,
    ) -> Result<Response<ExecuteResponse>, Status> {
        Ok(Response::new(ExecuteResponse {
            phase: Phase::Failed.into(),
            // Not JSON: a hostile plugin sends what it likes.
            outputs_json: hostile("json-output"),
            message: hostile("step-message"),
        }))
    }
}

type Chunks = Pin<Box<dyn Stream<Item = Result<ArtifactChunk, Status>> + Send>>;

#[tonic::async_trait]
impl Host for Hostile {
    async fn report_progress(&self, _: Request<ProgressReport>) -> Result<Response<Ack>, Status> {
        Ok(Response::new(Ack {}))
    }

    async fn log(&self, _: Request<LogLine>) -> Result<Response<Ack>, Status> {
        Ok(Response::new(Ack {}))
    }

    type FetchArtifactStream = Chunks;

    async fn fetch_artifact(
        &self,
        request: Request<FetchArtifactRequest>,
    ) -> Result<Response<Chunks>, Status> {
        let name = request.into_inner().name;
        let chunk = ArtifactChunk {
            data: vec![b'x'; CHUNK_BYTES],
            total_size: 0,
        };
        if name == "stall" {
            let first = tokio_stream::once(Ok(chunk));
            let stream = tokio_stream::StreamExt::chain(first, tokio_stream::pending());
            return Ok(Response::new(Box::pin(stream)));
        }
        let Some(count) = name
            .strip_prefix("flood:")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            return Err(Status::invalid_argument("name: flood:N or stall"));
        };
        let chunks = std::iter::repeat_n((), if count == 0 { usize::MAX } else { count })
            .map(move |()| Ok(chunk.clone()));
        Ok(Response::new(Box::pin(tokio_stream::iter(chunks))))
    }
}
