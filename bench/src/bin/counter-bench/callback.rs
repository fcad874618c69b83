//! The callback go-plugin's example makes: a `Put` whose `AddHelper` the host serves on a
//! fresh broker id for that call only.

use tether_broker::GrpcBroker;
use tether_broker::telemetry::TracedChannel;
use tether_examples::adder::Adder;
use tether_examples::counter::PutRequest;
use tether_examples::counter::add_helper_server::AddHelperServer;
use tether_examples::counter::counter_client::CounterClient;

/// Any error of a run.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `Put` as go-plugin's example does it: `AddHelper` served on a fresh id for this call only.
pub(crate) async fn put(
    broker: &GrpcBroker,
    counter: &mut CounterClient<TracedChannel>,
    key: &str,
    value: i64,
) -> Result<(), BoxError> {
    let id = broker.next_id();
    let served = broker
        .accept_and_serve(id, AddHelperServer::new(Adder))
        .await?;
    let result = counter
        .put(PutRequest {
            add_server: id,
            key: key.to_owned(),
            value,
        })
        .await;
    drop(served);
    result.map_err(|status| format!("put {key:?} failed (plugin answered {status})"))?;
    Ok(())
}
