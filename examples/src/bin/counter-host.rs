//! Counter host: go-plugin's `examples/bidirectional` host, written with `tether-broker`.
//!
//! ```text
//! COUNTER_PLUGIN="<command> [args]" counter-host [OPTIONS] put KEY N   # adds N to KEY
//! COUNTER_PLUGIN="<command> [args]" counter-host [OPTIONS] get KEY     # prints the number
//! ```
//!
//! `put` serves `AddHelper` on a fresh broker id for the duration of the call and passes the id
//! as `add_server`; the plugin dials it and asks the host to add. With `--host-service` the
//! host instead registers `AddHelper` once as a host service and sends `add_server` 0: the
//! (tether) plugin reaches it without an id. AutoMTLS unless `--plaintext` (go-plugin ≤ 1.4.3
//! plugins' broker dial-backs fail under AutoMTLS); `--multiplex` offers go-plugin's
//! multiplexed broker; `--allow-exec`/`--allow-read DIR` widen the default confinement for
//! interpreters outside the system paths. `COUNTER_HOST_LOG` sets the log filter (default
//! `warn`). Exit status: 0 ok, 1 error, 2 usage. Benchmarks: `counter-bench` in
//! `tether-bench`.

use std::io::Write as _;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tether_examples::adder::Adder;
use tether_examples::counter::add_helper_server::AddHelperServer;
use tether_examples::counter::counter_client::CounterClient;
use tether_examples::counter::{GetRequest, PutRequest};
use tether_examples::{LaunchFlags, error_chain, plugin_command};

#[derive(Debug, Parser)]
#[command(
    name = "counter-host",
    about = "Runs the counter plugin named by $COUNTER_PLUGIN"
)]
struct Cli {
    /// Serve AddHelper as a host service and send `add_server` 0 (tether plugins only).
    #[arg(long, global = true)]
    host_service: bool,
    #[command(flatten)]
    launch: LaunchFlags,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Add N to the number stored under KEY (the plugin calls back to add).
    Put {
        key: String,
        #[arg(allow_negative_numbers = true)]
        value: i64,
    },
    /// Print the number stored under KEY.
    Get { key: String },
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tether_examples::init_logging("COUNTER_HOST_LOG");
    let (program, args) = match plugin_command("COUNTER_PLUGIN") {
        Ok(command) => command,
        Err(e) => {
            eprintln!("counter-host: error: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let result = match runtime {
        Ok(rt) => rt.block_on(run(cli, program, args)),
        Err(e) => Err(e.into()),
    };
    if let Err(e) = result {
        eprintln!("counter-host: error: {}", error_chain(&*e));
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

async fn run(cli: Cli, program: String, args: Vec<String>) -> Result<(), BoxError> {
    // go-plugin's example plugins keep their `kv_<KEY>` files in their working directory:
    // this host grants them its own, explicitly (tether never does so by default).
    let mut builder = cli
        .launch
        .builder(&program, &args)?
        .current_dir(std::env::current_dir()?);
    if cli.host_service {
        builder = builder.host_service(AddHelperServer::new(Adder));
    }
    let plugin = builder.start().await?;
    let mut counter = CounterClient::new(plugin.channel());
    let call = match &cli.command {
        Command::Put { key, .. } => format!("put {key:?}"),
        Command::Get { key } => format!("get {key:?}"),
    };
    let result = match cli.command {
        Command::Put { key, value } if cli.host_service => {
            let put = PutRequest {
                add_server: 0,
                key,
                value,
            };
            counter.put(put).await.map(|_| None)
        }
        Command::Put { key, value } => {
            // go-plugin's way: AddHelper on a fresh broker id, for this call only.
            let broker = plugin.broker();
            let id = broker.next_id();
            let served = broker
                .accept_and_serve(id, AddHelperServer::new(Adder))
                .await?;
            let put = PutRequest {
                add_server: id,
                key,
                value,
            };
            let result = counter.put(put).await.map(|_| None);
            drop(served);
            result
        }
        Command::Get { key } => counter.get(GetRequest { key }).await.map(Some),
    };
    plugin.shutdown().await?;
    let answered = result.map_err(|s| {
        format!(
            "{call} failed: the plugin answered {:?}: {}",
            s.code(),
            s.message()
        )
    })?;
    if let Some(response) = answered {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{}", response.into_inner().value)?;
        stdout.flush()?;
    }
    Ok(())
}
