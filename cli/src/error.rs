//! The CLI's errors, their exit statuses and how they are printed.

use std::path::PathBuf;

use tether_agent::host::RunError;
use tether_proto::text::{escape, escape_lines};

/// Exit status: the plugin answered with a gRPC error.
pub(crate) const EXIT_CALL: u8 = 1;
/// Exit status: usage error (bad flags or arguments; clap's own too).
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit status: the plugin could not be started or ended badly.
pub(crate) const EXIT_START: u8 = 3;
/// Exit status: bad input (method, JSON, .proto files).
pub(crate) const EXIT_INPUT: u8 = 4;
/// Exit status when stdout was closed before everything was written (`| head -1`): 128 +
/// `SIGPIPE`, what a shell reports for a program that `SIGPIPE` ended (`yes | head -1`), so
/// pipelines behave as with any other tool. Nothing is printed.
pub(crate) const EXIT_BROKEN_PIPE: u8 = 141;

/// The end of `tether --help`: how to see a plugin's output, and each exit status once (the
/// constants above; the table in docs/cli.md says the same).
pub(crate) const AFTER_HELP: &str = "\
Plugin output: a plugin's stderr, stdout and GRPCStdio lines are logged on stderr: its
warnings and errors always, everything it prints with -v.

Exit status:
  0    success
  1    the plugin answered the call with a gRPC error; a workflow step failed (run)
  2    usage error (bad flags or arguments)
  3    the plugin (or a step's plugin) could not be started, is not where it was
       looked for, is not an executor (run), or ended badly
  4    bad input: unknown service or method, JSON that does not fit the message,
       unreadable .proto, unknown plugin, bad workflow, no catalog found, a catalog
       with problems (a broken manifest, a bad grants file; check's warnings do not
       count)
  141  stdout was closed before everything was written (e.g. | head -1); nothing is printed";

/// Everything that can go wrong, one variant per cause the user can act on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Flags that clap accepts but that do not fit together (`--catalog DIR X --plugin Y`).
    #[error("{0}")]
    Usage(String),
    /// `--cmd` is empty or not shell-splittable.
    #[error("--cmd {cmd:?} is not a command line: {reason}")]
    BadCommand { cmd: String, reason: String },
    /// `conformance`: required checks failed (the table says which and what to change).
    #[error("the plugin does not conform: {failed} required check(s) failed (see the table above)")]
    NotConforming { failed: usize },
    /// `--cookie` is not KEY=VALUE.
    #[error("--cookie {0:?} is not of the form KEY=VALUE (e.g. BASIC_PLUGIN=hello)")]
    BadCookie(String),
    /// The method argument is not SERVICE/METHOD.
    #[error("{0:?} is not of the form SERVICE/METHOD (e.g. proto.KV/Get)")]
    BadMethodSyntax(String),
    /// The plugin's program is in none of the places it was looked for.
    #[error(
        "plugin `{plugin}`{}: its program is in none of the places searched: {searched}; build or install it there",
        manifest.as_ref().map(|m| format!(" ({})", m.display())).unwrap_or_default()
    )]
    MissingBinary {
        plugin: String,
        /// The manifest, for a catalog plugin.
        manifest: Option<PathBuf>,
        searched: crate::binary::Searched,
    },
    /// The plugin did not start (launched from `manifest`, for a catalog plugin).
    #[error(
        "the plugin did not start{}",
        manifest.as_ref().map(|m| format!(" (its manifest: {})", m.display())).unwrap_or_default()
    )]
    Start {
        manifest: Option<PathBuf>,
        #[source]
        source: Box<tether_broker::StartError>,
    },
    /// The plugin did not end cleanly.
    #[error("the plugin did not shut down cleanly")]
    Shutdown(#[source] tether_broker::ShutdownError),
    /// `--proto` files do not compile.
    #[error("cannot compile the --proto files {files:?}")]
    Proto {
        files: Vec<PathBuf>,
        #[source]
        source: Box<protox::Error>,
    },
    /// Reflection was needed but failed.
    #[error(
        "cannot learn the message types of {service} from the plugin's server reflection; pass the service's .proto file with --proto"
    )]
    Reflection {
        service: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The service is not in the descriptors.
    #[error("service {service:?} is not declared in {origin}; known services: {known}")]
    UnknownService {
        service: String,
        origin: &'static str,
        known: String,
    },
    /// The plugin's server reflection does not list the service.
    #[error(
        "the plugin's server reflection does not list service {service:?}; it has: {known} (if the plugin serves {service} without describing it, pass the service's .proto file with --proto)"
    )]
    NotReflected { service: String, known: String },
    /// The method is not in the service.
    #[error("service {service} has no method {method:?}; its methods: {known}")]
    UnknownMethod {
        service: String,
        method: String,
        known: String,
    },
    /// The call took longer than `--max-time`; it was cancelled.
    #[error(
        "{method} took longer than {max_time} (--max-time); cancelled after {responses} response(s)"
    )]
    CallTimeout {
        method: String,
        max_time: humantime::Duration,
        responses: u64,
    },
    /// The responses' JSON passed `--max-bytes`; the call was cancelled.
    #[error(
        "{method} answered more than {max_bytes} of output (--max-bytes); cancelled after {responses} response(s)"
    )]
    OutputLimit {
        method: String,
        max_bytes: crate::limits::ByteCount,
        responses: u64,
    },
    /// A response was larger than `--max-message-size`.
    #[error(
        "{method} answered a message larger than {limit} (--max-message-size); raise the limit to read it"
    )]
    MessageTooLarge {
        method: String,
        limit: crate::limits::ByteCount,
    },
    /// Client streaming is not supported by `call`.
    #[error("{0} takes a stream of requests, which `tether call` does not support yet")]
    ClientStreaming(String),
    /// The request JSON does not match the input message.
    #[error("the request does not fit message {message}")]
    BadRequest {
        message: String,
        #[source]
        source: serde_json::Error,
    },
    /// The response cannot be written as JSON.
    #[error("the response cannot be written as JSON")]
    BadResponse(#[source] serde_json::Error),
    /// No catalog was named and there is none in the current directory.
    #[error(
        "no catalog: --catalog DIR was not given, ${env} is not set, and there is no ./{default} directory in {}; pass --catalog DIR or set {env}",
        cwd.display(),
        env = crate::catalog_origin::CATALOG_ENV,
        default = crate::catalog_origin::DEFAULT_CATALOG
    )]
    NoCatalog { cwd: PathBuf },
    /// The current directory cannot be read (to find `./catalog`, or to make a relative path
    /// absolute).
    #[error("cannot read the current directory")]
    CurrentDir(#[source] std::io::Error),
    /// The catalog directory cannot be read.
    #[error("cannot read the catalog directory {} (from {origin})", dir.display())]
    Catalog {
        dir: PathBuf,
        origin: crate::catalog_origin::Origin,
        #[source]
        source: std::io::Error,
    },
    /// The grants file is bad: every problem found, one per line.
    #[error("the grants file cannot be used:{}", indented(.0.as_slice()))]
    Grants(tether_broker::catalog::CatalogFileErrors),
    /// The plugin's manifest did not load: its problems, one per line.
    #[error(
        "plugin `{plugin}` cannot be used: its manifest has problems:{}",
        indented(errors)
    )]
    BrokenManifest {
        plugin: String,
        errors: Vec<tether_broker::catalog::CatalogFileError>,
    },
    /// `list`/`check` found problems (already printed).
    #[error("the catalog has {count} problem(s), listed above")]
    CatalogProblems { count: usize },
    /// `--catalog DIR --plugin NAME` names no plugin of the catalog (whose broken manifests, which
    /// may be that plugin's, are listed).
    #[error("plugin `{plugin}` is not in the catalog {}; it has: {known}{}", catalog.display(), broken.iter().map(|e| format!("\n  not loaded: {e}")).collect::<String>())]
    UnknownPlugin {
        plugin: String,
        catalog: PathBuf,
        known: String,
        broken: Vec<String>,
    },
    /// The plugin's manifest asks for what is not granted, or a secret or config file of it
    /// cannot be delivered.
    #[error("cannot launch plugin `{plugin}` as its manifest says: {reason}")]
    Delivery { plugin: String, reason: String },
    /// A `--secret` or `--config` file cannot be read.
    #[error("{flag} {name}={}: the file cannot be read", path.display())]
    ValueFile {
        flag: &'static str,
        name: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The workflow file is bad.
    #[error("{0}")]
    Workflow(#[source] tether_agent::host::WorkflowError),
    /// The state directory cannot be made.
    #[error("cannot create a temporary state directory")]
    StateDir(#[source] std::io::Error),
    /// `--metrics-listen` / `--otlp-metrics` could not be set up: the address cannot be bound,
    /// an `OTEL_*` variable has a value this build cannot use, the exporter cannot be built.
    #[error("metrics: {what}: {reason}")]
    Metrics { what: String, reason: String },
    /// A step could not run, or ran and reported failure.
    #[error(transparent)]
    Run(tether_agent::host::RunError),
    /// Standard output cannot be written: closed early ([`is_quiet`](Self::is_quiet)) or
    /// another write error.
    #[error("cannot write to standard output")]
    Output(#[source] std::io::Error),
    /// The plugin answered with a gRPC error.
    #[error("{method} failed: {code:?}: {message}", code = status.code(), message = escape(status.message()))]
    Call {
        method: String,
        status: Box<tonic::Status>,
    },
    /// The plugin exited during the call.
    #[error(
        "plugin `{plugin}` exited during {method} ({exit}){}",
        tail_lines(stderr_tail)
    )]
    Crashed {
        plugin: String,
        method: String,
        exit: std::process::ExitStatus,
        stderr_tail: String,
        /// What the call saw.
        #[source]
        status: Box<tonic::Status>,
    },
}

/// Each item on a line of its own, indented.
fn indented(items: &[impl std::fmt::Display]) -> String {
    items.iter().map(|item| format!("\n  {item}")).collect()
}

/// `; its stderr ended with:` and the tail's lines, indented; nothing for an empty tail.
fn tail_lines(tail: &str) -> String {
    let lines: Vec<&str> = tail.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return "; it wrote nothing to stderr".to_owned();
    }
    let mut out = String::from("; its stderr ended with:");
    for line in lines {
        out.push_str("\n  | ");
        out.push_str(&escape(line).to_cow());
    }
    out
}

