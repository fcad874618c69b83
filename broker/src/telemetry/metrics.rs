//! Per-plugin metrics on the host's own OpenTelemetry [`Meter`]: [`Metrics`] creates the
//! instruments once; [`PluginMetrics`] is one plugin's share of them (its attributes made once),
//! told about its calls ([`CallMetrics`]), its starts, crashes, restarts and idle stops, and
//! observing its process for the resource gauges when a reader collects.
//!
//! Names follow OpenTelemetry's semantic conventions where they exist (the stable RPC
//! conventions: `rpc.client.call.duration`, `rpc.server.call.duration`, in seconds, by
//! `rpc.system.name`, `rpc.method` and `rpc.response.status_code`); the rest are
//! `tether.plugin.*`. Every measurement carries [`PLUGIN_NAME_ATTRIBUTE`] and, when the
//! manifest pins one, [`PLUGIN_SHA256_ATTRIBUTE`]. The table of what each means is in
//! `docs/telemetry.md`.

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{
    Counter, Histogram, Meter, ObservableCounter, ObservableGauge, ObservableUpDownCounter,
};
use tether_transport::internal::lock;
use tether_transport::telemetry::{CallMetrics, CallSide, code_name};
use tonic::Code;

use super::relay::PLUGIN_NAME_ATTRIBUTE;
pub use super::resources::MAX_OBSERVED_PROCESSES;
use super::resources::ObservedProcess;

/// Duration of the calls the host makes to its plugins (and on channels to services a plugin
/// serves through the broker): a histogram in seconds (OpenTelemetry's RPC conventions).
pub const RPC_CLIENT_CALL_DURATION: &str = "rpc.client.call.duration";
/// Duration of the calls the host answers for its plugins (callbacks and host services): a
/// histogram in seconds (OpenTelemetry's RPC conventions).
pub const RPC_SERVER_CALL_DURATION: &str = "rpc.server.call.duration";
/// Calls in flight now, by [`CALL_SIDE_ATTRIBUTE`].
pub const PLUGIN_CALLS_ACTIVE: &str = "tether.plugin.calls.active";
/// Starts, by [`START_OUTCOME_ATTRIBUTE`].
pub const PLUGIN_STARTS: &str = "tether.plugin.starts";
/// How long a start took (launch to healthy, or to its failure), in seconds, by
/// [`START_OUTCOME_ATTRIBUTE`].
pub const PLUGIN_START_DURATION: &str = "tether.plugin.start.duration";
/// Runs that ended without being asked to, by [`CRASH_REASON_ATTRIBUTE`].
pub const PLUGIN_CRASHES: &str = "tether.plugin.crashes";
/// Successful starts of a plugin whose previous run crashed or hung.
pub const PLUGIN_RESTARTS: &str = "tether.plugin.restarts";
/// Runs stopped because no lease held the plugin for its idle timeout.
pub const PLUGIN_IDLE_STOPS: &str = "tether.plugin.idle_stops";
/// Upgrades to a new version ([`Supervisor::upgrade`](crate::Supervisor::upgrade)), by
/// [`UPGRADE_OUTCOME_ATTRIBUTE`], with the attributes of the version upgraded to.
pub const PLUGIN_UPGRADES: &str = "tether.plugin.upgrades";
/// Resident memory of the running plugin (its cgroup's, else its process tree's), in bytes.
pub const PLUGIN_MEMORY_USAGE: &str = "tether.plugin.memory.usage";
/// CPU time of the running plugin's processes, in seconds, by `cpu.mode` (`user`, `system`).
pub const PLUGIN_CPU_TIME: &str = "tether.plugin.cpu.time";
/// Processes of the running plugin now (its cgroup's, else its process tree).
pub const PLUGIN_PROCESSES: &str = "tether.plugin.processes";

/// The attribute naming the digest a manifest pins (`sha256 = …`).
pub const PLUGIN_SHA256_ATTRIBUTE: &str = "tether.plugin.sha256";
/// `client` (calls to the plugin) or `server` (callbacks and host services it calls).
pub const CALL_SIDE_ATTRIBUTE: &str = "tether.call.side";
/// `success` or `failure`.
pub const START_OUTCOME_ATTRIBUTE: &str = "tether.plugin.start.outcome";
/// `success` (the new version serves) or `failure` (it did not start or become healthy; the
/// old version kept serving).
pub const UPGRADE_OUTCOME_ATTRIBUTE: &str = "tether.plugin.upgrade.outcome";
/// `exit` (the process ended by itself or by a signal from outside) or `hang` (killed by the
/// supervisor: failed health checks, or calls that kept running out their deadline).
pub const CRASH_REASON_ATTRIBUTE: &str = "tether.plugin.crash.reason";

