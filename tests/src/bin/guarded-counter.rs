//! A plugin that needs everything a host gives: go-plugin's counter contract (`proto.Counter`,
//! cookie `BASIC_PLUGIN=hello`), guarded. For `tether call`'s `--env`, `--secret`, `--config`,
//! `-H` and `--host-proto` (tests/tests/cli_host.rs).
//!
//! - It starts only with `GUARDED_COUNTER_ENABLED=true` in its environment (as a Vault plugin
//!   wants `VAULT_PLUGIN_AUTOMTLS_ENABLED`); else it says so on stderr and exits 1.
//! - Every call must carry the metadata `authorization: Bearer TOKEN`, TOKEN being the granted
//!   secret `api-token`: `UNAUTHENTICATED` otherwise (`FAILED_PRECONDITION` with the SDK's
//!   message when the secret was not delivered).
//! - `Get{key}` answers the number in the config file `start` (0 without one).
//! - `Put{add_server, key, value}` asks the host's `AddHelper` (the host service when
//!   `add_server` is 0, else that broker id) for `Sum(value, value)` and fails with
//!   `FAILED_PRECONDITION` unless the answer is twice `value`.

use std::process::ExitCode;

use tether_examples::counter::add_helper_client::AddHelperClient;
use tether_examples::counter::counter_server::{Counter, CounterServer};
use tether_examples::counter::{Empty, GetRequest, GetResponse, PutRequest, SumRequest};
use tether_sdk::{ExposeSecret as _, GrpcBroker};
use tonic::{Request, Response, Status};

/// The variable that must be `true` for the plugin to start.
const ENABLED: &str = "GUARDED_COUNTER_ENABLED";

struct Guarded {
    broker: GrpcBroker,
}

/// Checks the call's `authorization` metadata against the secret `api-token`.
fn authorize<T>(request: &Request<T>) -> Result<(), Status> {
    let token = tether_sdk::secrets::read("api-token")
        .map_err(|e| Status::failed_precondition(e.to_string()))?;
    let expected = [b"Bearer ".as_slice(), token.expose_secret()].concat();
    match request.metadata().get("authorization") {
        Some(given) if given.as_bytes() == expected.as_slice() => Ok(()),
        Some(_) => Err(Status::unauthenticated("wrong authorization token")),
        None => Err(Status::unauthenticated(
            "send `authorization: Bearer TOKEN` metadata",
        )),
    }
}

#[tonic::async_trait]
impl Counter for Guarded {
    async fn get(&self, request: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        authorize(&request)?;
        let value = match tether_sdk::config::read_string("start") {
            Ok(text) => text
                .trim()
                .parse()
                .map_err(|e| Status::invalid_argument(format!("config `start`: {e}")))?,
            Err(_) => 0,
        };
        Ok(Response::new(GetResponse { value }))
    }

    async fn put(&self, request: Request<PutRequest>) -> Result<Response<Empty>, Status> {
        authorize(&request)?;
        let PutRequest {
            add_server, value, ..
        } = request.into_inner();
        let channel = if add_server == 0 {
            self.broker.host_services().await
        } else {
            self.broker.dial(add_server).await
        }
        .map_err(|e| Status::unavailable(format!("reaching the host's AddHelper: {e}")))?;
        let sum = AddHelperClient::new(channel)
            .sum(SumRequest { a: value, b: value })
            .await?
            .into_inner()
            .r;
        if Some(sum) != value.checked_mul(2) {
            return Err(Status::failed_precondition(format!(
                "the host's AddHelper answered {sum} for {value}+{value}"
            )));
        }
        Ok(Response::new(Empty {}))
    }
}

fn main() -> ExitCode {
    if std::env::var(ENABLED).as_deref() != Ok("true") {
        eprintln!("guarded-counter: set {ENABLED}=true to start it");
        return ExitCode::FAILURE;
    }
    let plugin = tether_sdk::Plugin::new(
        tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").app_version(1),
    );
    let broker = plugin.broker();
    plugin
        .add_service(CounterServer::new(Guarded { broker }))
        .file_descriptor_set(tether_examples::counter::FILE_DESCRIPTOR_SET)
        .run()
}
