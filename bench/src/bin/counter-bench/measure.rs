//! `counter-bench measure callback`: one line, `unary_ns=… callback_ns=…` (comma-separated
//! nanoseconds): after W untimed pairs, N timed pairs of a plain `Get` and a callback `Put`,
//! interleaved so both see the same load.

use std::io::Write as _;
use std::time::{Duration, Instant};

use tether_broker::GrpcBroker;
use tether_broker::telemetry::TracedChannel;
use tether_examples::counter::GetRequest;
use tether_examples::counter::counter_client::CounterClient;

use crate::callback::{BoxError, put};

/// `measure callback`: `warmup` untimed, then `calls` timed (`Get`, callback `Put`) pairs.
pub(crate) async fn callback(
    broker: &GrpcBroker,
    counter: &mut CounterClient<TracedChannel>,
    calls: u64,
    warmup: u64,
) -> Result<(), BoxError> {
    // Not `bench`: the harness runs the KV measurements in the same directory, and the KV
    // plugins store `kv_bench` there too.
    const KEY: &str = "callback_bench";
    let mut unary = Vec::new();
    let mut callback = Vec::new();
    for i in 0..warmup + calls {
        let t0 = Instant::now();
        counter.get(GetRequest { key: KEY.into() }).await?;
        let t1 = Instant::now();
        put(broker, counter, KEY, 1).await?;
        let t2 = Instant::now();
        if i >= warmup {
            unary.push(t1 - t0);
            callback.push(t2 - t1);
        }
    }
    let ns = |samples: &[Duration]| {
        samples
            .iter()
            .map(|d| d.as_nanos().to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(
        stdout,
        "unary_ns={} callback_ns={}",
        ns(&unary),
        ns(&callback)
    )?;
    stdout.flush()?;
    Ok(())
}
