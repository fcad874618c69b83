//! `kv-bench measure`: raw measurements for the `tether-bench` harness.
//!
//! Each metric prints one line of space-separated `key=value` pairs on stdout; sample lists are
//! comma-separated nanoseconds. `tests/go/kvhost measure` implements the same metrics with the
//! same arguments, keys and call sequence for go-plugin, so the harness compares like with like
//! and computes every statistic itself.
//!
//! | metric | what is timed | output |
//! |---|---|---|
//! | `launch --count L` | spawn → handshake → mTLS → first 64-byte `Put` done, L times (shutdown not timed) | `samples_ns=…` |
//! | `unary --calls N [--size B]` | N sequential `Get`s of a B-byte value (default 64) after `--warmup` unmeasured ones | `samples_ns=…` |
//! | `rate --calls N --concurrency C` | N `Get`s of a 64-byte value spread over C concurrent callers, after `--warmup` unmeasured ones spread the same way | `calls=N elapsed_ns=…` |
//! | `payload --size B --rounds K` | K × (`Put` of B bytes, `Get` of them back) after one unmeasured round | `bytes=… elapsed_ns=…` or `failed=CODE` |
//! | `plugin-rss` | VmRSS of the plugin process after one `Put` and one `Get` | `rss_kb=…` |
//! | `host-rss --plugins P` | this host's VmRSS and open descriptors with 1 and then P live plugins, each called once as it starts and once more when all P are live; the launches' time (tether only prints the descriptors and time) | `first_kb=… last_kb=… plugins=P [first_fds=… last_fds=… started_ns=…]` |
//! | `workflow --steps N --model plugin\|containers [--step PROGRAM] [--repeat R]` | N workflow steps end to end: launch + N `Put`s + shutdown of one plugin, or N one-shot `kv-step` sandboxes under gVisor (see `workflow.rs`), R times | `steps=N samples_ns=…` |
//! | `catalog --manifests M --use U --repeat R` | tether only: load a catalog of M manifests, then one `Put` on U of them through a lazy [`Supervisor`](tether_broker::Supervisor) (see `catalog.rs`) | `load_ns=… use_ns=… started=…` |
//!
//! `launch` honours the global `--sandbox` option (tether's confinement; go-plugin has none).
//!
//! `bytes` counts request and response payload (2 × B × K). A failed `payload` call (e.g. a
//! plugin's 4 MiB receive limit) prints `failed=` and the gRPC code name, and the status message
//! on stderr; the exit status is still 0, because a refused size is a result.

use std::time::{Duration, Instant};

use clap::Subcommand;
use tether_broker::PluginClient;
use tether_examples::kv::{GetRequest, PutRequest};

use crate::catalog::{self, CatalogRun};
use crate::launcher::{BENCH_KEY, BENCH_VALUE, Failure, Launcher, interruptible, kv_client};
use crate::samples::join_ns;
use crate::workflow;

/// Unmeasured `Get`s before `unary` and `rate` start timing (connection and allocator warm-up).
pub(crate) const DEFAULT_WARMUP_CALLS: u64 = 100;

/// The key `unary` writes and reads.
const UNARY_KEY: &str = "bench_unary";

/// Largest `unary --size`: 1 MiB (larger values are `payload`'s).
const UNARY_MAX_SIZE: u64 = 1 << 20;

/// The key `payload` writes and reads.
const PAYLOAD_KEY: &str = "bench_payload";

