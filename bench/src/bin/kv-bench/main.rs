//! `kv-bench`: the KV benchmark driver for the `tether-bench` harness, a tether KV host
//! (go-plugin's `examples/grpc` contract) that times its calls.
//!
//! ```text
//! KV_PLUGIN="<command> [args]" kv-bench [OPTIONS] measure METRIC [options]
//! KV_PLUGIN="<command> [args]" kv-bench [OPTIONS] summary --calls N --launches L [--concurrency C]
//! ```
//!
//! Options: the `kv-host` example's (`--plaintext`, `--multiplex`, `--gvisor`, `--allow-exec
//! DIR`, `--allow-read DIR`: [`LaunchFlags`], the same code), so the plugin is launched as the
//! example launches it; and the benchmark's own, which loosen the defaults to measure what
//! each layer costs: `--seccomp default|off`, `--network none|host`, `--sandbox
//! enforce|best-effort|off` (default `enforce`; `off` measures what confinement costs at
//! launch). Unlike the example, it carries values up to 64 MiB (the `payload` metric).
//!
//! `measure` prints raw measurements for the harness, one line of `key=value` pairs;
//! `tests/go/kvhost measure` takes the same arguments and prints the same keys, so the harness
//! computes every statistic of both systems with the same code. See `measure.rs` for the
//! metrics. `summary` prints one line (see `summary.rs`).
//!
//! Exit status: 0 ok, 1 error (one line on stderr with the cause chain), 2 usage, 130
//! interrupted. `KV_HOST_LOG` sets the log filter (`tracing` syntax, default `warn`).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tether_examples::LaunchFlags;

use crate::launcher::{Failure, Launcher};

mod catalog;
mod launcher;
mod measure;
mod samples;
mod summary;
mod telemetry;
mod workflow;

#[derive(Debug, Parser)]
#[command(
    name = "kv-bench",
    about = "Times calls to the KV plugin named by $KV_PLUGIN for the tether-bench harness"
)]
struct Cli {
    /// How the `kv-host` example launches its plugin: `--plaintext`, `--multiplex`,
    /// `--gvisor`, `--allow-exec`, `--allow-read`.
    #[command(flatten)]
    launch: LaunchFlags,
    /// Confinement of the plugin: `enforce` (the default), `best-effort`, or `off` (an explicit
    /// opt-out, e.g. to measure what confinement costs at launch).
    #[arg(long, value_enum, default_value_t = Confinement::Enforce, global = true)]
    sandbox: Confinement,
    /// The plugin's system-call filter: `default` (tether's default) or `off`, e.g. to measure
    /// what the filter costs at launch.
    #[arg(long, value_enum, default_value_t = Filter::Default, global = true)]
    seccomp: Filter,
    /// The plugin's network: `none` (tether's default) or `host`.
    #[arg(long, value_enum, default_value_t = Network::None, global = true)]
    network: Network,
    /// Whether the plugin runs in a world of its own: `preferred` (tether's default) or `off`
    /// (the other layers only), e.g. to measure what namespaces cost at launch.
    #[arg(long, value_enum, default_value_t = Namespaces::Preferred, global = true)]
    namespaces: Namespaces,
    /// The host's telemetry: `off` (tether's default), `metrics` (per-plugin metrics on a
    /// meter whose reader is never collected) or `tracing` (call spans recorded by an
    /// OpenTelemetry layer with no exporter), e.g. to measure what turning it on costs.
    #[arg(long, value_enum, default_value_t = telemetry::TelemetryMode::Off, global = true)]
    telemetry: telemetry::TelemetryMode,
    /// Pin every plugin's threads to this CPU once it has started (the host's own placement is
    /// the caller's: `taskset`, or the harness), e.g. to measure host and plugin on two CPUs.
    #[arg(long, value_parser = tether_bench::affinity::parse_cpu, global = true)]
    plugin_cpu: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

/// `--seccomp`: tether's [`SeccompMode`](tether_broker::confine::SeccompMode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Filter {
    /// The default profile.
    Default,
    /// No filter.
    Off,
}

impl From<Filter> for tether_broker::confine::SeccompMode {
    fn from(f: Filter) -> Self {
        match f {
            Filter::Default => Self::Default,
            Filter::Off => Self::Off,
        }
    }
}

/// `--network`: tether's [`NetworkMode`](tether_broker::confine::NetworkMode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Network {
    /// No network (unix sockets only).
    None,
    /// The host's network.
    Host,
}

impl From<Network> for tether_broker::confine::NetworkMode {
    fn from(n: Network) -> Self {
        match n {
            Network::None => Self::None,
            Network::Host => Self::Host,
        }
    }
}

/// `--namespaces`: tether's [`NamespacesMode`](tether_broker::confine::NamespacesMode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Namespaces {
    /// A world of its own where the host can make one.
    Preferred,
    /// The other layers only.
    Off,
}

impl From<Namespaces> for tether_broker::confine::NamespacesMode {
    fn from(n: Namespaces) -> Self {
        match n {
            Namespaces::Preferred => Self::Preferred,
            Namespaces::Off => Self::Off,
        }
    }
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
    /// Measure start-up, call latency and throughput; prints one line.
    Summary {
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

fn main() -> ExitCode {
    // Up to 64 MiB values: reuse heap pages rather than fault in fresh ones per buffer.
    tether_examples::keep_large_allocations();
    let cli = Cli::parse();
    let telemetry = telemetry::install(cli.telemetry, "KV_HOST_LOG");

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
            eprintln!("kv-bench: error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli, &telemetry)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("kv-bench: error: {}", failure.message());
            ExitCode::from(failure.code)
        }
    }
}

async fn run(cli: Cli, telemetry: &telemetry::HostTelemetry) -> Result<(), Failure> {
    let (program, args) = launcher::plugin_command()?;
    let launcher = Launcher {
        program,
        args,
        launch: cli.launch,
        sandbox: cli.sandbox.into(),
        seccomp: cli.seccomp.into(),
        network: cli.network.into(),
        namespaces: cli.namespaces.into(),
        call_metrics: telemetry.call_metrics.clone(),
        plugin_cpu: cli.plugin_cpu,
    };
    match cli.command {
        Command::Summary {
            calls,
            launches,
            concurrency,
        } => summary::run(&launcher, calls, launches, concurrency).await,
        Command::Measure { metric } => measure::run(&launcher, metric).await,
    }
}
