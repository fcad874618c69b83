//! The measurements: what each program run does and which arguments it takes.

use super::counts::{CONCURRENCY_LEVELS, Counts, MIB, MULTIPLEXED_CONCURRENCY, UNARY_SIZES};
use super::systems::SystemKind;

/// One program run, yielding one or more metric values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measurement {
    /// Spawn → first call done, repeatedly.
    Launch,
    /// Spawn → first call done with namespaces off: the other layers only (tether only;
    /// [`Launch`](Self::Launch) is tether's default, a world of its own where the host can
    /// make one). Run right after `Launch` in each round, so both see the same load.
    LaunchLayers,
    /// Sequential calls returning a value of this many bytes.
    Unary {
        /// Bytes of the value each call returns (one of [`UNARY_SIZES`]).
        size: u64,
    },
    /// 64-byte calls over this many concurrent callers.
    Rate {
        /// Concurrent callers.
        concurrency: u64,
        /// Whether the host offers go-plugin's multiplexed broker (`--multiplex`): the calls
        /// then travel on a yamux stream of the plugin's one connection.
        multiplex: bool,
    },
    /// Request/response round trips carrying this many bytes each way.
    Payload {
        /// Bytes per message.
        size: u64,
    },
    /// The plugin's resident memory after one call.
    PluginRss,
    /// The host's memory growth per live plugin.
    HostRss,
    /// Plain calls interleaved with calls carrying one callback through the broker.
    Callback {
        /// The broker mode.
        mode: CallbackMode,
    },
    /// Spawn → first call done with confinement off (tether only; [`Launch`](Self::Launch)
    /// is confinement `enforce`, tether's default).
    LaunchConfinementOff,
    /// A lazy catalog: load many manifests, use a few (tether only).
    Catalog,
}

/// How the host's broker carries callbacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackMode {
    /// go-plugin's default: a listener and a connection per brokered service.
    Default,
    /// go-plugin's multiplexed broker (`PLUGIN_MULTIPLEX_GRPC`): every callback is a yamux
    /// stream on the one connection to the plugin.
    Multiplexed,
}

impl CallbackMode {
    /// Every mode, in report order.
    pub const ALL: &[Self] = &[Self::Default, Self::Multiplexed];

    /// Host options selecting the mode (before `measure`).
    #[must_use]
    pub fn host_args(self) -> &'static [&'static str] {
        match self {
            Self::Default => &[],
            Self::Multiplexed => &["--multiplex"],
        }
    }

    /// Metric ids: (plain call p50, callback p50, callback p99, callback ÷ plain call).
    #[must_use]
    pub fn ids(self) -> [&'static str; 4] {
        match self {
            Self::Default => [
                "callback_plain_p50",
                "callback_p50",
                "callback_p99",
                "callback_over_plain",
            ],
            Self::Multiplexed => [
                "callback_mux_plain_p50",
                "callback_mux_p50",
                "callback_mux_p99",
                "callback_mux_over_plain",
            ],
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Multiplexed => "multiplexed",
        }
    }
}

/// A metric value from one round.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A number in the metric's unit.
    Number(f64),
    /// The system could not do it; the gRPC code name (e.g. `ResourceExhausted`).
    Failed(String),
}

impl Measurement {
    /// Every measurement, in the order a round runs them.
    #[must_use]
    pub fn all() -> Vec<Self> {
        let mut all = vec![Self::Launch, Self::LaunchLayers];
        all.extend(UNARY_SIZES.iter().map(|&size| Self::Unary { size }));
        all.extend(CONCURRENCY_LEVELS.iter().map(|&concurrency| Self::Rate {
            concurrency,
            multiplex: false,
        }));
        all.push(Self::Rate {
            concurrency: MULTIPLEXED_CONCURRENCY,
            multiplex: true,
        });
        all.extend([
            Self::Payload { size: MIB },
            Self::Payload { size: 64 * MIB },
            Self::PluginRss,
            Self::HostRss,
        ]);
        all.extend(
            CallbackMode::ALL
                .iter()
                .map(|&mode| Self::Callback { mode }),
        );
        all.extend([Self::LaunchConfinementOff, Self::Catalog]);
        all
    }

