//! [`PluginClientBuilder::start`]: the start-up sequence inside the launch's span, which
//! records how it ended.

use tracing::Instrument as _;
use tracing::field::Empty;

use crate::launch::builder::PluginClientBuilder;
use crate::launch::client::PluginClient;
use crate::launch::error::StartError;
use crate::launch::settings::HandshakeConfig;
use crate::launch::stages::start_stages;

impl PluginClientBuilder<HandshakeConfig> {
    /// Spawns the plugin, reads its handshake, connects (AutoMTLS unless
    /// [`plaintext`](Self::plaintext)) and checks its health.
    ///
    /// On failure the plugin's process group is ended and its private directory removed before
    /// this returns.
    ///
    /// The start is a span (`launch <plugin>`, a child of the caller's current span) with a
    /// child per stage; the plugin gets it as `TRACEPARENT` ([`crate::telemetry`]).
    ///
    /// # Errors
    /// A [`StartError`] naming the plugin and the [phase](StartError::phase) that failed, with
    /// what the plugin printed.
    pub async fn start(self) -> Result<PluginClient, StartError> {
        let name = self.settings.display_name();
        let span = tracing::info_span!(
            target: "tether::launch",
            "tether.launch",
            otel.name = format!("launch {name}"),
            otel.kind = "internal",
            otel.status_code = Empty,
            tether.plugin.name = name,
            tether.launch.phase = Empty,
            process.pid = Empty,
        );
        let result = start_stages(self.settings, self.handshake)
            .instrument(span.clone())
            .await;
        match &result {
            Ok(client) => {
                span.record("process.pid", client.pid());
            }
            Err(error) => {
                span.record("otel.status_code", "ERROR");
                span.record("tether.launch.phase", error.phase().to_string());
            }
        }
        result
    }
}
