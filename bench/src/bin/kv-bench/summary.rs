//! `kv-bench summary`: one line, `startup_ms_p50=… call_us_p50=… call_us_p99=… calls_per_s=…`.
//!
//! Startup is spawn → first `Put` done (median over L launches); call_us is a sequential `Get`
//! of a 64-byte value (N calls on one plugin); calls_per_s is N `Get`s spread over C concurrent
//! tasks on one plugin. Percentiles are nearest-rank, as in `tests/go/kvhost`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tether_broker::telemetry::TracedChannel;
use tether_examples::kv::{GetRequest, PutRequest};

use crate::launcher::{BENCH_KEY, BENCH_VALUE, Failure, Launcher, interruptible, kv_client};

/// Measures and prints the line.
pub(crate) async fn run(
    launcher: &Launcher,
    calls: u64,
    launches: u64,
    concurrency: u64,
) -> Result<(), Failure> {
    let put = || PutRequest {
        key: BENCH_KEY.into(),
        value: BENCH_VALUE.to_vec(),
    };

    // Start-up: spawn → first call done.
    let mut startups = Vec::new();
    for launch in 1..=launches {
        let t0 = Instant::now();
        let plugin = interruptible(launcher.start()).await??;
        let mut kv = kv_client(plugin.channel());
        let result = interruptible(kv.put(put())).await;
        let elapsed = t0.elapsed();
        plugin.shutdown().await?;
        result?.map_err(|status| format!("bench launch {launch}: put failed: {status}"))?;
        startups.push(elapsed);
    }
    startups.sort_unstable();

    let plugin = interruptible(launcher.start()).await??;
    let measured = interruptible(measure_calls(plugin.channel(), put(), calls, concurrency)).await;
    plugin.shutdown().await?;
    let (mut latencies, per_second) = measured??;
    latencies.sort_unstable();

    println!(
        "startup_ms_p50={:.2} call_us_p50={:.1} call_us_p99={:.1} calls_per_s={:.1}",
        percentile(&startups, 0.5).as_secs_f64() * 1e3,
        percentile(&latencies, 0.5).as_secs_f64() * 1e6,
        percentile(&latencies, 0.99).as_secs_f64() * 1e6,
        per_second
    );
    Ok(())
}

/// Sequential latencies of `calls` `Get`s, then the rate of `calls` `Get`s over `concurrency`
/// tasks.
async fn measure_calls(
    channel: TracedChannel,
    put: PutRequest,
    calls: u64,
    concurrency: u64,
) -> Result<(Vec<Duration>, f64), Failure> {
    let mut kv = kv_client(channel.clone());
    kv.put(put)
        .await
        .map_err(|status| format!("bench put failed: {status}"))?;
    let get = || GetRequest {
        key: BENCH_KEY.into(),
    };

    let mut latencies = Vec::new();
    for _ in 0..calls {
        let t0 = Instant::now();
        let value = kv
            .get(get())
            .await
            .map_err(|status| format!("bench get failed: {status}"))?
            .into_inner()
            .value;
        latencies.push(t0.elapsed());
        if value.len() != BENCH_VALUE.len() {
            return Err(format!("bench get: got {} bytes, want 64", value.len()).into());
        }
    }

    let total = usize::try_from(calls).map_err(|_| "--calls is too large")?;
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (next, mut kv) = (Arc::clone(&next), kv_client(channel.clone()));
        tasks.spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < total {
                kv.get(get()).await?;
            }
            Ok::<_, tonic::Status>(())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined
            .map_err(|e| format!("bench task failed: {e}"))?
            .map_err(|status| format!("bench concurrent get failed: {status}"))?;
    }
    let per_second = calls as f64 / t0.elapsed().as_secs_f64();
    Ok((latencies, per_second))
}

/// Nearest-rank percentile of sorted durations.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