/// One metric of `kv-bench measure`.
#[derive(Debug, Subcommand)]
pub(crate) enum Metric {
    /// Spawn → first 64-byte `Put` done, COUNT times: `samples_ns=…`.
    Launch {
        /// Number of launches.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        count: u64,
    },
    /// Sequential `Get`s of a SIZE-byte value (64 by default) on one plugin: `samples_ns=…`.
    Unary {
        /// Number of timed calls.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        calls: u64,
        /// Untimed calls first.
        #[arg(long, default_value_t = DEFAULT_WARMUP_CALLS)]
        warmup: u64,
        /// Value size in bytes (the `Get` response carries it).
        #[arg(long, default_value_t = BENCH_VALUE.len() as u64, value_parser = clap::value_parser!(u64).range(1..=UNARY_MAX_SIZE))]
        size: u64,
    },
    /// 64-byte `Get`s over concurrent callers on one plugin: `calls=N elapsed_ns=…`.
    Rate {
        /// Number of timed calls in total.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        calls: u64,
        /// Concurrent callers (tasks sharing the plugin's connection).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        concurrency: u64,
        /// Untimed calls first, over the same concurrent callers.
        #[arg(long, default_value_t = DEFAULT_WARMUP_CALLS)]
        warmup: u64,
    },
    /// `Put` of SIZE bytes then `Get` of them back, ROUNDS times: `bytes=… elapsed_ns=…`.
    Payload {
        /// Value size in bytes (at most `tether_examples::MAX_VALUE_LEN`).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        size: u64,
        /// Timed rounds, after one untimed round.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        rounds: u64,
    },
    /// VmRSS of the plugin process after one `Put` and one `Get`: `rss_kb=…`.
    PluginRss,
    /// This host's VmRSS with one and with PLUGINS live plugins: `first_kb=… last_kb=… plugins=…`.
    HostRss {
        /// Live plugins at the second reading (at least 2).
        #[arg(long, value_parser = clap::value_parser!(u64).range(2..))]
        plugins: u64,
    },
    /// Load a catalog of MANIFESTS plugins and use USE of them, REPEAT times:
    /// `load_ns=… use_ns=… started=…`.
    Catalog {
        /// Manifests in the catalog.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        manifests: u64,
        /// Plugins used (started and called once) per repeat.
        #[arg(long = "use", value_parser = clap::value_parser!(u64).range(1..))]
        used: u64,
        /// Repeats.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        repeat: u64,
    },
    /// STEPS workflow steps end to end, as `Put`s to one long-lived plugin or as one gVisor
    /// sandbox per step (see `workflow.rs`), REPEAT times: `steps=N samples_ns=…`.
    Workflow {
        /// Steps per workflow.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        steps: u64,
        /// How the steps run.
        #[arg(long, value_enum)]
        model: workflow::Model,
        /// Timed workflows.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        repeat: u64,
        /// The one-shot step program (`kv-step`) of `--model containers`.
        #[arg(long = "step", value_name = "PROGRAM")]
        step_program: Option<std::path::PathBuf>,
    },
}

