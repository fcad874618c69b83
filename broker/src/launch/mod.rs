//! Launching one plugin: the builder, the stages (spawn → handshake → connect → health), the
//! running client, its output, its ending, and reattaching to a plugin started elsewhere.

pub(crate) mod address;
pub(crate) mod builder;
pub(crate) mod client;
pub(crate) mod connect;
pub(crate) mod delivery;
pub(crate) mod env;
pub(crate) mod error;
pub(crate) mod handshake;
pub(crate) mod health;
pub(crate) mod interpreted;
pub(crate) mod launched;
pub(crate) mod once;
pub(crate) mod output;
pub(crate) mod plan;
pub(crate) mod private_dir;
pub(crate) mod reattach;
pub(crate) mod runner;
pub(crate) mod settings;
pub(crate) mod shutdown;
pub(crate) mod stages;
pub(crate) mod telemetry;
pub(crate) mod timeouts;
pub(crate) mod traced;
pub(crate) mod world;

pub use builder::{NoHandshake, PluginClientBuilder};
pub use client::PluginClient;
pub use delivery::{Delivery, delivery_base};
pub use env::DEFAULT_ENV_ALLOWLIST;
pub use handshake::{MAX_QUOTED_STDOUT, MAX_QUOTED_STRAY_LINE};
pub use interpreted::denial::{Allowance, Denial};
pub use interpreted::module::MissingModule;
pub use interpreted::network::NetworkRefusal;
pub use interpreted::runtime::{
    Interpreter, MAX_PROJECT_DEPTH, MAX_RUNTIME_ANSWER_LEN, ResolvedRuntime, Runtime, RuntimeError,
};
pub use once::RunOnceError;
pub use output::limits::{
    DEFAULT_MAX_STRAY_BYTES, DEFAULT_MAX_STRAY_LINES, DEFAULT_STDERR_TAIL_LEN, OutputLimits,
};
pub use output::sink::{LogLevel, OutputLine, OutputSink, OutputSource};
pub use output::{MAX_LOG_LINE_LEN, PLUGIN_LOG_TARGET};
pub use private_dir::{MAX_PRIVATE_DIR_BASE_LEN, MAX_SOCKET_PATH_LEN, SOCKET_NAME_RESERVE};
pub use reattach::{
    ReattachAddr, ReattachConfig, ReattachError, ReattachTls, ReattachedOutcome, ReattachedPlugin,
};
pub use runner::gvisor::bundle::{DELIVERED_DIR, SOCKET_DIR, STATE_DIR};
#[cfg(feature = "kubernetes")]
pub use runner::kubernetes::options::{
    ClusterAccess, Connection, DEFAULT_POD_PORT, DEFAULT_POD_START_TIMEOUT, DEFAULT_RUN_AS_USER,
    HOST_LABEL, KubernetesOptions, MANAGED_BY, MANAGED_BY_LABEL, Owner, PLUGIN_LABEL,
    POD_CONFIG_DIR, POD_SECRETS_DIR, POD_TMP_DIR, POD_WORK_DIR, SHIM_IN_SHIM_IMAGE,
    SHIM_INSTALL_DIR,
};
#[cfg(feature = "kubernetes")]
pub use runner::kubernetes::sweep;
pub use runner::options::{DEFAULT_RUNSC, GvisorOptions, RUNSC_INSTALL_HINT, Runner};
pub use settings::HandshakeConfig;
pub use shutdown::KILL_REAP_TIMEOUT;
pub use telemetry::{DEFAULT_TRACE_CONTEXT, Telemetry};
pub use tether_proto::handshake::Address;
pub use timeouts::{
    DEFAULT_AFTER_STRAY_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_HEALTH_TIMEOUT,
    DEFAULT_INTERPRETER_QUERY_TIMEOUT, DEFAULT_MODULE_LOOKUP_TIMEOUT, DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_SHUTDOWN_RPC_TIMEOUT, DEFAULT_START_TIMEOUT, DEFAULT_TERMINATE_GRACE, Timeouts,
};