impl CliError {
    /// The process exit status for this error.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Self::Call { .. }
            | Self::CallTimeout { .. }
            | Self::OutputLimit { .. }
            | Self::MessageTooLarge { .. }
            | Self::Run(RunError::StepFailed { .. })
            | Self::NotConforming { .. } => EXIT_CALL,
            Self::Output(_) => EXIT_BROKEN_PIPE,
            Self::Usage(_)
            | Self::BadCommand { .. }
            | Self::BadCookie(_)
            | Self::BadMethodSyntax(_)
            | Self::Metrics { .. } => EXIT_USAGE,
            Self::Start { .. }
            | Self::MissingBinary { .. }
            | Self::Crashed { .. }
            | Self::Shutdown(_)
            | Self::Run(_)
            | Self::Delivery { .. }
            | Self::StateDir(_) => EXIT_START,
            Self::NoCatalog { .. }
            | Self::CurrentDir(_)
            | Self::Catalog { .. }
            | Self::Grants(_)
            | Self::BrokenManifest { .. }
            | Self::CatalogProblems { .. }
            | Self::UnknownPlugin { .. }
            | Self::ValueFile { .. }
            | Self::Workflow(_) => EXIT_INPUT,
            Self::Proto { .. }
            | Self::Reflection { .. }
            | Self::UnknownService { .. }
            | Self::NotReflected { .. }
            | Self::UnknownMethod { .. }
            | Self::ClientStreaming(_)
            | Self::BadRequest { .. }
            | Self::BadResponse(_) => EXIT_INPUT,
        }
    }
}

