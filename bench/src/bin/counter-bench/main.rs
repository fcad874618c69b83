//! `counter-bench`: the callback benchmark driver for the `tether-bench` harness, a tether
//! counter host (go-plugin's `examples/bidirectional` contract) that times its calls.
//!
//! ```text
//! COUNTER_PLUGIN="<command> [args]" counter-bench [OPTIONS] measure callback --calls N [--warmup W]
//! COUNTER_PLUGIN="<command> [args]" counter-bench [OPTIONS] summary --calls N [--compare-modes]
//! ```
//!
//! Options as the `counter-host` example's (the same code, [`LaunchFlags`]): `--plaintext`,
//! `--host-service`, `--multiplex`, `--gvisor`, `--allow-exec DIR`, `--allow-read DIR`. A callback `Put` serves `AddHelper` on a fresh
//! broker id for that call, as go-plugin's example does (`callback.rs`). `measure callback`
//! prints raw samples for the harness (`measure.rs`); `tests/go/counterhost measure callback`
//! takes the same arguments, makes the same calls and prints the same keys. `summary` prints
//! percentiles in one line (`summary.rs`). `COUNTER_HOST_LOG` sets the log filter (default
//! `warn`). Exit status: 0 ok, 1 error, 2 usage.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tether_broker::PluginClient;
use tether_examples::LaunchFlags;
use tether_examples::counter::add_helper_server::AddHelperServer;
use tether_examples::counter::counter_client::CounterClient;

use crate::callback::BoxError;
use tether_examples::adder::Adder;

mod callback;
mod measure;
mod summary;

#[derive(Debug, Parser)]
#[command(
    name = "counter-bench",
    about = "Times callbacks of the counter plugin named by $COUNTER_PLUGIN for the tether-bench harness"
)]
struct Cli {
    /// Serve AddHelper as a host service and send `add_server` 0 (tether plugins only).
    #[arg(long, global = true)]
    host_service: bool,
    /// How the `counter-host` example launches its plugin: `--plaintext`, `--multiplex`,
    /// `--gvisor`, `--allow-exec`, `--allow-read`.
    #[command(flatten)]
    launch: LaunchFlags,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure a callback round trip against a plain call; prints one line.
    Summary {
        /// Calls per measurement.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        calls: u64,
        /// Also start a plugin with multiplexing offered and measure both, interleaved.
        #[arg(long)]
        compare_modes: bool,
    },
    /// Print raw measurements of one metric for the `tether-bench` harness (one line).
    Measure {
        #[command(subcommand)]
        metric: Metric,
    },
}

/// One metric of `counter-host measure`.
#[derive(Debug, Subcommand)]
enum Metric {
    /// Interleaved plain `Get`s and `Put`s carrying one callback: `unary_ns=… callback_ns=…`.
    Callback {
        /// Timed pairs.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        calls: u64,
        /// Untimed pairs first (connection and allocator warm-up).
        #[arg(long, default_value_t = DEFAULT_WARMUP_PAIRS)]
        warmup: u64,
    },
}

/// Untimed `Get` + `Put` pairs before `measure callback` starts timing.
const DEFAULT_WARMUP_PAIRS: u64 = 20;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tether_examples::init_logging("COUNTER_HOST_LOG");
    // Current-thread, as kv-bench (measured faster for one plugin connection).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("counter-bench: error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err((error, code)) => {
            eprintln!(
                "counter-bench: error: {}",
                tether_examples::error_chain(&*error)
            );
            ExitCode::from(code)
        }
    }
}

async fn run(cli: Cli) -> Result<(), (BoxError, u8)> {
    let (program, args) =
        tether_examples::plugin_command("COUNTER_PLUGIN").map_err(|e| (e.into(), 2))?;
    let (program, args, launch, host_service) = (&program, &args, &cli.launch, cli.host_service);
    let start = |multiplex: bool| async move {
        let mut builder = launch.builder(program, args)?.multiplex(multiplex);
        if host_service {
            builder = builder.host_service(AddHelperServer::new(Adder));
        }
        Ok::<_, BoxError>(builder.start().await?)
    };
    let plugin = start(cli.launch.multiplex).await.map_err(|e| (e, 1))?;
    let (result, other) = match cli.command {
        Command::Summary {
            calls,
            compare_modes: true,
        } => match start(true).await {
            Ok(muxed) => (
                summary::run(&[&plugin, &muxed], calls, cli.host_service).await,
                Some(muxed),
            ),
            Err(e) => (Err(e), None),
        },
        command => (call(&plugin, command, cli.host_service).await, None),
    };
    let stopped = plugin.shutdown().await;
    let other_stopped = match other {
        Some(p) => p.shutdown().await.map(|_| ()),
        None => Ok(()),
    };
    result.map_err(|e| (e, 1))?;
    stopped.map_err(|e| (e.into(), 1))?;
    other_stopped.map_err(|e| (e.into(), 1))?;
    Ok(())
}

async fn call(plugin: &PluginClient, command: Command, host_service: bool) -> Result<(), BoxError> {
    match command {
        Command::Summary { calls, .. } => summary::run(&[plugin], calls, host_service).await,
        Command::Measure {
            metric: Metric::Callback { calls, warmup },
        } => {
            let mut counter = CounterClient::new(plugin.channel());
            measure::callback(&plugin.broker(), &mut counter, calls, warmup).await
        }
    }
}
