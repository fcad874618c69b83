//! Checks through a real host launch (`tether_broker`): reflection (§7), the broker stream and
//! callbacks in both modes (§8), stdio (§9), and `GRPCController.Shutdown` (§6.1).

use std::time::{Duration, Instant};

use tether_broker::callbacks::BrokerMode;
use tether_broker::{PluginClient, ShutdownOutcome};
use tether_proto::plugin::grpc_broker_client::GrpcBrokerClient;
use tether_proto::plugin::grpc_stdio_client::GrpcStdioClient;
use tonic::{Request, Response, Status};

use super::counter::add_helper_server::{AddHelper, AddHelperServer};
use super::counter::counter_client::CounterClient;
use super::counter::{GetRequest, PutRequest, SumRequest, SumResponse};
use super::report::{CheckResult, Level, fail, not_applicable, pass};
use super::subject::Subject;
use crate::descriptors;

/// How long a probe of an optional streaming service waits for its answer: a stream that is
/// open but has nothing to say yet does not answer at all.
const STREAM_PROBE_WAIT: Duration = Duration::from_secs(1);

/// How long one callback round trip may take (the broker's dial waits 5 s itself).
const CALLBACK_TIMEOUT: Duration = Duration::from_secs(15);

/// The host's `AddHelper` of go-plugin's counter contract.
struct Adder;

#[tonic::async_trait]
impl AddHelper for Adder {
    async fn sum(&self, request: Request<SumRequest>) -> Result<Response<SumResponse>, Status> {
        let SumRequest { a, b } = request.into_inner();
        Ok(Response::new(SumResponse { r: a + b }))
    }
}

/// Everything checked through a host launch, in order; the launch's failure fails them all.
pub(crate) async fn all(subject: &Subject) -> Vec<CheckResult> {
    let client = match start(subject, false, false).await {
        Ok(client) => client,
        Err(e) => {
            let failed = || {
                fail(
                    format!("a tether host cannot start it: {e}"),
                    "see the launch checks above",
                )
            };
            return vec![
                CheckResult::new("reflection", "§7", Level::Optional, failed()),
                CheckResult::new("callback, default mode", "§8.2", Level::Required, failed()),
                CheckResult::new("callback, multiplexed", "§8.3", Level::Required, failed()),
                CheckResult::new("broker stream", "§8.1", Level::Required, failed()),
                CheckResult::new("GRPCStdio", "§9", Level::Optional, failed()),
                CheckResult::new(
                    "Shutdown within the grace",
                    "§6.1",
                    Level::Required,
                    failed(),
                ),
            ];
        }
    };
    let mut results = vec![reflection(&client).await];
    results.push(callback_default(subject, &client).await);
    results.push(callback_multiplexed(subject).await);
    results.push(broker_stream(&client).await);
    results.push(stdio(&client).await);
    results.push(shutdown(subject, client).await);
    results
}

async fn start(
    subject: &Subject,
    plaintext: bool,
    multiplex: bool,
) -> Result<PluginClient, String> {
    let mut builder = subject.host_builder()?.multiplex(multiplex);
    if plaintext {
        builder = builder.plaintext();
    }
    builder.start().await.map_err(|e| e.to_string())
}

async fn reflection(client: &PluginClient) -> CheckResult {
    let outcome = match descriptors::list_services(client.channel().into_inner()).await {
        Ok(services) => pass(services.join(", ")),
        Err(e) => fail(
            format!("not served: {e}"),
            "serve grpc.reflection.v1 (and v1alpha) describing your services, so tools need no .proto",
        ),
    };
    CheckResult::new("reflection", "§7", Level::Optional, outcome)
}

/// Whether `client` serves go-plugin's `proto.Counter`; then one `Put` through a callback and
/// the `Get` that proves the host's `AddHelper` was used.
/// Every request carries `-H`'s metadata.
async fn counter_round_trip(
    subject: &Subject,
    client: &PluginClient,
) -> Result<Option<String>, String> {
    let broker = client.broker();
    let id = broker.next_id();
    let served = broker
        .accept_and_serve(id, AddHelperServer::new(Adder))
        .await
        .map_err(|e| e.to_string())?;
    let key = "tether-conformance";
    let mut counter = CounterClient::new(client.channel());
    let before = match counter
        .get(with_metadata(subject, GetRequest { key: key.into() }))
        .await
    {
        Err(status) if status.code() == tonic::Code::Unimplemented => return Ok(None),
        Err(status) => return Err(format!("Counter.Get: {status}")),
        Ok(r) => r.into_inner().value,
    };
    let put = PutRequest {
        add_server: id,
        key: key.into(),
        value: 5,
    };
    tokio::time::timeout(CALLBACK_TIMEOUT, counter.put(with_metadata(subject, put)))
        .await
        .map_err(|_| format!("Counter.Put did not answer within {CALLBACK_TIMEOUT:?}"))?
        .map_err(|status| format!("Counter.Put: {}", status.message()))?;
    drop(served);
    let after = counter
        .get(with_metadata(subject, GetRequest { key: key.into() }))
        .await
        .map_err(|s| format!("Counter.Get: {s}"))?
        .into_inner()
        .value;
    if after != before + 5 {
        return Err(format!("{before} + 5 gave {after}"));
    }
    Ok(Some(format!(
        "Counter.Put dialled the host's AddHelper on broker id {id} ({} mode)",
        client.broker_mode()
    )))
}