    /// A short name for progress messages.
    #[must_use]
    pub fn name(&self) -> String {
        match self {
            Self::Launch => "launch".into(),
            Self::LaunchLayers => "launch namespaces=off".into(),
            Self::Unary { size } => format!("unary {size} B"),
            Self::Rate {
                concurrency,
                multiplex: false,
            } => format!("rate c={concurrency}"),
            Self::Rate {
                concurrency,
                multiplex: true,
            } => format!("rate c={concurrency} multiplexed"),
            Self::Payload { size } => format!("payload {} MiB", size / MIB),
            Self::PluginRss => "plugin-rss".into(),
            Self::HostRss => "host-rss".into(),
            Self::Callback { mode } => format!("callback {}", mode.name()),
            Self::LaunchConfinementOff => "launch sandbox=off".into(),
            Self::Catalog => "catalog".into(),
        }
    }

    /// Whether `kind` can run this measurement (the floor has no concurrency, hosting or
    /// callbacks; the catalog and confinement are tether's).
    #[must_use]
    pub fn applies_to(&self, kind: &SystemKind) -> bool {
        match kind {
            SystemKind::KvHost {
                counter,
                tether,
                multiplex,
                ..
            } => match self {
                Self::Callback { mode } => counter
                    .as_ref()
                    .is_some_and(|c| *mode == CallbackMode::Default || c.multiplex),
                Self::Rate {
                    multiplex: true, ..
                } => *multiplex,
                Self::LaunchConfinementOff | Self::LaunchLayers | Self::Catalog => *tether,
                _ => true,
            },
            SystemKind::Floor { .. } => !matches!(
                self,
                Self::Rate { .. }
                    | Self::HostRss
                    | Self::Callback { .. }
                    | Self::LaunchConfinementOff
                    | Self::LaunchLayers
                    | Self::Catalog
            ),
        }
    }

    /// Host options before `measure`.
    #[must_use]
    pub fn host_args(&self) -> Vec<String> {
        match self {
            Self::Callback { mode } => mode.host_args().iter().map(|&a| a.to_owned()).collect(),
            Self::Rate {
                multiplex: true, ..
            } => CallbackMode::Multiplexed
                .host_args()
                .iter()
                .map(|&a| a.to_owned())
                .collect(),
            Self::LaunchConfinementOff => vec!["--sandbox".into(), "off".into()],
            Self::LaunchLayers => vec!["--namespaces".into(), "off".into()],
            _ => Vec::new(),
        }
    }

    /// The `measure` arguments (after the program name and, for hosts, `measure`).
    #[must_use]
    pub fn args(&self, counts: &Counts) -> Vec<String> {
        let words: Vec<String> = match self {
            Self::Launch | Self::LaunchLayers | Self::LaunchConfinementOff => vec![
                "launch".into(),
                "--count".into(),
                counts.launches.to_string(),
            ],
            Self::Unary { size } => vec![
                "unary".into(),
                "--calls".into(),
                counts.unary_calls.to_string(),
                "--warmup".into(),
                counts.warmup.to_string(),
                "--size".into(),
                size.to_string(),
            ],
            Self::Rate { concurrency, .. } => vec![
                "rate".into(),
                "--calls".into(),
                counts.rate_calls.to_string(),
                "--concurrency".into(),
                concurrency.to_string(),
                "--warmup".into(),
                counts.rate_warmup.to_string(),
            ],
            Self::Payload { size } => vec![
                "payload".into(),
                "--size".into(),
                size.to_string(),
                "--rounds".into(),
                if *size >= 64 * MIB {
                    counts.rounds_64mib
                } else {
                    counts.rounds_1mib
                }
                .to_string(),
            ],
            Self::PluginRss => vec!["plugin-rss".into()],
            Self::HostRss => vec![
                "host-rss".into(),
                "--plugins".into(),
                counts.live_plugins.to_string(),
            ],
            Self::Callback { .. } => vec![
                "callback".into(),
                "--calls".into(),
                counts.callback_pairs.to_string(),
                "--warmup".into(),
                counts.callback_warmup.to_string(),
            ],
            Self::Catalog => vec![
                "catalog".into(),
                "--manifests".into(),
                counts.catalog_manifests.to_string(),
                "--use".into(),
                counts.catalog_used.to_string(),
                "--repeat".into(),
                counts.catalog_repeat.to_string(),
            ],
        };
        words
    }
}
