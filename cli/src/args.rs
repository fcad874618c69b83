//! Command-line arguments.

use std::path::PathBuf;

use crate::limits;
use clap::{Args, CommandFactory as _, FromArgMatches as _, Parser, Subcommand, ValueEnum};

/// The subcommands whose `--catalog` takes the plugin as a second value in its older form.
const CATALOG_PLUGIN_COMMANDS: [&str; 3] = ["call", "inspect", "conformance"];

/// Parses the command line (exiting with clap's message and status 2 when it does not
/// parse). `--catalog DIR NAME`, the older form, is read only without `--plugin`: with it,
/// `--catalog` takes one value, so whatever follows it is the command's next argument
/// (`--plugin kv --catalog DIR proto.KV/Get`).
pub(crate) fn parse() -> Cli {
    let with_plugin = std::env::args_os()
        .any(|a| a == "--plugin" || a.to_str().is_some_and(|a| a.starts_with("--plugin=")));
    let mut command = Cli::command();
    if with_plugin {
        for name in CATALOG_PLUGIN_COMMANDS {
            command = command.mut_subcommand(name, |c| {
                c.mut_arg("catalog", |a| a.num_args(1).value_name("DIR"))
            });
        }
    }
    let matches = command.get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// Launch go-plugin-compatible plugins and call them.
#[derive(Debug, Parser)]
#[command(
    name = "tether",
    version,
    about,
    long_about = None,
    after_help = crate::error::AFTER_HELP
)]
pub(crate) struct Cli {
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Pretty, global = true)]
    pub(crate) log_format: LogFormat,
    /// More log output on stderr. -v: tether's steps and everything the plugin prints (its
    /// plain stderr lines too); -vv: debug; -vvv: trace. TLS, HTTP/2 and gRPC libraries log
    /// warnings only; `RUST_LOG` replaces all of this (`RUST_LOG=trace`: everything).
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
    /// Run a workflow of steps through the catalog's plugins (by default the workflow next to
    /// the catalog; in a source checkout, `cargo run` gives the agent demo's) and print a
    /// summary. SIGHUP reloads the catalog: each plugin whose manifest or program changed is
    /// upgraded without a failed step, or keeps running as it was if its new version fails.
    Run(RunArgs),
    /// List the catalog's plugins.
    List(CatalogArgs),
    /// Check the catalog: manifests, grants, secrets, binaries, checksums. Every problem is
    /// listed (every unknown key of a manifest or grants file too, with file:line:column); the
    /// exit status is non-zero if there is one. Warnings (grants for a plugin that has no
    /// manifest) do not change it.
    Check(CatalogArgs),
    /// Launch a plugin, call one method with a JSON request and print the JSON response.
    Call(CallArgs),
    /// Launch a plugin and print what it negotiated: version, transport, certificate, health,
    /// services.
    Inspect(InspectArgs),
    /// Check a plugin, in any language, against the protocol (docs/PROTOCOL.md): a table of
    /// checks, what to change for each failure; non-zero exit status on a required failure.
    Conformance(ConformanceArgs),
}

/// Where the catalog's policy, secrets and binaries are.
#[derive(Debug, Clone, Args)]
pub(crate) struct InstallArgs {
    /// The grants (policy) file [default: DIR/../grants.toml when it exists; else nothing is
    /// granted].
    #[arg(long, value_name = "FILE")]
    pub(crate) grants: Option<PathBuf>,
    /// The directory of secret values, one file per secret [default: DIR/../secrets].
    #[arg(long, value_name = "DIR")]
    pub(crate) secrets: Option<PathBuf>,
    /// The directory of config files, one file per name [default: DIR/../config].
    #[arg(long = "config-dir", value_name = "DIR")]
    pub(crate) config: Option<PathBuf>,
    /// Where commands `bin/NAME` that are not in the catalog's `bin/` are found [default: the
    /// directory of this `tether`].
    #[arg(long = "bin-dir", value_name = "DIR")]
    pub(crate) bin_dir: Option<PathBuf>,
}

