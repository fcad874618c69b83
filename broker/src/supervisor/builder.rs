//! Configuring a [`Supervisor`]: [`SupervisorBuilder`].

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tokio::sync::Mutex;

use crate::catalog::Catalog;
use crate::catalog::grants::Grants;
use crate::catalog::sources::{MemoryValueSource, ValueSource};
use crate::launch::builder::PluginClientBuilder;
use crate::launch::settings::HandshakeConfig;
use crate::supervisor::lease::{DEFAULT_CALL_TIMEOUT, DEFAULT_RECYCLE_AFTER_DEADLINES};
use crate::supervisor::supervision::{DEFAULT_HEALTH_INTERVAL, DEFAULT_HUNG_TIMEOUT};
use crate::supervisor::upgrade::DEFAULT_UPGRADE_GRACE;
use crate::supervisor::version::Version;
use crate::supervisor::{Inner, Slot, SlotState, Supervisor};
use crate::telemetry::metrics::Metrics;

impl Supervisor {
    /// A supervisor for `catalog`; each plugin's working (state) directory is
    /// `state_dir/<plugin name>`, created on first start (mode `0700`).
    pub fn builder(catalog: Catalog, state_dir: impl Into<PathBuf>) -> SupervisorBuilder {
        SupervisorBuilder {
            catalog,
            options: Options {
                grants: Grants::new(),
                secrets: Arc::new(MemoryValueSource::new()),
                config: Arc::new(MemoryValueSource::new()),
                state_dir: state_dir.into(),
                health_interval: DEFAULT_HEALTH_INTERVAL,
                health_timeout: DEFAULT_HUNG_TIMEOUT,
                call_timeout: DEFAULT_CALL_TIMEOUT,
                recycle_after_deadlines: DEFAULT_RECYCLE_AFTER_DEADLINES,
                upgrade_grace: DEFAULT_UPGRADE_GRACE,
                customize: None,
                metrics: None,
                #[cfg(feature = "kubernetes")]
                kubernetes: None,
            },
        }
    }
}

pub(crate) type Customize = dyn Fn(PluginClientBuilder<HandshakeConfig>) -> PluginClientBuilder<HandshakeConfig>
    + Send
    + Sync;

/// Configures a [`Supervisor`]; made by [`Supervisor::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct SupervisorBuilder {
    catalog: Catalog,
    options: Options,
}

/// What a [`SupervisorBuilder`] sets and a [`Supervisor`] runs with.
pub(crate) struct Options {
    pub(super) grants: Grants,
    pub(super) secrets: Arc<dyn ValueSource>,
    pub(super) config: Arc<dyn ValueSource>,
    pub(super) state_dir: PathBuf,
    pub(super) health_interval: Duration,
    pub(super) health_timeout: Duration,
    pub(super) call_timeout: Duration,
    pub(super) recycle_after_deadlines: u32,
    pub(super) upgrade_grace: Duration,
    pub(super) customize: Option<Arc<Customize>>,
    pub(super) metrics: Option<Metrics>,
    /// The host's part of the Pod runner, for manifests with `runner = "kubernetes"`.
    #[cfg(feature = "kubernetes")]
    pub(super) kubernetes: Option<crate::launch::runner::kubernetes::KubernetesOptions>,
}

impl std::fmt::Debug for SupervisorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SupervisorBuilder")
            .field("plugins", &self.catalog.len())
            .field("state_dir", &self.options.state_dir)
            .finish_non_exhaustive()
    }
}

impl SupervisorBuilder {
    /// The grants (default: nothing granted).
    pub fn grants(mut self, grants: Grants) -> Self {
        self.options.grants = grants;
        self
    }

    /// Where secret values come from (default: an empty in-memory source).
    pub fn secrets(mut self, source: impl ValueSource + 'static) -> Self {
        self.options.secrets = Arc::new(source);
        self
    }

    /// Where config file contents come from (default: an empty in-memory source).
    pub fn config_source(mut self, source: impl ValueSource + 'static) -> Self {
        self.options.config = Arc::new(source);
        self
    }

    /// See [`DEFAULT_HEALTH_INTERVAL`].
    pub fn health_interval(mut self, interval: Duration) -> Self {
        self.options.health_interval = interval;
        self
    }

    /// See [`DEFAULT_HUNG_TIMEOUT`].
    pub fn health_timeout(mut self, timeout: Duration) -> Self {
        self.options.health_timeout = timeout;
        self
    }