/// `message` with `-H`'s metadata.
fn with_metadata<T>(subject: &Subject, message: T) -> Request<T> {
    Request::from_parts(subject.metadata.clone(), Default::default(), message)
}

const CALLBACK_REMEDY: &str = "serve plugin.GRPCBroker/StartStream; to reach id N, wait for the host's ConnInfo for N and connect to its address with the same AutoMTLS identities (multiplexed: knock, wait for the ack, open a stream)";

async fn callback_default(subject: &Subject, client: &PluginClient) -> CheckResult {
    let outcome = match counter_round_trip(subject, client).await {
        Ok(None) => not_applicable(
            "the plugin does not serve go-plugin's proto.Counter; test its own callbacks with tether-sdk-test",
        ),
        Ok(Some(seen)) => pass(seen),
        Err(tls_error) => match plaintext_round_trip(subject).await {
            Ok(Some(_)) => not_applicable(format!(
                "go-plugin ≤ 1.4.3 flaw: works in plaintext, fails under AutoMTLS (its brokered dials use TLS server name `unused`; upgrade go-plugin): {tls_error}"
            )),
            _ => fail(tls_error, CALLBACK_REMEDY),
        },
    };
    CheckResult::new("callback, default mode", "§8.2", Level::Required, outcome)
}

async fn plaintext_round_trip(subject: &Subject) -> Result<Option<String>, String> {
    let client = start(subject, true, false).await?;
    let result = counter_round_trip(subject, &client).await;
    let _ = client.shutdown().await;
    result
}

async fn callback_multiplexed(subject: &Subject) -> CheckResult {
    let outcome = match start(subject, false, true).await {
        Err(e) => fail(
            format!("a multiplexing host cannot start it: {e}"),
            "accept or decline PLUGIN_MULTIPLEX_GRPC (§3.3)",
        ),
        Ok(client) if client.broker_mode() != BrokerMode::Multiplexed => {
            let _ = client.shutdown().await;
            not_applicable("the plugin declined multiplexing (optional)")
        }
        Ok(client) => {
            let result = counter_round_trip(subject, &client).await;
            let _ = client.shutdown().await;
            match result {
                Ok(None) => {
                    not_applicable("multiplexing accepted; the plugin does not serve proto.Counter")
                }
                Ok(Some(seen)) => pass(seen),
                Err(e) => fail(e, CALLBACK_REMEDY),
            }
        }
    };
    CheckResult::new("callback, multiplexed", "§8.3", Level::Required, outcome)
}

/// A second `StartStream` (the host's own is open): answered or refused as already open, but
/// not unimplemented.
async fn broker_stream(client: &PluginClient) -> CheckResult {
    let mut broker = GrpcBrokerClient::new(client.channel());
    let call = broker.start_stream(tokio_stream::empty());
    let outcome = match tokio::time::timeout(STREAM_PROBE_WAIT, call).await {
        Ok(Err(status)) if status.code() == tonic::Code::Unimplemented => fail(
            "plugin.GRPCBroker is not served",
            "serve plugin.GRPCBroker/StartStream, even when the plugin makes no callbacks (hosts open it at start)",
        ),
        Ok(Err(status)) => pass(format!("served (a second stream: {})", status.code())),
        Ok(Ok(_)) | Err(_) => pass("served"),
    };
    CheckResult::new("broker stream", "§8.1", Level::Required, outcome)
}

async fn stdio(client: &PluginClient) -> CheckResult {
    let mut stdio = GrpcStdioClient::new(client.channel());
    let call = stdio.stream_stdio(());
    let outcome = match tokio::time::timeout(STREAM_PROBE_WAIT, call).await {
        Ok(Err(status)) if status.code() == tonic::Code::Unimplemented => fail(
            "plugin.GRPCStdio is not served",
            "serve plugin.GRPCStdio/StreamStdio and send what the plugin writes to stdout after the handshake",
        ),
        _ => pass("served"),
    };
    CheckResult::new("GRPCStdio", "§9", Level::Optional, outcome)
}

async fn shutdown(subject: &Subject, client: PluginClient) -> CheckResult {
    let began = Instant::now();
    let outcome = match client.shutdown().await {
        Ok(ShutdownOutcome::Graceful(status)) => pass(format!(
            "exited ({status}) {:.0?} after GRPCController.Shutdown (grace {:?})",
            began.elapsed(),
            subject.grace
        )),
        Ok(other) => fail(
            format!(
                "did not exit within {:?} of GRPCController.Shutdown: {other:?}",
                subject.grace
            ),
            "answer GRPCController.Shutdown, stop serving and exit by yourself within the host's grace period (go-plugin: 2 s)",
        ),
        Err(e) => fail(e.to_string(), "answer GRPCController.Shutdown and exit"),
    };
    CheckResult::new(
        "Shutdown within the grace",
        "§6.1",
        Level::Required,
        outcome,
    )
}