/// A catalog directory.
#[derive(Debug, Clone, Args)]
pub(crate) struct CatalogArgs {
    /// The catalog: a directory of plugin manifests (*.toml) [default: $TETHER_CATALOG, else
    /// ./catalog].
    #[arg(long, value_name = "DIR")]
    pub(crate) catalog: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) install: InstallArgs,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) catalog: CatalogArgs,
    /// The workflow file (TOML) [default: DIR/../workflow.toml, next to the catalog].
    #[arg(value_name = "WORKFLOW")]
    pub(crate) workflow: Option<PathBuf>,
    /// Run the workflow this many times (plugins stay running between runs).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) repeat: u32,
    /// The plugins' state directories go here (`DIR/<plugin>`) [default: a temporary directory
    /// removed at the end].
    #[arg(long = "state-dir", value_name = "DIR")]
    pub(crate) state_dir: Option<PathBuf>,
    /// The artifacts plugins may fetch from the host (`tether.agent.v1.Host/FetchArtifact`),
    /// one file per name; a step gets only those its params name [default: DIR/../artifacts,
    /// next to the catalog].
    #[arg(long, value_name = "DIR")]
    pub(crate) artifacts: Option<PathBuf>,
    /// Serve the plugins' metrics (docs/telemetry.md) in Prometheus's text format at
    /// http://ADDR/metrics while the workflow runs (e.g. 127.0.0.1:9464; port 0 picks a free
    /// one, printed on stderr).
    #[arg(long = "metrics-listen", value_name = "ADDR")]
    pub(crate) metrics_listen: Option<std::net::SocketAddr>,
    /// After the run, keep serving --metrics-listen this long (e.g. 30s), or until SIGINT or
    /// SIGTERM, for a last scrape of the final values.
    #[arg(long = "metrics-linger", value_name = "DURATION", value_parser = humantime::parse_duration, requires = "metrics_listen")]
    pub(crate) metrics_linger: Option<std::time::Duration>,
    /// Export the plugins' metrics over OTLP, configured by the standard variables:
    /// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT), …_PROTOCOL
    /// (http/protobuf, the default, or grpc), …_HEADERS, …_TIMEOUT, and
    /// OTEL_METRIC_EXPORT_INTERVAL (default 60 s); the last values are sent when the run ends.
    #[arg(long = "otlp-metrics")]
    pub(crate) otlp_metrics: bool,
    #[cfg(feature = "kubernetes")]
    #[command(flatten)]
    pub(crate) pods: crate::pods::PodArgs,
}

/// Which plugin: a command line and cookie, or a catalog plugin launched as its manifest says.
#[derive(Debug, Args)]
pub(crate) struct PluginArgs {
    /// The plugin's command line, split like a shell would (e.g. "python3 kv_plugin.py").
    #[arg(
        long,
        value_name = "COMMAND",
        required_unless_present = "catalog",
        requires = "cookie"
    )]
    pub(crate) cmd: Option<String>,
    /// The handshake's magic cookie, KEY=VALUE (e.g. BASIC_PLUGIN=hello).
    #[arg(long, value_name = "KEY=VALUE", requires = "cmd")]
    pub(crate) cookie: Option<String>,
    /// A plugin of the catalog DIR (the one --plugin names), launched as its manifest says
    /// (granted secrets included), instead of --cmd/--cookie. The older `--catalog DIR
    /// PLUGIN` is accepted too, without --plugin.
    #[arg(long, num_args = 1..=2, value_names = ["DIR", "PLUGIN"], conflicts_with_all = ["cmd", "cookie"])]
    pub(crate) catalog: Option<Vec<String>>,
    /// The plugin of --catalog DIR, by its manifest's name.
    #[arg(long, value_name = "NAME", requires = "catalog")]
    pub(crate) plugin: Option<String>,
    #[command(flatten)]
    pub(crate) install: InstallArgs,
}

