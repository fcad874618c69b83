//! `counter-bench summary`: `broker=… unary_us_p50=… unary_us_p99=… callback_us_p50=…
//! callback_us_p99=… [host_service_us_p50=… host_service_us_p99=…]`.
//!
//! A plain `Get`; a callback `Put` (host→plugin→host→plugin→host, including the listener, the
//! ConnInfo exchange and the plugin's dial with its TLS handshake); and (with
//! `--host-service`) a `Put` through the host service, whose connection the plugin keeps (the
//! round trip without connection set-up). The three are interleaved. `broker=` says which
//! broker mode was negotiated. With `--compare-modes` a second plugin, with multiplexing
//! offered, is measured interleaved with the first; its keys start with `mux_`.

use std::time::{Duration, Instant};

use tether_broker::PluginClient;
use tether_examples::counter::counter_client::CounterClient;
use tether_examples::counter::{GetRequest, PutRequest};

use crate::callback::{BoxError, put};

/// One plugin's samples in [`run`].
#[derive(Default)]
struct Samples {
    unary: Vec<Duration>,
    callback: Vec<Duration>,
    hosted: Vec<Duration>,
}

pub(crate) async fn run(
    plugins: &[&PluginClient],
    calls: u64,
    host_service: bool,
) -> Result<(), BoxError> {
    const KEY: &str = "bench";
    let mut targets: Vec<_> = plugins
        .iter()
        .map(|p| {
            (
                p.broker(),
                CounterClient::new(p.channel()),
                Samples::default(),
            )
        })
        .collect();
    // Interleaved, so that all measurements (and all plugins) see the same machine load.
    for _ in 0..calls {
        for (broker, counter, samples) in &mut targets {
            let t0 = Instant::now();
            counter.get(GetRequest { key: KEY.into() }).await?;
            samples.unary.push(t0.elapsed());

            let t0 = Instant::now();
            put(broker, counter, KEY, 1).await?;
            samples.callback.push(t0.elapsed());

            if host_service {
                let t0 = Instant::now();
                counter
                    .put(PutRequest {
                        add_server: 0,
                        key: KEY.into(),
                        value: 1,
                    })
                    .await?;
                samples.hosted.push(t0.elapsed());
            }
        }
    }
    let mut line = Vec::new();
    for (i, (broker, _, samples)) in targets.iter_mut().enumerate() {
        let prefix = if i == 0 { "" } else { "mux_" };
        line.push(format!("{prefix}broker={}", broker.mode()));
        for (name, v) in [
            ("unary", &mut samples.unary),
            ("callback", &mut samples.callback),
            ("host_service", &mut samples.hosted),
        ] {
            if v.is_empty() {
                continue;
            }
            v.sort_unstable();
            line.push(format!(
                "{prefix}{name}_us_p50={:.1} {prefix}{name}_us_p99={:.1}",
                micros(percentile(v, 0.5)),
                micros(percentile(v, 0.99)),
            ));
        }
    }
    println!("{}", line.join(" "));
    Ok(())
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Nearest-rank percentile of sorted durations.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