/// Bucket boundaries of the call-duration histograms, in seconds: from 50 µs (a local unary
/// call takes tens of microseconds) to a minute (a supervisor's default call timeout).
pub const CALL_DURATION_BOUNDARIES: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Bucket boundaries of the start-duration histogram, in seconds: from 1 ms (a native plugin in
/// a ready world) to the 30 s a Pod may take.
pub const START_DURATION_BOUNDARIES: &[f64] = &[
    0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// How a start ended ([`PluginMetrics::start_ended`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartOutcome {
    /// The plugin is running and healthy.
    Success,
    /// The start failed (refused by the grants, a missing secret, a failed launch).
    Failure,
}

/// How an upgrade ended ([`PluginMetrics::upgraded`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradeOutcome {
    /// The new version serves new calls.
    Success,
    /// The new version did not start or become healthy; the old one kept serving.
    Failure,
}

/// Why a run ended without being asked to ([`PluginMetrics::crashed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashReason {
    /// The process exited by itself or was killed from outside.
    Exit,
    /// The supervisor killed it as hung.
    Hang,
}

/// The instruments of per-plugin metrics, created once on the host's [`Meter`].
/// [`SupervisorBuilder::meter`](crate::SupervisorBuilder::meter) makes them for a supervisor;
/// a [`PluginClient`](crate::PluginClient) host makes them itself and gives each plugin its
/// [`PluginMetrics`] as its [`Telemetry::call_metrics`](crate::launch::Telemetry::call_metrics).
///
/// Nothing is measured without it: a host that sets no metrics pays one `None` check per call.
#[derive(Clone)]
pub struct Metrics {
    instruments: Arc<Instruments>,
}

struct Instruments {
    client_duration: Histogram<f64>,
    server_duration: Histogram<f64>,
    starts: Counter<u64>,
    start_duration: Histogram<f64>,
    crashes: Counter<u64>,
    restarts: Counter<u64>,
    idle_stops: Counter<u64>,
    upgrades: Counter<u64>,
    plugins: Registry,
    /// Kept with the instruments they observe through.
    _observed: (
        ObservableUpDownCounter<i64>,
        ObservableGauge<u64>,
        ObservableCounter<f64>,
        ObservableGauge<u64>,
    ),
}

/// The plugins the observable instruments report, while their [`PluginMetrics`] live.
type Registry = Arc<Mutex<Vec<Weak<Plugin>>>>;

/// One plugin's part: its attributes, its calls in flight, its running process.
struct Plugin {
    attributes: Vec<KeyValue>,
    active: [AtomicI64; 2],
    process: Mutex<Option<ObservedProcess>>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plugins = lock(&self.instruments.plugins).len();
        f.debug_struct("Metrics")
            .field("plugins", &plugins)
            .finish_non_exhaustive()
    }
}

