//! Launching the KV plugin the same way for every measurement, and what a measurement's
//! failure is.

use std::error::Error;

use tether_broker::telemetry::TracedChannel;
use tether_broker::{HandshakeConfig, PluginClient, PluginClientBuilder};
use tether_examples::LaunchFlags;
use tether_examples::kv::kv_client::KvClient;

/// The 64-byte value the measurements write and read.
pub(crate) const BENCH_VALUE: &[u8; 64] =
    b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// The key the measurements write and read.
pub(crate) const BENCH_KEY: &str = "bench";

/// A failure, with the exit status it maps to.
pub(crate) struct Failure {
    error: Box<dyn Error + Send + Sync>,
    /// The exit status.
    pub(crate) code: u8,
}

impl Failure {
    /// The error and its causes on one line.
    pub(crate) fn message(&self) -> String {
        tether_examples::error_chain(&*self.error)
    }
}

impl<E: Into<Box<dyn Error + Send + Sync>>> From<E> for Failure {
    fn from(error: E) -> Self {
        Self {
            error: error.into(),
            code: 1,
        }
    }
}

/// A KV client that carries messages up to [`tether_examples::MAX_MESSAGE_SIZE`] both ways
/// (tonic's default decode limit is 4 MiB).
pub(crate) fn kv_client(channel: TracedChannel) -> KvClient<TracedChannel> {
    KvClient::new(channel)
        .max_decoding_message_size(tether_examples::MAX_MESSAGE_SIZE)
        .max_encoding_message_size(tether_examples::MAX_MESSAGE_SIZE)
}

/// Runs `work` unless SIGINT or SIGTERM comes first (then exit status 130), so that a plugin
/// started outside `work` is still shut down properly. If a signal interrupts a start, the
/// dropped start ends the plugin it was starting.
pub(crate) async fn interruptible<F: Future>(work: F) -> Result<F::Output, Failure> {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut int, mut term) = (
        signal(SignalKind::interrupt())?,
        signal(SignalKind::terminate())?,
    );
    tokio::select! {
        output = work => Ok(output),
        _ = int.recv() => Err(interrupted("SIGINT")),
        _ = term.recv() => Err(interrupted("SIGTERM")),
    }
}

fn interrupted(signal: &str) -> Failure {
    Failure {
        error: format!("interrupted by {signal}").into(),
        code: 130,
    }
}

/// `$KV_PLUGIN`, split into program and arguments.
pub(crate) fn plugin_command() -> Result<(String, Vec<String>), Failure> {
    tether_examples::plugin_command("KV_PLUGIN").map_err(|error| Failure {
        error: error.into(),
        code: 2,
    })
}

/// Starts the plugin the same way every time.
pub(crate) struct Launcher {
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
    /// The example hosts' options.
    pub(crate) launch: LaunchFlags,
    pub(crate) sandbox: tether_broker::SandboxMode,
    pub(crate) seccomp: tether_broker::confine::SeccompMode,
    pub(crate) network: tether_broker::confine::NetworkMode,
    pub(crate) namespaces: tether_broker::confine::NamespacesMode,
    /// What each plugin tells about its calls (`--telemetry metrics`).
    pub(crate) call_metrics: Option<std::sync::Arc<dyn tether_broker::telemetry::CallMetrics>>,
    /// The CPU each plugin is pinned to once started (`--plugin-cpu`).
    pub(crate) plugin_cpu: Option<usize>,
}

impl Launcher {
    pub(crate) async fn start(&self) -> Result<PluginClient, Failure> {
        let plugin = self.builder()?.start().await?;
        if let Some(cpu) = self.plugin_cpu
            && let Err(e) = tether_bench::affinity::pin_process(plugin.pid(), &[cpu])
        {
            let error = format!(
                "pinning the plugin (pid {}) to CPU {cpu}: {e}",
                plugin.pid()
            );
            plugin.shutdown().await?;
            return Err(error.into());
        }
        Ok(plugin)
    }

    /// The builder [`start`](Self::start) starts.
    pub(crate) fn builder(&self) -> std::io::Result<PluginClientBuilder<HandshakeConfig>> {
        let mut telemetry = tether_broker::launch::Telemetry::default();
        if let Some(metrics) = &self.call_metrics {
            telemetry = telemetry.call_metrics(std::sync::Arc::clone(metrics));
        }
        Ok(self
            .launch
            .builder(&self.program, &self.args)?
            .sandbox(self.sandbox)
            .seccomp(self.seccomp)
            .network(self.network)
            .namespaces(self.namespaces)
            .telemetry(telemetry))
    }
}
