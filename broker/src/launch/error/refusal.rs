//! The facts a [`StartError`](crate::StartError) refers to when the host refused what a
//! plugin announced: an incompatible handshake ([`Incompatibility`]) or an address it does not
//! connect to ([`AddressProblem`]).

use std::io;
use std::path::PathBuf;

/// Why a plugin's handshake is incompatible with this host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Incompatibility {
    /// The plugin chose an app protocol version the host did not offer (go-plugin plugins
    /// answer their lowest version when none matches).
    #[error("it chose app protocol version {got}, which the host did not offer")]
    AppVersion {
        /// The version in the handshake.
        got: u32,
    },
    /// The core protocol version is not 1.
    #[error("it speaks core protocol version {got}, but only version 1 exists")]
    CoreVersion {
        /// The version in the handshake.
        got: u32,
    },
    /// The plugin speaks net/rpc or another protocol instead of gRPC.
    #[error(
        "it speaks RPC protocol {got:?}, but tether supports only `grpc` (a go-plugin plugin must serve with GRPCServer)"
    )]
    Protocol {
        /// The protocol in the handshake (`netrpc` when the field is missing).
        got: String,
    },
    /// The plugin turned on gRPC broker multiplexing, which this host never offers.
    #[error("it turned on gRPC broker multiplexing, which the host did not offer")]
    Multiplexing,
    /// The plugin sent a certificate although the host started it with
    /// [`plaintext`](crate::PluginClientBuilder::plaintext).
    #[error("it announced a TLS certificate although the host asked for plaintext")]
    UnrequestedTls,
}

/// Why the host refused the address a plugin announced.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AddressProblem {
    /// A unix socket outside the plugin's private directory.
    #[error(
        "the socket is not inside the plugin's private directory {}; a plugin must create its socket in PLUGIN_UNIX_SOCKET_DIR (or TMPDIR)",
        dir.display()
    )]
    OutsidePrivateDir {
        /// The private directory.
        dir: PathBuf,
    },
    /// The socket path, or a directory on the way to it, is a symbolic link.
    #[error(
        "{} is a symbolic link; the host connects only to a socket the plugin created itself",
        shown(path)
    )]
    Symlink {
        /// The symbolic link.
        path: PathBuf,
    },
    /// The path exists but is not a unix socket.
    #[error("{} is not a unix socket", shown(path))]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// The path cannot be inspected (usually: it does not exist).
    #[error("{} cannot be inspected: {source}", shown(path))]
    Inaccessible {
        /// The path.
        path: PathBuf,
        /// The error from `lstat`.
        source: io::Error,
    },
    /// A TCP address that is not a loopback address.
    #[error("it is not a loopback address; a plugin must listen on 127.0.0.1 or ::1")]
    NotLoopback,
    /// A TCP address from a plugin whose network is [`NetworkMode::None`](crate::confine::NetworkMode::None):
    /// it cannot serve over TCP.
    #[error(
        "it is a TCP address, but the plugin has no network (`network = \"none\"`, the default); a plugin that serves over TCP needs `network = \"host\"` (builder: `.network(NetworkMode::Host)`), or let it serve on a unix socket in PLUGIN_UNIX_SOCKET_DIR"
    )]
    TcpWithoutNetwork,
    /// A plugin on another machine (a Pod) announced another address than the one its runner
    /// assigned (`tether-pod-shim --listen`): the host connects to nothing else.
    #[error(
        "it is not the address the runner assigned the plugin ({assigned}); the host connects only to that one, translated to where it reaches the plugin"
    )]
    NotAssigned {
        /// The address the plugin was told to announce.
        assigned: std::net::SocketAddr,
    },
}

/// A path the plugin announced, [escaped](tether_proto::text) for a terminal.
fn shown(path: &std::path::Path) -> String {
    tether_proto::text::escape(&path.to_string_lossy()).to_string()
}

/// The message of a plugin that chose app protocol version `got`, which the host did not
/// offer: the versions, and where to offer `got` (the manifest key, the CLI flag, the
/// builder). The handshake line (and its certificate) is not quoted: the versions are the
/// whole story.
pub(crate) fn version_mismatch(plugin: &str, got: u32, offered: &[u32]) -> String {
    let offered = match offered {
        [] => "no app protocol version".to_owned(),
        [one] => format!("app protocol version {one}"),
        [rest @ .., last] => format!(
            "app protocol versions {} and {last}",
            rest.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    format!(
        "plugin `{plugin}` speaks app protocol version {got}, but the host offered only {offered}; if the host speaks version {got} too, offer it: `app_versions = [{got}]` under `[handshake]` in the plugin's manifest, `--app-version {got}` for tether call/inspect/conformance, `HandshakeConfig::app_versions` in code (else use a plugin built for one of the versions offered)."
    )
}