impl Metrics {
    /// Creates the instruments on `meter` (from the host's `MeterProvider`, which decides where
    /// they are exported: a Prometheus registry, OTLP, both).
    #[must_use]
    pub fn new(meter: &Meter) -> Self {
        let plugins = Registry::default();
        let duration = |name: &'static str, what: &'static str| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(what)
                .with_boundaries(CALL_DURATION_BOUNDARIES.to_vec())
                .build()
        };
        let counter = |name: &'static str, unit: &'static str, what: &'static str| {
            meter
                .u64_counter(name)
                .with_unit(unit)
                .with_description(what)
                .build()
        };
        let observed = (
            meter
                .i64_observable_up_down_counter(PLUGIN_CALLS_ACTIVE)
                .with_unit("{call}")
                .with_description("Calls between the host and the plugin in flight now.")
                .with_callback(observe(&plugins, |plugin, observer| {
                    for (side, active) in [("client", 0), ("server", 1)] {
                        let value = plugin.active[active].load(Ordering::Relaxed);
                        observer.observe(value, &plugin.with(CALL_SIDE_ATTRIBUTE, side));
                    }
                }))
                .build(),
            meter
                .u64_observable_gauge(PLUGIN_MEMORY_USAGE)
                .with_unit("By")
                .with_description("Resident memory of the running plugin's processes.")
                .with_callback(observe(&plugins, |plugin, observer| {
                    if let Some(bytes) = plugin.running().and_then(|p| p.memory()) {
                        observer.observe(bytes, &plugin.attributes);
                    }
                }))
                .build(),
            meter
                .f64_observable_counter(PLUGIN_CPU_TIME)
                .with_unit("s")
                .with_description("CPU time of the running plugin's processes.")
                .with_callback(observe(&plugins, |plugin, observer| {
                    if let Some(cpu) = plugin.running().and_then(|p| p.cpu()) {
                        observer.observe(cpu.user, &plugin.with("cpu.mode", "user"));
                        observer.observe(cpu.system, &plugin.with("cpu.mode", "system"));
                    }
                }))
                .build(),
            meter
                .u64_observable_gauge(PLUGIN_PROCESSES)
                .with_unit("{process}")
                .with_description("Processes of the running plugin.")
                .with_callback(observe(&plugins, |plugin, observer| {
                    if let Some(pids) = plugin.running().and_then(|p| p.pids()) {
                        observer.observe(pids.len() as u64, &plugin.attributes);
                    }
                }))
                .build(),
        );
        let start_duration = meter
            .f64_histogram(PLUGIN_START_DURATION)
            .with_unit("s")
            .with_description("How long starting the plugin took, to healthy or to failure.")
            .with_boundaries(START_DURATION_BOUNDARIES.to_vec())
            .build();
        Self {
            instruments: Arc::new(Instruments {
                client_duration: duration(
                    RPC_CLIENT_CALL_DURATION,
                    "Duration of calls the host made to the plugin.",
                ),
                server_duration: duration(
                    RPC_SERVER_CALL_DURATION,
                    "Duration of calls the host answered for the plugin (callbacks, host services).",
                ),
                starts: counter(PLUGIN_STARTS, "{start}", "Starts of the plugin."),
                start_duration,
                crashes: counter(
                    PLUGIN_CRASHES,
                    "{crash}",
                    "Runs of the plugin that ended without being asked to.",
                ),
                restarts: counter(
                    PLUGIN_RESTARTS,
                    "{restart}",
                    "Starts of the plugin after its previous run crashed or hung.",
                ),
                idle_stops: counter(
                    PLUGIN_IDLE_STOPS,
                    "{stop}",
                    "Runs of the plugin stopped after its idle timeout.",
                ),
                upgrades: counter(
                    PLUGIN_UPGRADES,
                    "{upgrade}",
                    "Upgrades of the plugin to a new version.",
                ),
                plugins,
                _observed: observed,
            }),
        }
    }

    /// The plugin `name`'s metrics (`sha256`: the digest its manifest pins, if any). Its
    /// attributes are made here, once; the resource gauges report it while the value lives.
    #[must_use]
    pub fn plugin(&self, name: &str, sha256: Option<&str>) -> PluginMetrics {
        let mut attributes = vec![KeyValue::new(PLUGIN_NAME_ATTRIBUTE, name.to_owned())];
        if let Some(sha256) = sha256 {
            attributes.push(KeyValue::new(PLUGIN_SHA256_ATTRIBUTE, sha256.to_owned()));
        }
        let plugin = Arc::new(Plugin {
            attributes,
            active: [AtomicI64::new(0), AtomicI64::new(0)],
            process: Mutex::new(None),
        });
        let mut plugins = lock(&self.instruments.plugins);
        plugins.retain(|p| p.strong_count() > 0);
        plugins.push(Arc::downgrade(&plugin));
        drop(plugins);
        PluginMetrics {
            instruments: Arc::clone(&self.instruments),
            plugin,
        }
    }
}

/// An observable instrument's callback: `f` for every plugin still measured.
fn observe<T>(
    plugins: &Registry,
    f: impl Fn(&Plugin, &dyn opentelemetry::metrics::AsyncInstrument<T>) + Send + Sync + 'static,
) -> impl Fn(&dyn opentelemetry::metrics::AsyncInstrument<T>) + Send + Sync + 'static {
    let plugins = Arc::clone(plugins);
    move |observer| {
        let live: Vec<Arc<Plugin>> = lock(&plugins).iter().filter_map(Weak::upgrade).collect();
        for plugin in live {
            f(&plugin, observer);
        }
    }
}

impl Plugin {
    fn with(&self, key: &'static str, value: &'static str) -> Vec<KeyValue> {
        let mut attributes = self.attributes.clone();
        attributes.push(KeyValue::new(key, value));
        attributes
    }

    fn running(&self) -> Option<ObservedProcess> {
        lock(&self.process).clone()
    }
}

