//! Why a catalog plugin could not be used: [`UseError`].

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use tether_proto::ValueKind;

use crate::catalog::request::NotGranted;
use crate::error::StartError;

/// Why a plugin could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UseError {
    /// No plugin of that name loaded from the catalog.
    #[error(
        "no plugin named `{plugin}` in the catalog; check its manifest (bad manifests are listed by `Catalog::errors`)"
    )]
    UnknownPlugin {
        /// The name asked for.
        plugin: String,
    },
    /// The manifest asks for a secret or config file that is not granted.
    #[error(transparent)]
    NotGranted(#[from] NotGranted),
    /// A granted value is not in its source.
    #[error(
        "plugin `{plugin}` needs {kind} `{name}`, but the {kind} source ({source_name}) has no value of that name; add it there"
    )]
    MissingValue {
        /// The plugin.
        plugin: String,
        /// `secret` or `config`.
        kind: ValueKind,
        /// The name.
        name: String,
        /// The source's description.
        source_name: String,
    },
    /// A value source could not be read.
    #[error("cannot read {kind} `{name}` for plugin `{plugin}`: {source}")]
    Source {
        /// The plugin.
        plugin: String,
        /// `secret` or `config`.
        kind: ValueKind,
        /// The name.
        name: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The plugin's state (working) directory cannot be made.
    #[error("cannot create the state directory {} of plugin `{plugin}`: {source}", path.display())]
    StateDir {
        /// The plugin.
        plugin: String,
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Starting the plugin failed.
    #[error(transparent)]
    Start(#[from] Box<StartError>),
    /// The plugin exited while in use.
    #[error(
        "plugin `{plugin}` crashed ({status}); calls in flight failed. stderr (tail): {stderr_tail:?}. It is restarted on the next use"
    )]
    Crashed {
        /// The plugin.
        plugin: String,
        /// Its exit status (code or signal).
        status: ExitStatus,
        /// The end of what it wrote to stderr.
        stderr_tail: String,
    },
    /// The plugin stopped answering health checks and was killed.
    #[error(
        "plugin `{plugin}` hung ({reason}) and was killed; calls in flight failed. It is restarted on the next use"
    )]
    Hung {
        /// The plugin.
        plugin: String,
        /// What the health check saw.
        reason: String,
    },
    /// The call got no answer within the host-side call timeout ([`DEFAULT_CALL_TIMEOUT`](crate::supervisor::DEFAULT_CALL_TIMEOUT)).
    #[error(
        "plugin `{plugin}` did not answer within {timeout:?}{}",
        if *recycled { "; its calls keep running out their deadline, so it was killed and is restarted on the next use" } else { "; the call was abandoned (raise `call_timeout` if the call is legitimately slow)" }
    )]
    DeadlineExceeded {
        /// The plugin.
        plugin: String,
        /// The call timeout that ran out.
        timeout: Duration,
        /// Whether this call completed the run of deadlines after which the plugin is recycled
        /// ([`DEFAULT_RECYCLE_AFTER_DEADLINES`](crate::supervisor::DEFAULT_RECYCLE_AFTER_DEADLINES)).
        recycled: bool,
    },
    /// The plugin crashed too often: it is not restarted.
    #[error(
        "plugin `{plugin}` keeps crashing: {crashes} crashes within {window:?} (the manifest allows {max_restarts} restarts); last exit {last_status}, stderr (tail): {stderr_tail:?}. Fix the plugin; it is restarted once its crashes are older than {window:?}"
    )]
    KeepsCrashing {
        /// The plugin.
        plugin: String,
        /// Recent crashes.
        crashes: usize,
        /// The restart window.
        window: Duration,
        /// The restarts the manifest allows.
        max_restarts: u32,
        /// The last crash's exit status.
        last_status: ExitStatus,
        /// The end of its stderr then.
        stderr_tail: String,
    },
    /// The call failed while the plugin kept running: the plugin's own answer.
    #[error("plugin `{plugin}` answered with an error: {status}")]
    Call {
        /// The plugin.
        plugin: String,
        /// The gRPC status.
        status: Box<tonic::Status>,
    },
    /// The broker was shut down.
    #[error("the broker is shut down; plugin `{plugin}` cannot be used")]
    ShutDown {
        /// The plugin.
        plugin: String,
    },
}