impl CliError {
    /// [`CliError::MissingBinary`] for `--cmd`'s `program` (named, like the host names a
    /// plugin, after its file name).
    pub(crate) fn missing_program(program: &str, searched: crate::binary::Searched) -> Self {
        Self::MissingBinary {
            plugin: std::path::Path::new(program)
                .file_name()
                .map_or_else(|| program.to_owned(), |n| n.to_string_lossy().into_owned()),
            manifest: None,
            searched,
        }
    }

    /// Whether nothing should be printed: stdout was closed by its reader (`| head -1`), which
    /// is how such a pipeline ends, not a failure to explain.
    pub(crate) fn is_quiet(&self) -> bool {
        matches!(self, Self::Output(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

/// One line `tether: error: …`, then one `  caused by: …` line per source; each
/// [escaped](tether_proto::text) for a terminal, whatever its source quoted from a plugin (the
/// errors that quote one escape it themselves, on one line).
pub(crate) fn render(err: &CliError) -> String {
    let mut out = format!("tether: error: {}", escape_lines(&err.to_string()));
    // A workflow error already says everything in one line.
    let mut source = match err {
        CliError::Workflow(_) => None,
        _ => std::error::Error::source(err),
    };
    while let Some(cause) = source {
        out.push_str(&format!(
            "\n  caused by: {}",
            escape_lines(&cause.to_string())
        ));
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_print_one_sentence_then_their_causes() {
        let err = CliError::BadRequest {
            message: "proto.GetRequest".into(),
            source: serde_json::from_str::<serde_json::Value>("{").unwrap_err(),
        };
        let text = render(&err);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "tether: error: the request does not fit message proto.GetRequest"
        );
        assert!(lines[1].starts_with("  caused by: EOF"), "{text}");
        assert_eq!(err.exit_code(), EXIT_INPUT);
    }
}