/// Which plugin to launch and how.
#[derive(Debug, Args)]
pub(crate) struct TargetArgs {
    #[command(flatten)]
    pub(crate) which: PluginArgs,
    /// The plugin's working directory, granted to it read-write [default: none granted: the
    /// plugin starts in its private per-launch directory, removed at the end; never in the
    /// current directory].
    #[arg(long = "work-dir", value_name = "DIR")]
    pub(crate) work_dir: Option<PathBuf>,
    /// App protocol versions to offer (repeatable; with --catalog the manifest's).
    #[arg(long = "app-version", value_name = "N", default_value = "1")]
    pub(crate) app_versions: Vec<u32>,
    /// Turn AutoMTLS off (for plugins that cannot do it). Unauthenticated and unencrypted.
    #[arg(long)]
    pub(crate) plaintext: bool,
    /// Offer go-plugin's multiplexed broker (PLUGIN_MULTIPLEX_GRPC); plugins that do not
    /// accept run in the default mode.
    #[arg(long)]
    pub(crate) multiplex: bool,
    /// With --cmd: let the confined plugin also read and execute below DIR (repeatable). With
    /// --catalog the manifest and the grants decide.
    #[arg(long = "allow-exec", value_name = "DIR", conflicts_with = "catalog")]
    pub(crate) allow_exec: Vec<PathBuf>,
    /// With --cmd: let the confined plugin also read below DIR (repeatable).
    #[arg(long = "allow-read", value_name = "DIR", conflicts_with = "catalog")]
    pub(crate) allow_read: Vec<PathBuf>,
    #[command(flatten)]
    pub(crate) given: GivenArgs,
    /// With --cmd: which interpreter runs the plugin. `auto` recognises python*/node and
    /// scripts whose #! line names one, runs the real interpreter (not a pyenv shim) and lets
    /// the plugin read its installation and the script's project.
    #[arg(long, value_enum, value_name = "RUNTIME", default_value_t = RuntimeArg::Auto, conflicts_with = "catalog")]
    pub(crate) runtime: RuntimeArg,
    /// With --cmd: the plugin's network. `none`: nothing of the host's network, but a loopback
    /// of its own, so a plugin that serves on 127.0.0.1 works (where the host can give it a
    /// network namespace); `host`: the host's network. With --catalog the manifest and the
    /// grants decide.
    #[arg(long, value_enum, value_name = "NETWORK", default_value_t = NetworkArg::None, conflicts_with = "catalog")]
    pub(crate) network: NetworkArg,
}

/// `--network`: [`tether_broker::confine::NetworkMode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum NetworkArg {
    /// No network but its own loopback.
    None,
    /// The host's network.
    Host,
}

impl From<NetworkArg> for tether_broker::confine::NetworkMode {
    fn from(arg: NetworkArg) -> Self {
        match arg {
            NetworkArg::None => Self::None,
            NetworkArg::Host => Self::Host,
        }
    }
}

/// What `call`, `inspect` and `conformance` give the plugin as a host would: secrets, config
/// files, fixed environment values and host services it can call back.
#[derive(Debug, Clone, Args)]
pub(crate) struct GivenArgs {
    /// With --cmd: deliver FILE's contents as the secret NAME (repeatable), as a host delivers
    /// a granted secret: a file in the plugin's private `TETHER_SECRETS_DIR`, never an
    /// environment variable. With --catalog the manifest and the grants decide.
    #[arg(long = "secret", value_name = "NAME=FILE", conflicts_with = "catalog")]
    pub(crate) secret_files: Vec<String>,
    /// With --cmd: deliver FILE's contents as the config file NAME (repeatable), in
    /// `TETHER_CONFIG_DIR`.
    #[arg(long = "config", value_name = "NAME=FILE", conflicts_with = "catalog")]
    pub(crate) config_files: Vec<String>,
    /// With --cmd: set the plugin's environment variable NAME to VALUE (repeatable), for a
    /// plugin that requires a fixed value (e.g. VAULT_PLUGIN_AUTOMTLS_ENABLED=true). The
    /// protocol's own variables cannot be set. With --catalog the manifest's `env` table, as
    /// granted, decides.
    #[arg(long = "env", value_name = "NAME=VALUE", conflicts_with = "catalog")]
    pub(crate) env: Vec<String>,
    /// Serve every service this .proto file declares to the plugin as host services it can
    /// call back (repeatable): a stub that logs each call on stderr (`tether: host call
    /// {"method":…,"metadata":…,"request":…}`) and answers with the --host-reply given for the
    /// method, else the empty response.
    #[arg(long = "host-proto", value_name = "FILE")]
    pub(crate) host_protos: Vec<PathBuf>,
    /// The host-service stub's answer to SERVICE/METHOD, as JSON (repeatable; e.g.
    /// proto.AddHelper/Sum={"r":"3"}).
    #[arg(
        long = "host-reply",
        value_name = "SERVICE/METHOD=JSON",
        requires = "host_protos"
    )]
    pub(crate) host_replies: Vec<String>,
}

