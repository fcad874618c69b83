//! [`GrpcBrokerConfig`]: the timeouts of a [`GrpcBroker`](super::GrpcBroker), with their defaults.

use std::time::Duration;

use crate::accept::DEFAULT_TLS_HANDSHAKE_TIMEOUT;
use crate::repeated::DEFAULT_REPEATED_WARNING_INTERVAL;
use crate::telemetry::ServedCalls;

/// How long [`GrpcBroker::dial`](super::GrpcBroker::dial) waits for the peer's `ConnInfo` for
/// an id (go-plugin: 5 s), or in the multiplexed mode for the acknowledgement of its knock
/// (go-plugin: 5 s). Override with [`GrpcBrokerConfig::dial_timeout`].
pub const DEFAULT_DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a `ConnInfo` that arrived before anyone dialled its id is kept (go-plugin: 5 s);
/// in the multiplexed mode, how long a knock for an id not served yet waits for it. Override
/// with [`GrpcBrokerConfig::unclaimed_ttl`].
pub const DEFAULT_UNCLAIMED_TTL: Duration = Duration::from_secs(5);

/// How long connecting to a brokered address, TLS included, may take. Override with
/// [`GrpcBrokerConfig::connect_timeout`].
pub const DEFAULT_BROKER_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// After a served id is stopped, how long its open connections may take to finish their calls
/// before they are cut. Override with [`GrpcBrokerConfig::stop_grace`].
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(1);

/// How often a host re-announces its host services' `ConnInfo` (broker id
/// [`HOST_SERVICES_ID`](super::HOST_SERVICES_ID)) in the default broker mode, so that a go-plugin
/// plugin can dial them at any time: go-plugin forgets an announcement 5 s after it arrived (or
/// once one dial used it), and its `Dial` waits 5 s for the next. Longer than those 5 s (a
/// shorter period lets an old announcement's expiry delete a newer one a dial is waiting on),
/// short enough that a dial in the gap waits at most one second for the next announcement.
/// Each re-announcement is one small message on the broker stream. tether SDKs keep the first
/// announcement for good and simply replace it. The multiplexed mode needs none (a dial knocks).
/// Override with [`GrpcBrokerConfig::host_services_announce_interval`].
pub const DEFAULT_HOST_SERVICES_ANNOUNCE_INTERVAL: Duration = Duration::from_secs(6);

/// Timeouts and limits of a [`GrpcBroker`](super::GrpcBroker).
///
/// ```
/// use std::time::Duration;
/// let config = tether_transport::GrpcBrokerConfig::new().dial_timeout(Duration::from_secs(1));
/// assert_eq!(config.dial_timeout_value(), Duration::from_secs(1));
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct GrpcBrokerConfig {
    pub(super) dial_timeout: Duration,
    pub(super) unclaimed_ttl: Duration,
    pub(super) connect_timeout: Duration,
    pub(super) stop_grace: Duration,
    pub(super) tls_handshake_timeout: Duration,
    pub(super) repeated_warning_interval: Duration,
    pub(super) telemetry: ServedCalls,
    pub(super) host_services_announce_interval: Duration,
}

impl Default for GrpcBrokerConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl GrpcBrokerConfig {
    /// The defaults: [`DEFAULT_DIAL_TIMEOUT`], [`DEFAULT_UNCLAIMED_TTL`],
    /// [`DEFAULT_BROKER_CONNECT_TIMEOUT`], [`DEFAULT_STOP_GRACE`] and
    /// [`DEFAULT_TLS_HANDSHAKE_TIMEOUT`], [`DEFAULT_REPEATED_WARNING_INTERVAL`],
    /// [`DEFAULT_HOST_SERVICES_ANNOUNCE_INTERVAL`].
    pub fn new() -> Self {
        Self {
            dial_timeout: DEFAULT_DIAL_TIMEOUT,
            unclaimed_ttl: DEFAULT_UNCLAIMED_TTL,
            connect_timeout: DEFAULT_BROKER_CONNECT_TIMEOUT,
            stop_grace: DEFAULT_STOP_GRACE,
            tls_handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            repeated_warning_interval: DEFAULT_REPEATED_WARNING_INTERVAL,
            telemetry: ServedCalls::default(),
            host_services_announce_interval: DEFAULT_HOST_SERVICES_ANNOUNCE_INTERVAL,
        }
    }

    /// See [`DEFAULT_DIAL_TIMEOUT`].
    pub fn dial_timeout(mut self, timeout: Duration) -> Self {
        self.dial_timeout = timeout;
        self
    }

    /// The configured dial timeout.
    #[must_use]
    pub fn dial_timeout_value(&self) -> Duration {
        self.dial_timeout
    }

    /// See [`DEFAULT_UNCLAIMED_TTL`].
    pub fn unclaimed_ttl(mut self, ttl: Duration) -> Self {
        self.unclaimed_ttl = ttl;
        self
    }

    /// See [`DEFAULT_BROKER_CONNECT_TIMEOUT`].
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// See [`DEFAULT_STOP_GRACE`].
    pub fn stop_grace(mut self, grace: Duration) -> Self {
        self.stop_grace = grace;
        self
    }

    /// See [`DEFAULT_TLS_HANDSHAKE_TIMEOUT`].
    pub fn tls_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.tls_handshake_timeout = timeout;
        self
    }

    /// See [`DEFAULT_REPEATED_WARNING_INTERVAL`].
    pub fn repeated_warning_interval(mut self, interval: Duration) -> Self {
        self.repeated_warning_interval = interval;
        self
    }

    /// What the broker's calls are traced and measured with, both ways: the plugin they
    /// belong to (host side, the `tether.plugin.name` of their spans) and the per-call metrics.
    pub fn telemetry(mut self, telemetry: ServedCalls) -> Self {
        self.telemetry = telemetry;
        self
    }

    /// See [`DEFAULT_HOST_SERVICES_ANNOUNCE_INTERVAL`].
    pub fn host_services_announce_interval(mut self, interval: Duration) -> Self {
        self.host_services_announce_interval = interval;
        self
    }
}
