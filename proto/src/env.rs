//! Names of the environment variables that carry the launch half of the handshake.
//!
//! A host sets these in the plugin's (otherwise empty) environment; a plugin reads them at
//! start-up. The names and meanings are go-plugin's, so Go hosts and plugins understand them;
//! the `TETHER_*` names are tether's own additions that Go peers ignore.

/// Comma-separated app protocol versions the host supports, e.g. `1,2`.
pub const PROTOCOL_VERSIONS: &str = "PLUGIN_PROTOCOL_VERSIONS";

/// Lowest TCP port a plugin may listen on when it serves over TCP.
pub const MIN_PORT: &str = "PLUGIN_MIN_PORT";

/// Highest TCP port a plugin may listen on when it serves over TCP.
pub const MAX_PORT: &str = "PLUGIN_MAX_PORT";

/// AutoMTLS: the host's certificate, PEM encoded. Its presence turns TLS on.
pub const CLIENT_CERT: &str = "PLUGIN_CLIENT_CERT";

/// Set (to `true`) when the host supports go-plugin's multiplexed broker.
pub const MULTIPLEX_GRPC: &str = "PLUGIN_MULTIPLEX_GRPC";

/// Directory in which the plugin should create its unix socket.
pub const UNIX_SOCKET_DIR: &str = "PLUGIN_UNIX_SOCKET_DIR";

/// Group that should own the plugin's unix socket.
pub const UNIX_SOCKET_GROUP: &str = "PLUGIN_UNIX_SOCKET_GROUP";

/// tether: absolute path of the plugin's private directory of granted secrets.
pub const SECRETS_DIR: &str = "TETHER_SECRETS_DIR";

/// tether: absolute path of the plugin's private directory of granted config files.
pub const CONFIG_DIR: &str = "TETHER_CONFIG_DIR";

/// Default lowest TCP port (go-plugin's default).
pub const DEFAULT_MIN_PORT: u16 = 10_000;

/// Default highest TCP port (go-plugin's default).
pub const DEFAULT_MAX_PORT: u16 = 25_000;

/// Every variable name the protocol defines. A host that clears the environment passes these
/// (and the cookie) explicitly.
pub const ALL: &[&str] = &[
    PROTOCOL_VERSIONS,
    MIN_PORT,
    MAX_PORT,
    CLIENT_CERT,
    MULTIPLEX_GRPC,
    UNIX_SOCKET_DIR,
    UNIX_SOCKET_GROUP,
    SECRETS_DIR,
    CONFIG_DIR,
];
