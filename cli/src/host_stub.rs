//! `--host-proto`: host services the plugin can call back, served by a stub that records
//! each call on stderr (`tether: host call {"method":…,"metadata":…,"request":…}`) and
//! answers with the `--host-reply` given for the method, else the response type's empty
//! message. Unary and server-streaming methods are served (a stream answers one message);
//! client-streaming ones answer `UNIMPLEMENTED`, saying so.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use prost_reflect::{DescriptorPool, DynamicMessage, MethodDescriptor};
use tonic::body::Body;
use tonic::codegen::{Service, http};
use tonic::metadata::KeyAndValueRef;
use tonic::server::{Grpc, ServerStreamingService, UnaryService};

use crate::descriptors::split_method;
use crate::dynamic_codec::DynamicCodec;
use crate::error::CliError;
use crate::json_messages::{parse_request, to_json};

/// The services of `--host-proto` files and their answers.
#[derive(Debug, Clone)]
pub(crate) struct HostStub {
    /// By path, `/SERVICE/METHOD`.
    methods: Arc<HashMap<String, Answer>>,
    /// Every call served so far, as `SERVICE/METHOD` (shared by every clone and answer).
    calls: Calls,
}

/// The calls a stub served, in order.
type Calls = Arc<Mutex<Vec<String>>>;

/// One method: its descriptor and the message it answers with.
#[derive(Debug, Clone)]
struct Answer {
    method: MethodDescriptor,
    reply: DynamicMessage,
    calls: Calls,
}

impl HostStub {
    /// Every service of `pool` (the `--host-proto` files and their imports), answering each
    /// method with its `--host-reply` (`SERVICE/METHOD=JSON`) or the empty response.
    ///
    /// # Errors
    /// A reply that is not `SERVICE/METHOD=JSON`, names a method the files do not declare,
    /// or whose JSON does not fit the method's response type.
    pub(crate) fn new(pool: &DescriptorPool, replies: &[String]) -> Result<Self, CliError> {
        let calls = Calls::default();
        let mut methods: HashMap<String, Answer> = pool
            .services()
            .flat_map(|s| s.methods().collect::<Vec<_>>())
            .map(|method| {
                let reply = DynamicMessage::new(method.output());
                let calls = Arc::clone(&calls);
                (
                    path(&method),
                    Answer {
                        method,
                        reply,
                        calls,
                    },
                )
            })
            .collect();
        for reply in replies {
            let Some((name, json)) = reply.split_once('=') else {
                return Err(CliError::Usage(format!(
                    "--host-reply {reply:?} is not SERVICE/METHOD=JSON (e.g. proto.AddHelper/Sum={{\"r\":\"3\"}})"
                )));
            };
            let (service, method) = split_method(name)?;
            let key = format!("/{service}/{method}");
            let Some(answer) = methods.get_mut(&key) else {
                let mut known: Vec<&str> = methods.keys().map(|k| &k[1..]).collect();
                known.sort_unstable();
                return Err(CliError::Usage(format!(
                    "--host-reply names {name}, which no --host-proto file declares; they declare: {}",
                    if known.is_empty() {
                        "no method".to_owned()
                    } else {
                        known.join(", ")
                    }
                )));
            };
            answer.reply = parse_request(&answer.method.output(), json)?;
        }
        Ok(Self {
            methods: Arc::new(methods),
            calls,
        })
    }

    /// The calls served so far (by this stub and its clones), as `SERVICE/METHOD`, in order.
    pub(crate) fn calls(&self) -> Vec<String> {
        // A poisoned lock only means a recording thread panicked; its list is still whole.
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The stub as host services: one route per method.
    pub(crate) fn routes(&self) -> tonic::service::Routes {
        let mut router = axum::Router::new();
        for path in self.methods.keys() {
            router = router.route_service(path, self.clone());
        }
        tonic::service::Routes::from(router)
    }
}

/// `/SERVICE/METHOD`, the method's HTTP/2 path.
fn path(method: &MethodDescriptor) -> String {
    format!("/{}/{}", method.parent_service().full_name(), method.name())
}

/// Headers every gRPC call carries, left out of the record.
const TRANSPORT_HEADERS: [&str; 6] = [
    "te",
    "content-type",
    "user-agent",
    "grpc-accept-encoding",
    "grpc-encoding",
    "grpc-timeout",
];

/// Keeps the call in the stub's list and writes it to stderr as one JSON object
/// (terminal-safe: it quotes the plugin).
fn record(answer: &Answer, request: &tonic::Request<DynamicMessage>) {
    answer
        .calls
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(path(&answer.method)[1..].to_owned());
    let metadata: serde_json::Map<String, serde_json::Value> = request
        .metadata()
        .iter()
        .map(|entry| match entry {
            KeyAndValueRef::Ascii(key, value) => (key.as_str(), value.as_encoded_bytes()),
            KeyAndValueRef::Binary(key, value) => (key.as_str(), value.as_encoded_bytes()),
        })
        .filter(|(key, _)| !TRANSPORT_HEADERS.contains(key))
        .map(|(key, value)| (key.to_owned(), String::from_utf8_lossy(value).into()))
        .collect();
    let request = to_json(request.get_ref())
        .ok()
        .and_then(|json| serde_json::from_str::<serde_json::Value>(&json).ok())
        .unwrap_or(serde_json::Value::Null);
    let line = serde_json::json!({
        "method": path(&answer.method)[1..],
        "metadata": metadata,
        "request": request,
    });
    if let Ok(json) = crate::output::json(&line) {
        eprintln!("tether: host call {json}");
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl UnaryService<DynamicMessage> for Answer {
    type Response = DynamicMessage;
    type Future = std::future::Ready<Result<tonic::Response<DynamicMessage>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<DynamicMessage>) -> Self::Future {
        record(self, &request);
        std::future::ready(Ok(tonic::Response::new(self.reply.clone())))
    }
}

impl ServerStreamingService<DynamicMessage> for Answer {
    type Response = DynamicMessage;
    type ResponseStream = tokio_stream::Once<Result<DynamicMessage, tonic::Status>>;
    type Future = std::future::Ready<Result<tonic::Response<Self::ResponseStream>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<DynamicMessage>) -> Self::Future {
        record(self, &request);
        std::future::ready(Ok(tonic::Response::new(tokio_stream::once(Ok(self
            .reply
            .clone())))))
    }
}

impl Service<http::Request<axum::body::Body>> for HostStub {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<axum::body::Body>) -> Self::Future {
        // The router sends only the paths of `methods` here.
        let Some(answer) = self.methods.get(request.uri().path()).cloned() else {
            return Box::pin(async {
                Ok(tonic::Status::unimplemented("no such host service").into_http())
            });
        };
        let codec = DynamicCodec {
            decode_as: answer.method.input(),
        };
        let mut grpc = Grpc::new(codec);
        let method = &answer.method;
        if method.is_client_streaming() {
            let name = path(method);
            return Box::pin(async move {
                Ok(tonic::Status::unimplemented(format!(
                    "{} takes a stream of requests, which tether's host-service stub does not serve",
                    &name[1..]
                ))
                .into_http())
            });
        }
        if method.is_server_streaming() {
            Box::pin(async move { Ok(grpc.server_streaming(answer, request).await) })
        } else {
            Box::pin(async move { Ok(grpc.unary(answer, request).await) })
        }
    }
}
