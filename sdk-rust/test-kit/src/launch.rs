//! [`Launched`]: an integration-test harness that starts the built plugin binary through
//! `tether_broker`, as a real host would, and checks that shutting it down leaves nothing behind.

use std::path::{Path, PathBuf};

use tether_broker::telemetry::TracedChannel;
use tether_broker::{HandshakeConfig, PluginClient, PluginClientBuilder, ShutdownOutcome};
use tether_proto::handshake::Address;

use crate::error::KitError;

/// A builder for `program` with the cookie `key=value` and app version 1, e.g.
/// `tether_sdk_test::plugin(env!("CARGO_BIN_EXE_my-plugin"), "BASIC_PLUGIN", "hello")`; add
/// what the test needs (`.host_service(…)`, `.deliver(…)`, `.multiplex(true)`), then
/// [`Launched::start`] it.
pub fn plugin(
    program: impl Into<PathBuf>,
    key: &str,
    value: &str,
) -> PluginClientBuilder<HandshakeConfig> {
    PluginClient::builder(program).handshake(HandshakeConfig::new(key, value).app_versions([1]))
}

/// A plugin launched for a test; [`shutdown`](Self::shutdown) ends it and checks that no
/// process, socket or directory of it is left.
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tether_sdk_test::KitError> {
/// let builder = tether_sdk_test::plugin("target/debug/kv-plugin", "BASIC_PLUGIN", "hello");
/// let plugin = tether_sdk_test::Launched::start(builder).await?;
/// let _channel = plugin.channel(); // call it with your generated client
/// plugin.shutdown().await?; // Err(KitError::LeftBehind { .. }) if something stayed
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Launched {
    client: PluginClient,
    /// The private-directory base the host made the launch's private directory in; owned by the
    /// harness, so that "nothing left" can be checked.
    private_dir_base: tempfile::TempDir,
}

impl Launched {
    /// Starts `builder`'s plugin with its private directory and its delivered secrets in a
    /// fresh private-directory base.
    ///
    /// # Errors
    /// [`KitError::Io`] for the directory, [`KitError::Start`] when the launch fails.
    pub async fn start(builder: PluginClientBuilder<HandshakeConfig>) -> Result<Self, KitError> {
        let private_dir_base = tempfile::Builder::new()
            .prefix("tether-launch-")
            .tempdir_in("/tmp")
            .map_err(|source| KitError::Io {
                what: "the private-directory base",
                source,
            })?;
        // Delivered secrets go there too, so that "nothing left" covers them.
        let client = builder
            .private_dir_base(private_dir_base.path())
            .delivery_dir(private_dir_base.path())
            .start()
            .await
            .map_err(Box::new)?;
        Ok(Self {
            client,
            private_dir_base,
        })
    }

    /// The running plugin.
    #[must_use]
    pub fn client(&self) -> &PluginClient {
        &self.client
    }

    /// The channel to the plugin's services.
    #[must_use]
    pub fn channel(&self) -> TracedChannel {
        self.client.channel()
    }

    /// Shuts the plugin down as a host does (`GRPCController.Shutdown`, then signals), then
    /// checks that its process has gone, its socket is removed and nothing is left in the
    /// private-directory base (the launch's private directory, delivered secrets, brokered sockets).
    ///
    /// # Errors
    /// [`KitError::Shutdown`], or [`KitError::LeftBehind`] naming what is left.
    pub async fn shutdown(self) -> Result<ShutdownOutcome, KitError> {
        let pid = self.client.pid();
        let socket = match self.client.address() {
            Address::Unix(path) => Some(path.clone()),
            Address::Tcp(_) => None,
        };
        let outcome = self.client.shutdown().await?;
        check_nothing_left(pid, socket.as_deref(), self.private_dir_base.path())?;
        Ok(outcome)
    }
}

/// Whether process `pid` (and its process group, which the host made it lead), its `socket`
/// and anything in `private_dir_base` remain.
fn check_nothing_left(
    pid: u32,
    socket: Option<&Path>,
    private_dir_base: &Path,
) -> Result<(), KitError> {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let group = rustix::process::Pid::from_raw(pid.try_into().unwrap_or(i32::MAX))
        .map(|pgid| rustix::process::test_kill_process_group(pgid).is_ok());
    if proc.exists() || group == Some(true) {
        return Err(KitError::LeftBehind {
            what: "the plugin's process (or its process group)",
            path: proc,
        });
    }
    if let Some(socket) = socket.filter(|s| s.exists()) {
        return Err(KitError::LeftBehind {
            what: "the plugin's socket",
            path: socket.to_owned(),
        });
    }
    let io = |source| KitError::Io {
        what: "listing the private-directory base",
        source,
    };
    if let Some(entry) = std::fs::read_dir(private_dir_base).map_err(io)?.next() {
        return Err(KitError::LeftBehind {
            what: "a file or directory of the launch",
            path: entry.map_err(io)?.path(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_left_in_the_private_dir_base_is_named() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check_nothing_left(u32::MAX, None, dir.path()).is_ok());
        std::fs::write(dir.path().join("plugin.sock"), "").unwrap();
        let err = check_nothing_left(u32::MAX, None, dir.path()).unwrap_err();
        assert!(err.to_string().contains("plugin.sock"), "{err}");
    }

    #[test]
    fn a_running_process_is_left_behind() {
        let me = std::process::id();
        let dir = tempfile::tempdir().unwrap();
        let err = check_nothing_left(me, None, dir.path()).unwrap_err();
        assert!(matches!(err, KitError::LeftBehind { .. }), "{err}");
    }
}
