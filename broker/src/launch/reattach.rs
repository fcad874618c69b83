//! Connecting to an already-running plugin from a go-plugin-compatible reattach config
//! (the JSON Terraform's `TF_REATTACH_PROVIDERS` uses), and ending it without ever signalling
//! a process that was not verified to be that plugin.

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::process::{Pid, PidfdFlags, Signal};
use serde::{Deserialize, Serialize};
use tether_proto::plugin::Empty;
use tether_proto::plugin::grpc_controller_client::GrpcControllerClient;
use tether_proto::tls::{self, Identity};
use tonic::transport::Channel;

use crate::launch::timeouts::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_SHUTDOWN_GRACE, DEFAULT_TERMINATE_GRACE,
};
use tether_transport::{ConnectError, Target};

/// How often a reattached plugin's exit is checked while waiting for it.
const EXIT_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// go-plugin's reattach config, as JSON: `{"Protocol":"grpc","ProtocolVersion":5,
/// "Addr":{"Network":"unix","String":"/tmp/plugin123"},"Pid":4242,"Test":true}`.
///
/// ```
/// let json = r#"{"Protocol":"grpc","ProtocolVersion":1,
///     "Addr":{"Network":"unix","String":"/tmp/plugin1"},"Pid":42,"Test":false}"#;
/// let config = tether_broker::ReattachConfig::from_json(json)?;
/// assert_eq!(config.addr.network, "unix");
/// assert_eq!(tether_broker::ReattachConfig::from_json(&config.to_json())?, config);
/// # Ok::<(), tether_broker::launch::ReattachError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
#[non_exhaustive]
pub struct ReattachConfig {
    /// `grpc` (tether speaks no other).
    pub protocol: String,
    /// The app protocol version the plugin speaks.
    pub protocol_version: u32,
    /// Where it listens.
    pub addr: ReattachAddr,
    /// Its process id; `0` when unknown.
    #[serde(default)]
    pub pid: i32,
    /// go-plugin's test mode flag (the plugin is not the host's to end).
    #[serde(default)]
    pub test: bool,
}

/// Where a reattached plugin listens (Go's `net.Addr`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
#[non_exhaustive]
pub struct ReattachAddr {
    /// `unix` or `tcp`.
    pub network: String,
    /// The socket path or `host:port`.
    pub string: String,
}

impl ReattachConfig {
    /// A config for a plugin serving gRPC at `network`/`address`.
    #[must_use]
    pub fn new(protocol_version: u32, network: &str, address: &str, pid: i32) -> Self {
        Self {
            protocol: "grpc".into(),
            protocol_version,
            addr: ReattachAddr {
                network: network.into(),
                string: address.into(),
            },
            pid,
            test: false,
        }
    }

    /// Parses go-plugin's JSON form.
    ///
    /// # Errors
    /// [`ReattachError::Json`] naming what is wrong.
    pub fn from_json(json: &str) -> Result<Self, ReattachError> {
        serde_json::from_str(json).map_err(|e| ReattachError::Json(e.to_string()))
    }

    /// The JSON form go-plugin (and Terraform) read.
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a struct of strings and numbers always serializes")
    }
}

/// Why reattaching failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReattachError {
    /// The JSON is not a reattach config.
    #[error(
        "invalid reattach config: {0}; expected go-plugin's {{\"Protocol\",\"ProtocolVersion\",\"Addr\":{{\"Network\",\"String\"}},\"Pid\",\"Test\"}}"
    )]
    Json(String),
    /// Not a gRPC plugin.
    #[error("the reattach config names protocol `{0}`; tether speaks only `grpc`")]
    Protocol(String),
    /// The address is neither a unix socket nor a loopback TCP address.
    #[error(
        "the reattach address {network}:{address} is not a unix socket or a loopback TCP address"
    )]
    Address {
        /// The network.
        network: String,
        /// The address.
        address: String,
    },
    /// Connecting failed.
    #[error("cannot connect to the plugin at {address}: {reason}")]
    Connect {
        /// The address.
        address: String,
        /// Why.
        reason: String,
    },
    /// The TLS configuration could not be built.
    #[error("cannot build the TLS configuration for reattaching: {0}")]
    Tls(String),
}

