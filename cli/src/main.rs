//! `tether`: launch any go-plugin-compatible plugin and poke at it, like `grpcurl` does a server.
//!
//! ```text
//! tether call --cmd "target/debug/kv-plugin" --cookie BASIC_PLUGIN=hello \
//!     proto.KV/Put '{"key":"x","value":"eQ=="}'
//! tether call --cmd "target/debug/kv-plugin" --cookie BASIC_PLUGIN=hello proto.KV/Get '{"key":"x"}'
//! {"value":"eQ=="}
//! tether inspect --cmd "target/debug/kv-plugin" --cookie BASIC_PLUGIN=hello
//! tether run                       # the catalog's workflow: DIR/../{workflow.toml,artifacts}
//! tether run --repeat 100          # ≥ 1,000 steps, with steps/s
//! kill -HUP <pid of tether run>    # reload the catalog: upgrade the plugins that changed
//! tether conformance --cmd "target/debug/kv-plugin" --cookie BASIC_PLUGIN=hello
//! tether list; tether check        # --catalog DIR, else $TETHER_CATALOG, else ./catalog
//! tether call --catalog examples/agent/catalog --plugin word-count \
//!     tether.agent.v1.Executor/Execute '{"step":"x","paramsJson":"{\"text\":\"a b\"}"}'
//! ```
//!
//! The catalog of `list`, `check` and `run` is `--catalog DIR`, else `$TETHER_CATALOG`, else
//! `./catalog`; each says which it used. In a source checkout, `cargo run` sets
//! `TETHER_CATALOG` to the agent demo's catalog (`.cargo/config.toml`), so after a
//! `cargo build --release` (which puts the demo's `agent-demo` beside `tether`),
//! `cargo run --release --bin tether -- run` runs the demo's workflow.
//!
//! Message types come from `--proto` files (compiled in-process, no system `protoc`) or, without
//! them, from the plugin's gRPC server reflection (tether and go-plugin plugins serve it). JSON
//! follows protobuf's canonical JSON mapping (bytes as base64, 64-bit integers as strings).
//!
//! # Exit status
//! | status | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | the plugin answered the call with a gRPC error; a workflow step failed (`run`); a required conformance check failed (`conformance`) |
//! | 2 | usage error (bad flags or arguments) |
//! | 3 | the plugin (or a step's plugin) could not be started, is not where it was looked for, is not an executor (`run`), or ended badly |
//! | 4 | bad input: unknown service or method, JSON that does not fit the message, unreadable `.proto`, unknown plugin, bad workflow, no catalog found, a catalog with problems (`list`, `check`: a broken manifest, a bad grants file; `check`'s warnings do not count) |
//! | 141 | stdout was closed before everything was written (`tether inspect … \| head -1`); nothing is printed, the plugin is still shut down |
//!
//! # Output
//! Results go to stdout; logs, progress and errors to stderr, coloured only on a terminal
//! and never with `NO_COLOR` set. `-v` shows what plugins print (`logging`).

mod args;
mod binary;
mod call;
mod catalog_origin;
mod check;
mod conformance;
mod describe;
mod descriptors;
mod docs_flags;
mod dynamic_codec;
mod error;
mod given;
mod host_stub;
mod inspect;
mod installation;
mod json_messages;
mod limits;
mod list;
mod logging;
mod metrics;
mod output;
#[cfg(feature = "kubernetes")]
mod pods;
mod privileges;
mod reload;
mod run;
mod target;

use std::process::ExitCode;

use crate::args::Command;

fn main() -> ExitCode {
    let cli = args::parse();
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
            Command::Run(args) => run::run(args).await,
            Command::List(args) => list::run(&args),
            Command::Check(args) => check::run(&args).await,
            Command::Call(args) => call::run(args).await,
            Command::Inspect(args) => inspect::run(args).await,
            Command::Conformance(args) => conformance::run(args).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_quiet() => ExitCode::from(e.exit_code()),
        Err(e) => {
            eprintln!("{}", error::render(&e));
            ExitCode::from(e.exit_code())
        }
    }
}
