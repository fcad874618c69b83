//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Launch go-plugin-compatible plugins and call them.
#[derive(Debug, Parser)]
#[command(name = "tether", version, about, long_about = None)]
pub(crate) struct Cli {
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Pretty, global = true)]
    pub(crate) log_format: LogFormat,
    /// More log output (-v: info, -vv: debug, -vvv: trace). `RUST_LOG` overrides it.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub(crate) verbose: u8,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Pretty,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Launch a plugin, call one method with a JSON request and print the JSON response.
    Call(CallArgs),
    /// Launch a plugin and print what it negotiated: version, transport, certificate, health,
    /// services.
    Inspect(InspectArgs),
}

/// Which plugin to launch and how.
#[derive(Debug, Args)]
pub(crate) struct TargetArgs {
    /// The plugin's command line, split like a shell would (e.g. "python3 kv_plugin.py").
    #[arg(long, value_name = "COMMAND")]
    pub(crate) cmd: String,
    /// The handshake's magic cookie, KEY=VALUE (e.g. BASIC_PLUGIN=hello).
    #[arg(long, value_name = "KEY=VALUE")]
    pub(crate) cookie: String,
    /// App protocol versions to offer (repeatable).
    #[arg(long = "app-version", value_name = "N", default_value = "1")]
    pub(crate) app_versions: Vec<u32>,
    /// Turn AutoMTLS off (for plugins that cannot do it). Unauthenticated and unencrypted.
    #[arg(long)]
    pub(crate) plaintext: bool,
}

#[derive(Debug, Args)]
pub(crate) struct CallArgs {
    #[command(flatten)]
    pub(crate) target: TargetArgs,
    /// A .proto file declaring the service (repeatable). Without one, types come from the
    /// plugin's server reflection.
    #[arg(long = "proto", value_name = "FILE")]
    pub(crate) protos: Vec<PathBuf>,
    /// An import path for --proto files (repeatable); each file's own directory is one too.
    #[arg(short = 'I', long = "import-path", value_name = "DIR")]
    pub(crate) import_paths: Vec<PathBuf>,
    /// The method, as SERVICE/METHOD with the service's full name (e.g. proto.KV/Get).
    #[arg(value_name = "SERVICE/METHOD")]
    pub(crate) method: String,
    /// The request, as JSON (protobuf's canonical JSON mapping).
    #[arg(value_name = "JSON", default_value = "{}")]
    pub(crate) request: String,
}

#[derive(Debug, Args)]
pub(crate) struct InspectArgs {
    #[command(flatten)]
    pub(crate) target: TargetArgs,
}