/// Certificates for reattaching with mutual TLS: the host identity the plugin trusts and the
/// plugin's certificate (DER).
#[derive(Debug)]
pub struct ReattachTls {
    /// The host's identity (the plugin was given its certificate).
    pub identity: Identity,
    /// The plugin's certificate, DER.
    pub plugin_cert: Vec<u8>,
}

/// A plugin reattached to: its channel, and its process if that was verified.
#[derive(Debug)]
pub struct ReattachedPlugin {
    channel: Channel,
    config: ReattachConfig,
    pidfd: Option<OwnedFd>,
}

/// How [`ReattachedPlugin::shutdown`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReattachedOutcome {
    /// The verified process exited after the shutdown request.
    Graceful,
    /// The verified process needed `SIGTERM`.
    Terminated,
    /// The verified process needed `SIGKILL`.
    Killed,
    /// The process could not be verified as the plugin: only the shutdown request was sent,
    /// no signal.
    NotVerified,
}

impl ReattachedPlugin {
    /// Connects to the plugin `config` describes (mutual TLS when `tls` is given) and checks
    /// whether `config.pid` is really that plugin: it must hold the listening socket at
    /// `config.addr` (checked through `/proc` while a pidfd pins the process).
    ///
    /// # Errors
    /// A [`ReattachError`] for a non-gRPC protocol, a non-local address or a failed connect.
    pub async fn connect(
        config: ReattachConfig,
        tls: Option<ReattachTls>,
    ) -> Result<Self, ReattachError> {
        if config.protocol != "grpc" {
            return Err(ReattachError::Protocol(config.protocol.clone()));
        }
        let bad_address = || ReattachError::Address {
            network: config.addr.network.clone(),
            address: config.addr.string.clone(),
        };
        let target = match config.addr.network.as_str() {
            "unix" if Path::new(&config.addr.string).is_absolute() => {
                Target::Unix(PathBuf::from(&config.addr.string))
            }
            "tcp" => {
                let addr: SocketAddr = config.addr.string.parse().map_err(|_| bad_address())?;
                if !addr.ip().is_loopback() {
                    return Err(bad_address());
                }
                Target::Tcp(addr)
            }
            _ => return Err(bad_address()),
        };
        let tls_config = match tls {
            Some(t) => Some(Arc::new(
                tls::client_config(&t.identity, t.plugin_cert.into())
                    .map_err(|e| ReattachError::Tls(e.to_string()))?,
            )),
            None => None,
        };
        let channel = tether_transport::connect(
            target.clone(),
            tls_config,
            Arc::new(|| true),
            DEFAULT_CONNECT_TIMEOUT,
        )
        .await
        .map_err(|e| ReattachError::Connect {
            address: target.to_string(),
            reason: match e {
                ConnectError::Io(e) => e.to_string(),
                ConnectError::Tls(e) => format!("TLS: {e}"),
                ConnectError::Exited => "the plugin exited".into(),
                ConnectError::Timeout(timeout) => format!("no connection within {timeout:?}"),
                other => other.to_string(),
            },
        })?;
        let pidfd = verify_pid(config.pid, &target);
        if pidfd.is_none() {
            tracing::warn!(
                pid = config.pid,
                address = %target,
                "the reattached plugin's pid could not be verified; it will never be signalled"
            );
        }
        Ok(Self {
            channel,
            config,
            pidfd,
        })
    }