/// Measures `metric` and prints its line.
pub(crate) async fn run(launcher: &Launcher, metric: Metric) -> Result<(), Failure> {
    let line = match metric {
        Metric::Launch { count } => {
            let mut samples = Vec::new();
            for _ in 0..count {
                let t0 = Instant::now();
                let plugin = interruptible(launcher.start()).await??;
                let result = interruptible(put_small(&plugin)).await;
                let elapsed = t0.elapsed();
                plugin.shutdown().await?;
                result??;
                samples.push(elapsed);
            }
            format!("samples_ns={}", join_ns(&samples))
        }
        Metric::Unary {
            calls,
            warmup,
            size,
        } => {
            // The clap range bounds `size` by UNARY_MAX_SIZE, far below usize::MAX.
            let size = size as usize;
            with_plugin(launcher, async |plugin| {
                let mut kv = kv_client(plugin.channel());
                kv.put(PutRequest {
                    key: UNARY_KEY.into(),
                    value: vec![0x5a; size],
                })
                .await
                .map_err(|status| format!("put failed: {status}"))?;
                for _ in 0..warmup {
                    get_sized(&mut kv, UNARY_KEY, size).await?;
                }
                let mut samples = Vec::new();
                for _ in 0..calls {
                    let t0 = Instant::now();
                    get_sized(&mut kv, UNARY_KEY, size).await?;
                    samples.push(t0.elapsed());
                }
                Ok(format!("samples_ns={}", join_ns(&samples)))
            })
            .await?
        }
        Metric::Rate {
            calls,
            concurrency,
            warmup,
        } => {
            with_plugin(launcher, async |plugin| {
                put_small(plugin).await?;
                rate(plugin, warmup, concurrency).await?;
                let elapsed = rate(plugin, calls, concurrency).await?;
                Ok(format!("calls={calls} elapsed_ns={}", elapsed.as_nanos()))
            })
            .await?
        }
        Metric::Payload { size, rounds } => {
            let size = usize::try_from(size)
                .ok()
                .filter(|&s| s <= tether_examples::MAX_VALUE_LEN)
                .ok_or_else(|| {
                    format!(
                        "--size {size} is over the KV example's limit of {} bytes",
                        tether_examples::MAX_VALUE_LEN
                    )
                })?;
            with_plugin(launcher, async |plugin| payload(plugin, size, rounds).await).await?
        }
        Metric::PluginRss => {
            with_plugin(launcher, async |plugin| {
                put_small(plugin).await?;
                get_small(&mut kv_client(plugin.channel())).await?;
                let rss = vm_rss_kb(&format!("/proc/{}/status", plugin.pid()))?;
                Ok(format!("rss_kb={rss}"))
            })
            .await?
        }
        Metric::HostRss { plugins } => host_rss(launcher, plugins).await?,
        Metric::Workflow {
            steps,
            model,
            repeat,
            step_program,
        } => workflow::run(launcher, model, steps, repeat, step_program.as_deref()).await?,
        Metric::Catalog {
            manifests,
            used,
            repeat,
        } => {
            catalog::run(
                launcher,
                CatalogRun {
                    manifests,
                    used,
                    repeat,
                },
            )
            .await?
        }
    };
    println!("{line}");
    Ok(())
}

/// Starts one plugin, runs `work` on it, and shuts it down whatever `work` returned.
async fn with_plugin<F>(launcher: &Launcher, work: F) -> Result<String, Failure>
where
    F: AsyncFnOnce(&PluginClient) -> Result<String, Failure>,
{
    let plugin = interruptible(launcher.start()).await??;
    let result = interruptible(work(&plugin)).await;
    plugin.shutdown().await?;
    result?
}

/// `Put`s the 64-byte bench value.
async fn put_small(plugin: &PluginClient) -> Result<(), Failure> {
    kv_client(plugin.channel())
        .put(PutRequest {
            key: BENCH_KEY.into(),
            value: BENCH_VALUE.to_vec(),
        })
        .await
        .map_err(|status| format!("put failed: {status}"))?;
    Ok(())
}

/// `Get`s the 64-byte bench value and checks its length.
async fn get_small(
    kv: &mut tether_examples::kv::kv_client::KvClient<tether_broker::telemetry::TracedChannel>,
) -> Result<(), Failure> {
    get_sized(kv, BENCH_KEY, BENCH_VALUE.len()).await
}

/// `Get`s `key` and checks that its value has `size` bytes.
async fn get_sized(
    kv: &mut tether_examples::kv::kv_client::KvClient<tether_broker::telemetry::TracedChannel>,
    key: &str,
    size: usize,
) -> Result<(), Failure> {
    let value = kv
        .get(GetRequest { key: key.into() })
        .await
        .map_err(|status| format!("get failed: {status}"))?
        .into_inner()
        .value;
    if value.len() != size {
        return Err(format!("get: got {} bytes, want {size}", value.len()).into());
    }
    Ok(())
}

/// Time for `calls` `Get`s spread over `concurrency` tasks that each take the next call number
/// from a shared counter.
async fn rate(plugin: &PluginClient, calls: u64, concurrency: u64) -> Result<Duration, Failure> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    let next = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (next, mut kv) = (Arc::clone(&next), kv_client(plugin.channel()));
        tasks.spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < calls {
                get_small(&mut kv).await?;
            }
            Ok::<_, Failure>(())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.map_err(|e| format!("a caller task failed: {e}"))??;
    }
    Ok(t0.elapsed())
}

