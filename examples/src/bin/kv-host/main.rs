//! KV host: go-plugin's `examples/grpc` host, written with `tether-broker`.
//!
//! ```text
//! KV_PLUGIN="<command> [args]" kv-host [--plaintext] [--multiplex] put KEY VALUE
//! KV_PLUGIN="<command> [args]" kv-host [--plaintext] [--multiplex] get KEY        # prints VALUE and a newline
//! KV_PLUGIN="<command> [args]" kv-host [--plaintext] [--multiplex] bench --calls N --launches L [--concurrency C]
//! KV_PLUGIN="<command> [args]" kv-host [--plaintext] [--multiplex] measure METRIC [options]
//! ```
//!
//! Global options: `--plaintext`, `--multiplex`, `--sandbox enforce|best-effort|off` (default
//! `enforce`), `--allow-exec DIR`, `--allow-read DIR`.
//!
//! `KV_PLUGIN` is split like a shell would (`shell-words`); the plugin runs in the current
//! directory (tether's and go-plugin's KV plugins store `kv_<KEY>` files there). Handshake: app
//! version 1, cookie `BASIC_PLUGIN=hello`; AutoMTLS unless `--plaintext`; `--multiplex` offers
//! go-plugin's multiplexed broker (the main connection becomes a yamux stream if the plugin
//! accepts). Any go-plugin KV plugin works, e.g. the `kv-plugin` example or go-plugin's own.
//!
//! The plugin is confined (tether's default sandbox): it may read and execute its binary's
//! directory and the system paths, and write its working directory. A plugin run by an
//! interpreter installed elsewhere (pyenv, virtualenv) needs `--allow-exec DIR` for the
//! interpreter's prefix and `--allow-read DIR` for the script's sources.
//!
//! Exit status: 0 ok, 1 error (one line on stderr with the cause chain), 2 usage, 3 `get` of a
//! missing key. `KV_HOST_LOG` sets the log filter (`tracing` syntax, default `warn`).
//!
//! `bench` prints one line, `startup_ms_p50=… call_us_p50=… call_us_p99=… calls_per_s=…`:
//! startup is spawn → first `Put` done (median over L launches); call_us is a sequential `Get`
//! of a 64-byte value (N calls on one plugin); calls_per_s is N `Get`s spread over C concurrent
//! tasks on one plugin. Percentiles are nearest-rank, as in `tests/go/kvhost`.
//!
//! `measure` prints raw measurements for the `tether-bench` harness (issue 6), one line of
//! `key=value` pairs; `tests/go/kvhost measure` takes the same arguments and prints the same
//! keys, so the harness computes every statistic of both systems with the same code. See
//! `measure.rs` for the metrics.

use std::error::Error;
use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use tether_broker::{HandshakeConfig, PluginClient};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};
use tonic::transport::Channel;

mod catalog;
mod measure;

/// The 64-byte value `bench` reads.
const BENCH_VALUE: &[u8; 64] = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// The key `bench` writes and reads.
const BENCH_KEY: &str = "bench";

#[derive(Debug, Parser)]
#[command(
    name = "kv-host",
    about = "Runs the KV plugin named by $KV_PLUGIN and calls it (go-plugin's examples/grpc host)"
)]
struct Cli {
    /// Turn AutoMTLS off (for plugins that cannot do it).
    #[arg(long, global = true)]
    plaintext: bool,
    /// Offer go-plugin's multiplexed broker (PLUGIN_MULTIPLEX_GRPC); the main connection is
    /// then a yamux stream when the plugin accepts.
    #[arg(long, global = true)]
    multiplex: bool,
    /// Let the confined plugin read and execute below DIR too: an interpreter outside the
    /// system paths, e.g. a pyenv or virtualenv Python (repeatable).
    #[arg(long = "allow-exec", value_name = "DIR", global = true)]
    allow_exec: Vec<std::path::PathBuf>,
    /// Let the confined plugin read below DIR too, e.g. a script plugin's sources (repeatable).
    #[arg(long = "allow-read", value_name = "DIR", global = true)]
    allow_read: Vec<std::path::PathBuf>,
    /// Confinement of the plugin: `enforce` (the default), `best-effort`, or `off` (an explicit
    /// opt-out, e.g. to measure what confinement costs at launch).
    #[arg(long, value_enum, default_value_t = Confinement::Enforce, global = true)]
    sandbox: Confinement,
    #[command(subcommand)]
    command: Command,
}

