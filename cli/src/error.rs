//! The CLI's errors, their exit statuses and how they are printed.

use std::path::PathBuf;

use tether_agent::host::RunError;

/// Exit status: the plugin answered with a gRPC error.
pub(crate) const EXIT_CALL: u8 = 1;
/// Exit status: the plugin could not be started or ended badly.
pub(crate) const EXIT_START: u8 = 3;
/// Exit status: bad input (method, JSON, .proto files).
pub(crate) const EXIT_INPUT: u8 = 4;

/// Everything that can go wrong, one variant per cause the user can act on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
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
    /// The plugin did not start.
    #[error("the plugin did not start")]
    Start(#[source] Box<tether_host::StartError>),
    /// The plugin did not end cleanly.
    #[error("the plugin did not shut down cleanly")]
    Shutdown(#[source] tether_host::ShutdownError),
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
    /// The method is not in the service.
    #[error("service {service} has no method {method:?}; its methods: {known}")]
    UnknownMethod {
        service: String,
        method: String,
        known: String,
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
    /// The current directory cannot be read (to find `./catalog`).
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
    /// The grants file is bad.
    #[error("the grants file cannot be used")]
    Grants(#[source] tether_host::catalog::ManifestError),
    /// `list`/`check` found problems (already printed).
    #[error("the catalog has {count} problem(s), listed above")]
    CatalogProblems { count: usize },
    /// `--catalog DIR PLUGIN` names no plugin of the catalog.
    #[error("plugin `{plugin}` is not in the catalog {}; it has: {known}", catalog.display())]
    UnknownPlugin {
        plugin: String,
        catalog: PathBuf,
        known: String,
    },
    /// A secret or config file of the plugin cannot be delivered.
    #[error("cannot deliver what plugin `{plugin}` needs: {reason}")]
    Delivery { plugin: String, reason: String },
    /// The workflow file is bad.
    #[error("{0}")]
    Workflow(#[source] tether_agent::host::WorkflowError),
    /// The state directory cannot be made.
    #[error("cannot create a temporary state directory")]
    StateDir(#[source] std::io::Error),
    /// A step could not run, or ran and reported failure.
    #[error(transparent)]
    Run(tether_agent::host::RunError),
    /// The plugin answered with a gRPC error.
    #[error("{method} failed: {code:?}: {message}", code = status.code(), message = status.message())]
    Call {
        method: String,
        status: Box<tonic::Status>,
    },
}

impl CliError {
    /// The process exit status for this error.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Self::Call { .. }
            | Self::Run(RunError::StepFailed { .. })
            | Self::NotConforming { .. } => EXIT_CALL,
            Self::Start(_)
            | Self::Shutdown(_)
            | Self::Run(_)
            | Self::Delivery { .. }
            | Self::StateDir(_) => EXIT_START,
            Self::NoCatalog { .. }
            | Self::CurrentDir(_)
            | Self::Catalog { .. }
            | Self::Grants(_)
            | Self::CatalogProblems { .. }
            | Self::UnknownPlugin { .. }
            | Self::Workflow(_) => EXIT_INPUT,
            Self::BadCommand { .. }
            | Self::BadCookie(_)
            | Self::BadMethodSyntax(_)
            | Self::Proto { .. }
            | Self::Reflection { .. }
            | Self::UnknownService { .. }
            | Self::UnknownMethod { .. }
            | Self::ClientStreaming(_)
            | Self::BadRequest { .. }
            | Self::BadResponse(_) => EXIT_INPUT,
        }
    }
}

/// One line `tether: error: …`, then one `  caused by: …` line per source.
pub(crate) fn render(err: &CliError) -> String {
    let mut out = format!("tether: error: {err}");
    // A workflow error already says everything in one line.
    let mut source = match err {
        CliError::Workflow(_) => None,
        _ => std::error::Error::source(err),
    };
    while let Some(cause) = source {
        out.push_str(&format!("\n  caused by: {cause}"));
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