/// `--runtime`: [`tether_broker::Runtime`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RuntimeArg {
    /// Recognise Python and Node by the program's name or the script's #! line.
    Auto,
    /// Run the program as it is.
    Native,
    /// A Python interpreter (system, pyenv, virtualenv).
    Python,
    /// Node.js.
    Node,
}

impl From<RuntimeArg> for tether_broker::Runtime {
    fn from(arg: RuntimeArg) -> Self {
        match arg {
            RuntimeArg::Auto => Self::Auto,
            RuntimeArg::Native => Self::Native,
            RuntimeArg::Python => Self::Python,
            RuntimeArg::Node => Self::Node,
        }
    }
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
    /// Request metadata, 'NAME: VALUE' as grpcurl writes it (repeatable); a NAME ending in
    /// `-bin` is sent base64-encoded, as gRPC binary metadata is.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    pub(crate) headers: Vec<String>,
    /// The largest response message `call` decodes; a larger one fails the call (exit 1). A
    /// number of bytes, or with KiB, MiB or GiB.
    #[arg(long, value_name = "BYTES", default_value_t = limits::DEFAULT_MAX_MESSAGE_SIZE)]
    pub(crate) max_message_size: limits::ByteCount,
    /// How long the call may take, every response of a stream included; then it is cancelled
    /// (exit 1).
    #[arg(long, value_name = "DURATION", default_value_t = limits::DEFAULT_MAX_TIME.into())]
    pub(crate) max_time: humantime::Duration,
    /// How many bytes of responses (their JSON lines) are printed at most; a stream that
    /// answers more is cancelled (exit 1). A number of bytes, or with KiB, MiB or GiB.
    #[arg(long, value_name = "BYTES", default_value_t = limits::DEFAULT_MAX_OUTPUT)]
    pub(crate) max_bytes: limits::ByteCount,
}

#[derive(Debug, Args)]
pub(crate) struct InspectArgs {
    #[command(flatten)]
    pub(crate) target: TargetArgs,
}

/// `tether conformance`: which plugin to check (see `conformance`), and the checks' timeouts.
#[derive(Debug, Args)]
pub(crate) struct ConformanceArgs {
    #[command(flatten)]
    pub(crate) which: PluginArgs,
    /// App protocol versions the plugin supports (repeatable; with --catalog the manifest's)
    /// [default: 1, or the one version the plugin answers when offered 1 (a Terraform provider
    /// or a Vault plugin answers 5)].
    #[arg(long = "app-version", value_name = "N")]
    pub(crate) app_versions: Vec<u32>,
    /// How long the plugin may take to print its handshake line (Python plugins take ~0.5 s
    /// on a loaded machine).
    #[arg(long, value_name = "DURATION", default_value = "20s")]
    pub(crate) start_timeout: humantime::Duration,
    /// How long after `GRPCController.Shutdown` the plugin may take to exit (go-plugin: 2s).
    #[arg(long, value_name = "DURATION", default_value = "2s")]
    pub(crate) grace: humantime::Duration,
    /// How long after its host dies the plugin may take to exit (a pidfd watch takes
    /// milliseconds).
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub(crate) host_death_timeout: humantime::Duration,
    /// Given to every launch of the checks, as `call` gives them; with --call they make the
    /// host-service callback (§10.1) and secrets (§10.2) checks run.
    #[command(flatten)]
    pub(crate) given: GivenArgs,
    /// Request metadata of every call the checks make, 'NAME: VALUE' as for `call`
    /// (repeatable).
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    pub(crate) headers: Vec<String>,
    /// One call that exercises the plugin, SERVICE/METHOD (e.g. proto.Counter/Put), for the
    /// checks of host-service callbacks (with --host-proto: the call must call one back) and
    /// of secrets (with --secret: the call must succeed with them delivered and fail
    /// without). Types come from the plugin's server reflection, else the --host-proto files.
    #[arg(long = "call", value_name = "SERVICE/METHOD")]
    pub(crate) call: Option<String>,
    /// The request of --call, as JSON (protobuf's canonical JSON mapping).
    #[arg(
        long = "data",
        value_name = "JSON",
        default_value = "{}",
        requires = "call"
    )]
    pub(crate) data: String,
    /// How long each --call may take (the checks make it twice with --secret).
    #[arg(
        long = "call-time",
        value_name = "DURATION",
        default_value = "30s",
        requires = "call"
    )]
    pub(crate) call_time: humantime::Duration,
}