/// `--sandbox`: tether's [`SandboxMode`](tether_broker::SandboxMode) on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Confinement {
    /// Landlock required (tether's default).
    Enforce,
    /// Landlock when the kernel has it.
    BestEffort,
    /// No Landlock, no `no_new_privs`.
    Off,
}

impl From<Confinement> for tether_broker::SandboxMode {
    fn from(c: Confinement) -> Self {
        match c {
            Confinement::Enforce => Self::Enforce,
            Confinement::BestEffort => Self::BestEffort,
            Confinement::Off => Self::Off,
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Store VALUE under KEY.
    Put {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Print the value stored under KEY.
    Get {
        /// The key.
        key: String,
    },
    /// Measure start-up, call latency and throughput; prints one line.
    Bench {
        /// Number of `Get` calls (sequential, then concurrent).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        calls: u64,
        /// Number of plugin launches for the start-up timing.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        launches: u64,
        /// Concurrent tasks for the throughput run.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        concurrency: u64,
    },
    /// Print raw measurements of one metric for the `tether-bench` harness (one line).
    Measure {
        #[command(subcommand)]
        metric: measure::Metric,
    },
}

/// A failure, with the exit status it maps to.
pub(crate) struct Failure {
    error: Box<dyn Error + Send + Sync>,
    code: u8,
}

impl<E: Into<Box<dyn Error + Send + Sync>>> From<E> for Failure {
    fn from(error: E) -> Self {
        Self {
            error: error.into(),
            code: 1,
        }
    }
}

fn main() -> ExitCode {
    // Up to 64 MiB values: reuse heap pages rather than fault in fresh ones per buffer.
    tether_examples::keep_large_allocations();
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KV_HOST_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();

    // Runtime: current-thread. Measured on the 2-core VM with release builds, kv-plugin over
    // AutoMTLS on a unix socket, `bench --calls 5000 --launches 20 --concurrency 64`, three runs
    // each: current-thread call_us_p50 122–168, calls_per_s 44.6k–46.9k; multi-thread
    // call_us_p50 198–243, calls_per_s 29.5k–41.5k; start-up equal (≈34 ms). One plugin
    // connection is one HTTP/2 connection, which a single thread drives without cross-thread
    // wake-ups.
    let mut rt_builder = tokio::runtime::Builder::new_current_thread();
    let runtime = match rt_builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kv-host: error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!(
                "kv-host: error: {}",
                tether_examples::error_chain(&*failure.error)
            );
            ExitCode::from(failure.code)
        }
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    let (program, args) = plugin_command()?;
    let launcher = Launcher {
        program,
        args,
        plaintext: cli.plaintext,
        multiplex: cli.multiplex,
        allow_exec: cli.allow_exec,
        allow_read: cli.allow_read,
        sandbox: cli.sandbox.into(),
    };
    match cli.command {
        Command::Put { key, value } => {
            let plugin = interruptible(launcher.start()).await??;
            let mut kv = kv_client(plugin.channel());
            let result = interruptible(kv.put(PutRequest {
                key: key.clone(),
                value: value.into_bytes(),
            }))
            .await;
            plugin.shutdown().await?;
            let result = result?;
            result.map_err(|status| call_error("put", &key, status))?;
            Ok(())
        }
        Command::Get { key } => {
            let plugin = interruptible(launcher.start()).await??;
            let mut kv = kv_client(plugin.channel());
            let result = interruptible(kv.get(GetRequest { key: key.clone() })).await;
            plugin.shutdown().await?;
            let result = result?;
            let value = result.map_err(|status| call_error("get", &key, status))?;
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(&value.into_inner().value)?;
            stdout.write_all(b"\n")?;
            stdout.flush()?;
            Ok(())
        }
        Command::Bench {
            calls,
            launches,
            concurrency,
        } => bench(&launcher, calls, launches, concurrency).await,
        Command::Measure { metric } => measure::run(&launcher, metric).await,
    }
}

/// A KV client that carries messages up to [`tether_examples::MAX_MESSAGE_SIZE`] both ways
/// (tonic's default decode limit is 4 MiB).
fn kv_client(channel: Channel) -> KvClient<Channel> {
    KvClient::new(channel)
        .max_decoding_message_size(tether_examples::MAX_MESSAGE_SIZE)
        .max_encoding_message_size(tether_examples::MAX_MESSAGE_SIZE)
}

/// Runs `work` unless SIGINT or SIGTERM comes first (then exit status 130), so that a plugin
/// started outside `work` is still shut down properly. If a signal interrupts a start, the
/// dropped start ends the plugin it was starting.
pub(crate) async fn interruptible<F: Future>(work: F) -> Result<F::Output, Failure> {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut int, mut term) = (
        signal(SignalKind::interrupt())?,
        signal(SignalKind::terminate())?,
    );
    tokio::select! {
        output = work => Ok(output),
        _ = int.recv() => Err(interrupted("SIGINT")),
        _ = term.recv() => Err(interrupted("SIGTERM")),
    }
}

fn interrupted(signal: &str) -> Failure {
    Failure {
        error: format!("interrupted by {signal}").into(),
        code: 130,
    }
}

/// A failed call: exit status 3 for a missing key (`NotFound`), else 1.
fn call_error(op: &str, key: &str, status: tonic::Status) -> Failure {
    let code = if status.code() == tonic::Code::NotFound {
        3
    } else {
        1
    };
    let what = if code == 3 {
        format!("{op} {key:?}: the key is not set")
    } else {
        format!("{op} {key:?} failed")
    };
    Failure {
        error: format!(
            "{what} (plugin answered {:?}: {})",
            status.code(),
            status.message()
        )
        .into(),
        code,
    }
}

/// `$KV_PLUGIN`, split into program and arguments.
fn plugin_command() -> Result<(String, Vec<String>), Failure> {
    let Some(command) = std::env::var_os("KV_PLUGIN") else {
        return Err(Failure {
            error: "KV_PLUGIN is not set; set it to the plugin command, e.g. KV_PLUGIN=target/debug/kv-plugin".into(),
            code: 2,
        });
    };
    let command = command
        .into_string()
        .map_err(|_| "KV_PLUGIN is not valid UTF-8")?;
    let mut words = shell_words::split(&command)
        .map_err(|e| format!("KV_PLUGIN={command:?} cannot be split into words: {e}"))?;
    if words.is_empty() {
        return Err(Failure {
            error: "KV_PLUGIN is empty; set it to the plugin command".into(),
            code: 2,
        });
    }
    let program = words.remove(0);
    Ok((program, words))
}

/// Starts the plugin the same way every time.
pub(crate) struct Launcher {
    program: String,
    args: Vec<String>,
    plaintext: bool,
    multiplex: bool,
    allow_exec: Vec<std::path::PathBuf>,
    allow_read: Vec<std::path::PathBuf>,
    sandbox: tether_broker::SandboxMode,
}

impl Launcher {
    pub(crate) async fn start(&self) -> Result<PluginClient, tether_broker::StartError> {
        let mut builder = PluginClient::builder(&self.program)
            .args(&self.args)
            .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
            .multiplex(self.multiplex)
            .sandbox(self.sandbox);
        if self.plaintext {
            builder = builder.plaintext();
        }
        for dir in &self.allow_exec {
            builder = builder.sandbox_allow_exec(dir);
        }
        for dir in &self.allow_read {
            builder = builder.sandbox_allow_read(dir);
        }
        builder.start().await
    }
}

async fn bench(
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
    channel: Channel,
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
