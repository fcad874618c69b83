//! KV host: go-plugin's `examples/grpc` host, written with `tether-broker`.
//!
//! ```text
//! KV_PLUGIN="<command> [args]" kv-host [OPTIONS] put KEY VALUE
//! KV_PLUGIN="<command> [args]" kv-host [OPTIONS] get KEY        # prints VALUE and a newline
//! ```
//!
//! Each command launches the plugin (split like a shell would), makes one call and stops it.
//! The plugin runs in the current directory, which this host grants it explicitly with
//! `current_dir` (the KV plugins store `kv_<KEY>` files there; tether's default is the
//! plugin's private directory), and is confined by tether's default sandbox; a plugin run by an interpreter outside the system
//! paths needs `--allow-exec DIR` (and `--allow-read DIR` for its sources). Handshake: app
//! version 1, cookie `BASIC_PLUGIN=hello`; AutoMTLS unless `--plaintext`; `--multiplex` offers
//! go-plugin's multiplexed broker. Any go-plugin KV plugin works.
//!
//! Exit status: 0 ok, 1 error, 2 usage, 3 `get` of a missing key. `KV_HOST_LOG` sets the log
//! filter (default `warn`). Benchmarks of this contract: `kv-bench` in `tether-bench`.

use std::io::Write as _;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};
use tether_examples::{LaunchFlags, error_chain, plugin_command};

#[derive(Debug, Parser)]
#[command(
    name = "kv-host",
    about = "Runs the KV plugin named by $KV_PLUGIN and calls it"
)]
struct Cli {
    #[command(flatten)]
    launch: LaunchFlags,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Store VALUE under KEY.
    Put { key: String, value: String },
    /// Print the value stored under KEY.
    Get { key: String },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tether_examples::init_logging("KV_HOST_LOG");
    let (program, args) = match plugin_command("KV_PLUGIN") {
        Ok(command) => command,
        Err(e) => {
            eprintln!("kv-host: error: {e}");
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
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<tonic::Status>() {
            // The plugin answered: NotFound is "the key is not set" (exit status 3).
            Some(status) => {
                let (code, message) = (status.code(), status.message());
                eprintln!("kv-host: error: the plugin answered {code:?}: {message}");
                ExitCode::from(if code == tonic::Code::NotFound { 3 } else { 1 })
            }
            None => {
                eprintln!("kv-host: error: {}", error_chain(&*e));
                ExitCode::FAILURE
            }
        },
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Launches the plugin, makes the call, stops the plugin, then prints what `get` got.
async fn run(cli: Cli, program: String, args: Vec<String>) -> Result<(), BoxError> {
    // go-plugin's example plugins keep their `kv_<KEY>` files in their working directory:
    // this host grants them its own, explicitly (tether never does so by default).
    let builder = cli
        .launch
        .builder(&program, &args)?
        .current_dir(std::env::current_dir()?);
    let plugin = builder.start().await?;
    let mut kv = KvClient::new(plugin.channel());
    let result = match cli.command {
        Command::Put { key, value } => {
            let put = PutRequest {
                key,
                value: value.into_bytes(),
            };
            kv.put(put).await.map(|_| None)
        }
        Command::Get { key } => kv.get(GetRequest { key }).await.map(Some),
    };
    plugin.shutdown().await?;
    if let Some(response) = result? {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(&response.into_inner().value)?;
        stdout.write_all(b"\n")?;
        stdout.flush()?;
    }
    Ok(())
}
