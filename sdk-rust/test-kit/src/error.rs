//! [`KitError`]: why the test kit could not set up, connect or clean up.

use std::path::PathBuf;

/// Why a [`TestHost`](crate::TestHost) or a [`Launched`](crate::Launched) plugin failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KitError {
    /// A temporary directory, file or socket could not be made.
    #[error("test kit: {what}: {source}")]
    Io {
        /// What was being made.
        what: &'static str,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// The AutoMTLS identities could not be made.
    #[error("test kit: AutoMTLS identities: {0}")]
    Tls(#[from] tether_proto::tls::TlsError),
    /// The fake host could not connect to the in-process plugin.
    #[error("test kit: connecting to the in-process plugin: {0}")]
    Connect(#[from] tether_transport::ConnectError),
    /// The fake host could not serve its host services.
    #[error("test kit: serving the host services: {0}")]
    HostServices(#[from] tether_transport::GrpcBrokerError),
    /// The plugin could not be launched.
    #[error("test kit: launching the plugin: {0}")]
    Start(#[from] Box<tether_broker::StartError>),
    /// Shutting the launched plugin down failed.
    #[error("test kit: shutting the plugin down: {0}")]
    Shutdown(#[from] tether_broker::ShutdownError),
    /// After shutdown something of the plugin is still there.
    #[error("test kit: after shutdown {what} is left behind: {}", path.display())]
    LeftBehind {
        /// A process, a socket, a directory.
        what: &'static str,
        /// Its path (`/proc/<pid>` for a process).
        path: PathBuf,
    },
}
