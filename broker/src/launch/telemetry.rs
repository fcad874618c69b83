//! [`Telemetry`]: what a launch tells about itself and its calls, as one value beside
//! [`Timeouts`](super::Timeouts) and [`OutputLimits`](super::OutputLimits). The spans
//! themselves are always made (`tracing` spans: free without a subscriber that records them);
//! this value decides what leaves the host and who is told about each call.

use std::fmt;
use std::sync::Arc;

use tether_transport::telemetry::CallMetrics;

/// Whether a plugin gets the host's trace context: the launching span as its
/// `TRACEPARENT`/`TRACESTATE`, and the calling span's `traceparent`/`tracestate` in the
/// metadata of every call to it, so that the plugin's spans join the host's trace.
///
/// On by default: a W3C trace context is two opaque ids (no name, no attribute of the host),
/// and without a recording subscriber in the host no context exists to send. Turn it off
/// ([`Telemetry::trace_context`]) when a plugin must not learn even that two of its calls
/// belong to one trace.
pub const DEFAULT_TRACE_CONTEXT: bool = true;

/// What a launched plugin tells about itself: trace context sent to it, and who is told about
/// every call to it and every callback from it.
///
/// `Telemetry::default()` sends trace context ([`DEFAULT_TRACE_CONTEXT`]) and measures nothing;
/// hand the value to [`PluginClientBuilder::telemetry`](crate::PluginClientBuilder::telemetry):
///
/// ```
/// use tether_broker::launch::Telemetry;
/// let b = tether_broker::PluginClient::builder("/bin/plugin")
///     .telemetry(Telemetry::default().trace_context(false));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct Telemetry {
    /// Whether the plugin gets the host's trace context ([`DEFAULT_TRACE_CONTEXT`]).
    pub trace_context: bool,
    /// Told the method, status and duration of every call to the plugin and every callback or
    /// host-service call from it (none by default). A
    /// [`Supervisor`](crate::Supervisor)'s metrics set this for the plugins it launches.
    pub call_metrics: Option<Arc<dyn CallMetrics>>,
}

impl Default for Telemetry {
    fn default() -> Self {
        Self {
            trace_context: DEFAULT_TRACE_CONTEXT,
            call_metrics: None,
        }
    }
}

impl fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Telemetry")
            .field("trace_context", &self.trace_context)
            .field("call_metrics", &self.call_metrics)
            .finish()
    }
}

impl Telemetry {
    /// Sets [`trace_context`](Self::trace_context).
    #[must_use]
    pub fn trace_context(mut self, send: bool) -> Self {
        self.trace_context = send;
        self
    }

    /// Sets [`call_metrics`](Self::call_metrics).
    #[must_use]
    pub fn call_metrics(mut self, metrics: Arc<dyn CallMetrics>) -> Self {
        self.call_metrics = Some(metrics);
        self
    }
}