    /// The gRPC channel.
    #[must_use]
    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }

    /// The reattach config.
    #[must_use]
    pub fn config(&self) -> &ReattachConfig {
        &self.config
    }

    /// Whether the pid was verified to be the plugin (only then is it ever signalled).
    #[must_use]
    pub fn pid_verified(&self) -> bool {
        self.pidfd.is_some()
    }

    /// Asks the plugin to shut down (`GRPCController.Shutdown`); if its process was verified,
    /// waits [`DEFAULT_SHUTDOWN_GRACE`], then `SIGTERM`, [`DEFAULT_TERMINATE_GRACE`], then
    /// `SIGKILL` — all through its pidfd, so a reused pid is never hit.
    pub async fn shutdown(self) -> ReattachedOutcome {
        let mut controller = GrpcControllerClient::new(self.channel.clone());
        let _ = tokio::time::timeout(DEFAULT_SHUTDOWN_GRACE, controller.shutdown(Empty {})).await;
        let Some(pidfd) = self.pidfd else {
            return ReattachedOutcome::NotVerified;
        };
        if exited_within(&pidfd, DEFAULT_SHUTDOWN_GRACE).await {
            return ReattachedOutcome::Graceful;
        }
        let _ = rustix::process::pidfd_send_signal(&pidfd, Signal::TERM);
        if exited_within(&pidfd, DEFAULT_TERMINATE_GRACE).await {
            return ReattachedOutcome::Terminated;
        }
        let _ = rustix::process::pidfd_send_signal(&pidfd, Signal::KILL);
        ReattachedOutcome::Killed
    }
}

/// Whether the process behind `pidfd` has exited.
fn has_exited(pidfd: &OwnedFd) -> bool {
    let mut fds = [rustix::event::PollFd::new(
        pidfd,
        rustix::event::PollFlags::IN,
    )];
    rustix::event::poll(&mut fds, Some(&rustix::event::Timespec::default())).unwrap_or(0) == 1
}

async fn exited_within(pidfd: &OwnedFd, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if has_exited(pidfd) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(EXIT_POLL_INTERVAL).await;
    }
}

/// Opens a pidfd for `pid` and checks that the process holds the listening socket at
/// `target`; `None` unless verified.
fn verify_pid(pid: i32, target: &Target) -> Option<OwnedFd> {
    let pidfd = rustix::process::pidfd_open(Pid::from_raw(pid)?, PidfdFlags::empty()).ok()?;
    let inode = listening_inode(target)?;
    let want = format!("socket:[{inode}]");
    let holds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .filter_map(Result::ok)
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == want.as_str()));
    // The pidfd pins the process: if it is still running, `/proc/{pid}` was this process.
    (holds && !has_exited(&pidfd)).then_some(pidfd)
}

/// The socket inode of the listener at `target` (`/proc/net/unix`, `/proc/net/tcp{,6}`).
fn listening_inode(target: &Target) -> Option<u64> {
    match target {
        Target::Unix(path) => {
            let table = std::fs::read_to_string("/proc/net/unix").ok()?;
            // Num RefCount Protocol Flags Type St Inode Path; flag 0x10000 = listening.
            table.lines().skip(1).find_map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                let listening = u32::from_str_radix(f.get(3)?, 16).ok()? & 0x1_0000 != 0;
                (listening && Path::new(f.get(7)?) == path).then(|| f.get(6)?.parse().ok())?
            })
        }
        Target::Tcp(addr) => {
            let file = if addr.is_ipv4() {
                "/proc/net/tcp"
            } else {
                "/proc/net/tcp6"
            };
            let table = std::fs::read_to_string(file).ok()?;
            let port = format!("{:04X}", addr.port());
            // sl local_address rem_address st … inode; st 0A = LISTEN.
            table.lines().skip(1).find_map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                let local_port = f.get(1)?.rsplit(':').next()?;
                (local_port == port && *f.get(3)? == "0A").then(|| f.get(9)?.parse().ok())?
            })
        }
        // A listener in another network namespace is not in this one's tables.
        Target::TcpVia(..) => None,
    }
}
