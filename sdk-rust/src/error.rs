//! Why a plugin could not start or stopped serving, and why it stopped when all went well.

use std::io;
use std::path::PathBuf;

use tether_proto::env::LaunchEnvError;
use tether_proto::tls::TlsError;

pub use tether_proto::env::NOT_LAUNCHED_BY_HOST_MESSAGE;

/// Why a plugin could not start, or stopped serving with an error.
///
/// Variants are grouped by the phase in which they happen: configuration (a bug in the
/// plugin), environment (how the plugin was launched), listening, TLS, and serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // --- Configuration: mistakes in the plugin's own code. ---
    /// The cookie key or value given to [`ServeOptions::new`](crate::ServeOptions::new) is empty.
    #[error("misconfigured plugin: the magic cookie key and value must not be empty")]
    EmptyCookie,
    /// The [`ServeOptions`](crate::ServeOptions) list no app protocol versions.
    #[error("misconfigured plugin: it supports no app protocol versions")]
    NoAppVersions,
    /// A service was added with [`Plugin::add_service_for`](crate::Plugin::add_service_for) for
    /// a version the [`ServeOptions`](crate::ServeOptions) do not list.
    #[error(
        "misconfigured plugin: service {service} was added for app protocol version {version}, which its ServeOptions do not list"
    )]
    ServiceForUnsupportedVersion {
        /// The gRPC service name.
        service: &'static str,
        /// The version it was added for.
        version: u32,
    },
    /// The same gRPC service would be served twice, or an added service has the name of one the
    /// SDK serves itself (`grpc.health.v1.Health`, `plugin.GRPCController`).
    #[error("misconfigured plugin: gRPC service {service} is served more than once")]
    DuplicateService {
        /// The gRPC service name.
        service: &'static str,
    },
    /// A descriptor set given to
    /// [`Plugin::file_descriptor_set`](crate::Plugin::file_descriptor_set) is not an encoded
    /// `FileDescriptorSet`, or misses a file another one imports.
    #[error(
        "misconfigured plugin: the file descriptor sets for server reflection are invalid: {0}; pass the `.bin` written by tether-codegen or tonic-prost-build's file_descriptor_set_path"
    )]
    InvalidDescriptors(#[source] tonic_reflection::server::Error),

    // --- Environment: how the plugin was launched. ---
    /// The host's launch environment is unusable: for a missing or wrong cookie (see
    /// [`Error::is_not_launched_by_host`]) the plugin was most likely run by hand, and this
    /// displays go-plugin's message for humans ([`NOT_LAUNCHED_BY_HOST_MESSAGE`]).
    #[error(transparent)]
    LaunchEnv(#[from] LaunchEnvError),

    // --- Listen: making the socket the host connects to. ---
    /// The private directory for the unix socket could not be created.
    #[error("creating a private directory for the plugin's socket in {dir} failed: {source}")]
    SocketDir {
        /// The directory in which it was to be created.
        dir: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The unix socket could not be bound.
    #[error("listening on a unix socket in {dir} failed: {source}")]
    BindUnix {
        /// The directory the socket was to be created in.
        dir: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// No port in the allowed range could be bound on `127.0.0.1`.
    #[error("listening on 127.0.0.1 failed for every port in {min}..={max}; last error: {source}")]
    BindTcp {
        /// The lowest port tried.
        min: u16,
        /// The highest port tried.
        max: u16,
        /// The error for the last port tried.
        #[source]
        source: io::Error,
    },

    // --- TLS: AutoMTLS set-up. ---
    /// The plugin's own key pair and certificate could not be generated.
    #[error("generating the plugin's TLS identity failed: {0}")]
    Identity(#[source] TlsError),
    /// rustls refused the TLS server configuration.
    #[error("building the TLS server configuration failed: {0}")]
    TlsConfig(#[source] TlsError),

    // --- Serve: running. ---
    /// The tokio runtime could not be built (only [`Plugin::run`](crate::Plugin::run) and
    /// [`Plugin::try_run`](crate::Plugin::try_run) build one).
    #[error("building the tokio runtime failed: {0}")]
    Runtime(#[source] io::Error),
    /// Watching for the host's exit or for signals could not be set up.
    #[error("setting up {what} failed: {source}")]
    Watch {
        /// What was being set up.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The handshake line could not be written to stdout (e.g. the host closed the pipe).
    #[error("writing the handshake line to stdout failed: {0}")]
    Handshake(#[source] io::Error),
    /// The gRPC server failed.
    #[error("the gRPC server failed: {0}")]
    Serve(#[source] tonic::transport::Error),
    /// The gRPC server stopped although nobody asked it to.
    #[error("the gRPC server stopped unexpectedly")]
    ServerStopped,
}

impl Error {
    /// Whether this error means the plugin was not launched by its host (cookie missing or
    /// wrong), in which case the message is for a human who ran it by hand.
    #[must_use]
    pub fn is_not_launched_by_host(&self) -> bool {
        matches!(self, Self::LaunchEnv(error) if error.is_not_launched_by_host())
    }
}

/// Why a plugin stopped serving without an error. Each of these is a normal end: the process
/// should exit with status 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// The host called `GRPCController.Shutdown`.
    ShutdownRequested,
    /// The process received SIGTERM.
    Terminated,
    /// The process received SIGINT (see [`ServeOptions::ignore_sigint`](crate::ServeOptions::ignore_sigint)).
    Interrupted,
    /// The process that launched the plugin exited.
    HostExited,
}