/// One untimed round, then `rounds` timed `Put`+`Get` rounds of `size` bytes. The value a `Get`
/// returns is the next `Put`'s request, so the host copies no payload itself.
async fn payload(plugin: &PluginClient, size: usize, rounds: u64) -> Result<String, Failure> {
    let mut kv = kv_client(plugin.channel());
    let mut value = vec![0x5a_u8; size];
    let mut t0 = Instant::now();
    for round in 0..=rounds {
        if round == 1 {
            t0 = Instant::now();
        }
        let put = kv
            .put(PutRequest {
                key: PAYLOAD_KEY.into(),
                value,
            })
            .await;
        let got = match put {
            Ok(_) => {
                kv.get(GetRequest {
                    key: PAYLOAD_KEY.into(),
                })
                .await
            }
            Err(status) => Err(status),
        };
        match got {
            Ok(response) => value = response.into_inner().value,
            Err(status) => {
                eprintln!(
                    "kv-bench: measure payload: {size}-byte round trip failed: {:?}: {}",
                    status.code(),
                    status.message()
                );
                return Ok(format!("failed={:?}", status.code()));
            }
        }
        if value.len() != size {
            return Err(format!("get: got {} bytes, want {size}", value.len()).into());
        }
    }
    let bytes = 2 * size as u128 * u128::from(rounds);
    Ok(format!(
        "bytes={bytes} elapsed_ns={}",
        t0.elapsed().as_nanos()
    ))
}

/// This host's VmRSS and open descriptors with one live plugin (called once), then with
/// `plugins` live plugins, each called once more after the last has started (all of them still
/// work at once), and the time the launches took.
async fn host_rss(launcher: &Launcher, plugins: u64) -> Result<String, Failure> {
    let mut live = Vec::new();
    let mut first = None;
    let mut outcome = Ok(());
    let t0 = Instant::now();
    for _ in 0..plugins {
        let plugin = match interruptible(launcher.start()).await {
            Ok(Ok(plugin)) => plugin,
            Ok(Err(e)) => {
                let n = live.len() + 1;
                outcome = Err(format!("plugin {n} of {plugins}: {}", e.message()).into());
                break;
            }
            Err(e) => {
                outcome = Err(e);
                break;
            }
        };
        let called = interruptible(put_small(&plugin)).await;
        live.push(plugin);
        if let Err(e) = called.and_then(|r| r) {
            outcome = Err(e);
            break;
        }
        if first.is_none() {
            first = Some((vm_rss_kb("/proc/self/status")?, open_fds()?));
        }
    }
    let started_ns = t0.elapsed().as_nanos();
    let last = vm_rss_kb("/proc/self/status");
    let last_fds = open_fds();
    if outcome.is_ok() {
        for (i, plugin) in live.iter().enumerate() {
            if let Err(e) = interruptible(put_small(plugin)).await.and_then(|r| r) {
                let n = i + 1;
                outcome =
                    Err(format!("plugin {n} of {plugins}, called again: {}", e.message()).into());
                break;
            }
        }
    }
    for plugin in live {
        plugin.shutdown().await?;
    }
    outcome?;
    let (first, first_fds) = first.ok_or("no plugin started")?;
    Ok(format!(
        "first_kb={first} last_kb={} plugins={plugins} first_fds={first_fds} last_fds={} started_ns={started_ns}",
        last?, last_fds?
    ))
}

/// How many descriptors this process has open.
fn open_fds() -> Result<u64, Failure> {
    let entries =
        std::fs::read_dir("/proc/self/fd").map_err(|e| format!("reading /proc/self/fd: {e}"))?;
    Ok(entries.count() as u64)
}

/// The `VmRSS` field (kB) of a `/proc/<pid>/status` file.
fn vm_rss_kb(status_path: &str) -> Result<u64, Failure> {
    let status =
        std::fs::read_to_string(status_path).map_err(|e| format!("reading {status_path}: {e}"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse().ok())
        .ok_or_else(|| format!("{status_path} has no readable VmRSS line").into())
}