    /// See [`DEFAULT_CALL_TIMEOUT`].
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.options.call_timeout = timeout;
        self
    }

    /// See [`DEFAULT_RECYCLE_AFTER_DEADLINES`]; `0` never recycles.
    pub fn recycle_after_deadlines(mut self, calls: u32) -> Self {
        self.options.recycle_after_deadlines = calls;
        self
    }

    /// See [`DEFAULT_UPGRADE_GRACE`]: how long an instance replaced by
    /// [`Supervisor::upgrade`] keeps serving the leases taken before the switch.
    ///
    /// ```
    /// # fn f(catalog: tether_broker::Catalog) {
    /// let supervisor = tether_broker::Supervisor::builder(catalog, "/var/lib/tether/state")
    ///     .upgrade_grace(std::time::Duration::from_secs(120))
    ///     .build();
    /// # }
    /// ```
    pub fn upgrade_grace(mut self, grace: Duration) -> Self {
        self.options.upgrade_grace = grace;
        self
    }

    /// Adjusts every launch's [`PluginClientBuilder`] (timeouts, private-directory base…) after the
    /// manifest has been applied.
    pub fn customize(
        mut self,
        f: impl Fn(PluginClientBuilder<HandshakeConfig>) -> PluginClientBuilder<HandshakeConfig>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.options.customize = Some(Arc::new(f));
        self
    }

    /// Measures every plugin on `meter`, the host's own (from the `MeterProvider` that decides
    /// where metrics go: a Prometheus registry, an OTLP exporter): calls and callbacks by
    /// method and status, starts, crashes, restarts, idle stops, calls in flight, and each
    /// running plugin's memory, CPU time and processes ([`Metrics`], `docs/telemetry.md`).
    /// The instruments are created here, once; without this nothing is measured.
    ///
    /// ```
    /// # fn f(catalog: tether_broker::Catalog) {
    /// use opentelemetry::metrics::MeterProvider as _;
    /// # let provider = opentelemetry::metrics::noop::NoopMeterProvider::new();
    /// let supervisor = tether_broker::Supervisor::builder(catalog, "/var/lib/tether/state")
    ///     .meter(&provider.meter("tether"))
    ///     .build();
    /// # }
    /// ```
    pub fn meter(mut self, meter: &opentelemetry::metrics::Meter) -> Self {
        self.options.metrics = Some(Metrics::new(meter));
        self
    }

    /// The host's part of the Pod runner (cargo feature `kubernetes`) for the catalog's plugins
    /// whose manifest says `runner = "kubernetes"` (and whose grant allows it): the cluster,
    /// namespace, connection, shim, owner, host identity, node selector, service account,
    /// labels, user and Pod start timeout. Each manifest's `[kubernetes]` table sets its image,
    /// `memory_limit`, `cpu_limit` and `runtime_class` over these (the image of `host` is not
    /// used: make it with [`KubernetesOptions::for_catalog`]). Default: every setting's
    /// default (the inferred cluster, its namespace, no owner).
    ///
    /// [`KubernetesOptions::for_catalog`]: crate::launch::KubernetesOptions::for_catalog
    #[cfg(feature = "kubernetes")]
    pub fn kubernetes(mut self, host: crate::launch::KubernetesOptions) -> Self {
        self.options.kubernetes = Some(host);
        self
    }

    /// Builds the supervisor. Nothing is started until first use. Each plugin the grants grant
    /// something although the catalog has no manifest for it ([`Grants::strangers`]: most
    /// often a misspelt name, which grants nothing) is logged as a `tracing` warning.
    pub fn build(self) -> Supervisor {
        for stranger in self.options.grants.strangers(&self.catalog) {
            tracing::warn!(
                plugin = %stranger.name,
                closest = stranger.closest.as_deref().unwrap_or(""),
                "{stranger}"
            );
        }
        let metrics = self.options.metrics.as_ref();
        let slots = self
            .catalog
            .manifests()
            .map(|m| {
                (
                    m.name.clone(),
                    Arc::new(Slot {
                        name: m.name.clone(),
                        state: Mutex::new(SlotState {
                            version: Arc::new(Version::new(m.clone(), metrics)),
                            running: None,
                            draining: Vec::new(),
                            crashes: VecDeque::new(),
                            shut_down: false,
                            restart_due: false,
                        }),
                        starts: AtomicU64::new(0),
                        upgrading: Mutex::new(()),
                    }),
                )
            })
            .collect();
        Supervisor {
            inner: Arc::new(Inner {
                slots,
                options: self.options,
            }),
        }
    }
}