/// One plugin's metrics: made by [`Metrics::plugin`]; a [`CallMetrics`] for its calls
/// ([`Telemetry::call_metrics`](crate::launch::Telemetry::call_metrics)), and told about its
/// lifecycle by its supervisor.
#[derive(Clone)]
pub struct PluginMetrics {
    instruments: Arc<Instruments>,
    plugin: Arc<Plugin>,
}

impl fmt::Debug for PluginMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginMetrics")
            .field("attributes", &self.plugin.attributes)
            .finish_non_exhaustive()
    }
}

impl PluginMetrics {
    /// A start ended with `outcome` after `elapsed`.
    pub fn start_ended(&self, outcome: StartOutcome, elapsed: Duration) {
        let outcome = match outcome {
            StartOutcome::Success => "success",
            StartOutcome::Failure => "failure",
        };
        let attributes = self.plugin.with(START_OUTCOME_ATTRIBUTE, outcome);
        self.instruments.starts.add(1, &attributes);
        self.instruments
            .start_duration
            .record(elapsed.as_secs_f64(), &attributes);
    }

    /// A start after a crash or hang succeeded.
    pub fn restarted(&self) {
        self.instruments.restarts.add(1, &self.plugin.attributes);
    }

    /// A run ended without being asked to.
    pub fn crashed(&self, reason: CrashReason) {
        let reason = match reason {
            CrashReason::Exit => "exit",
            CrashReason::Hang => "hang",
        };
        let attributes = self.plugin.with(CRASH_REASON_ATTRIBUTE, reason);
        self.instruments.crashes.add(1, &attributes);
    }

    /// A run was stopped as idle.
    pub fn idle_stopped(&self) {
        self.instruments.idle_stops.add(1, &self.plugin.attributes);
    }

    /// An upgrade to this version (these attributes) ended with `outcome`.
    pub fn upgraded(&self, outcome: UpgradeOutcome) {
        let outcome = match outcome {
            UpgradeOutcome::Success => "success",
            UpgradeOutcome::Failure => "failure",
        };
        let attributes = self.plugin.with(UPGRADE_OUTCOME_ATTRIBUTE, outcome);
        self.instruments.upgrades.add(1, &attributes);
    }

    /// The plugin runs as `pid` (in the cgroup `cgroup`, if it has one): the resource gauges
    /// read it from now on, at each collection.
    pub fn process_started(&self, pid: u32, cgroup: Option<PathBuf>) {
        *lock(&self.plugin.process) = Some(ObservedProcess { pid, cgroup });
    }

    /// The plugin's process ended: the resource gauges report nothing for it until the next
    /// [`process_started`](Self::process_started).
    pub fn process_ended(&self) {
        *lock(&self.plugin.process) = None;
    }

    /// The plugin's process `pid` ended: as [`process_ended`](Self::process_ended), unless the
    /// gauges already read a newer process (an upgrade's new instance, which shares these
    /// metrics when its attributes are the same).
    pub fn process_ended_of(&self, pid: u32) {
        let mut process = lock(&self.plugin.process);
        if process.as_ref().is_some_and(|p| p.pid == pid) {
            *process = None;
        }
    }
}

impl CallMetrics for PluginMetrics {
    fn begin(&self, side: CallSide, _method: &str) {
        self.plugin.active[side_index(side)].fetch_add(1, Ordering::Relaxed);
    }

    fn end(&self, side: CallSide, method: &str, code: Code, elapsed: Duration) {
        self.plugin.active[side_index(side)].fetch_sub(1, Ordering::Relaxed);
        let histogram = match side {
            CallSide::Client => &self.instruments.client_duration,
            CallSide::Server => &self.instruments.server_duration,
        };
        let [system, method, status] = [
            KeyValue::new("rpc.system.name", "grpc"),
            KeyValue::new("rpc.method", method.to_owned()),
            KeyValue::new("rpc.response.status_code", code_name(code)),
        ];
        let seconds = elapsed.as_secs_f64();
        // On the stack for the common case, a plugin named by its name alone.
        match self.plugin.attributes.as_slice() {
            [name] => histogram.record(seconds, &[name.clone(), system, method, status]),
            attributes => {
                let mut all = attributes.to_vec();
                all.extend([system, method, status]);
                histogram.record(seconds, &all);
            }
        }
    }
}

fn side_index(side: CallSide) -> usize {
    match side {
        CallSide::Client => 0,
        CallSide::Server => 1,
    }
}
