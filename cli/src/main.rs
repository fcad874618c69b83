//! `tether`: launch any go-plugin-compatible plugin and poke at it, like `grpcurl` does a server.
//!
//! ```text
//! tether call --cmd "target/debug/kv-plugin" --cookie BASIC_PLUGIN=hello \
//!     proto.KV/Put '{"key":"x","value":"eQ=="}'
//! tether call --cmd "target/debug/kv-plugin" --cookie BASIC_PLUGIN=hello proto.KV/Get '{"key":"x"}'
//! {"value":"eQ=="}
//! tether inspect --cmd "target/debug/kv-plugin" --cookie BASIC_PLUGIN=hello
//! ```
//!
//! Message types come from `--proto` files (compiled in-process, no system `protoc`) or, without
//! them, from the plugin's gRPC server reflection (tether and go-plugin plugins serve it). JSON
//! follows protobuf's canonical JSON mapping (bytes as base64, 64-bit integers as strings).
//!
//! # Exit status
//! | status | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | the plugin answered the call with a gRPC error |
//! | 2 | usage error (bad flags or arguments) |
//! | 3 | the plugin could not be started, or ended badly |
//! | 4 | bad input: unknown service or method, JSON that does not fit the message, unreadable `.proto` |

mod args;
mod call;
mod descriptors;
mod error;
mod inspect;
mod logging;
mod target;

use std::process::ExitCode;

use clap::Parser as _;

use crate::args::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.log_format, cli.verbose);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tether: error: cannot start the async runtime: {e}");
            return ExitCode::from(error::EXIT_START);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Call(args) => call::run(args).await,
            Command::Inspect(args) => inspect::run(args).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", error::render(&e));
            ExitCode::from(e.exit_code())
        }
    }
}
