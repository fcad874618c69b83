//! The systems under test and how each runs a measurement.

use std::path::PathBuf;

/// One system under test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct System {
    /// Short id used in `bench-results.json`: `tether`, `go18`, `go101`, `floor`.
    pub id: &'static str,
    /// Column heading in `bench/BENCHMARKS.md`.
    pub label: String,
    /// How to run it.
    pub kind: SystemKind,
}

/// How a system runs a measurement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SystemKind {
    /// A KV host's `measure` subcommand with `KV_PLUGIN` set to a KV plugin (tether's
    /// `kv-bench`/`kv-plugin` or go-plugin's `kvhost`/`kvplugin`).
    KvHost {
        /// The host program.
        host: PathBuf,
        /// The plugin program.
        plugin: PathBuf,
        /// The counter host and plugin (go-plugin's `examples/bidirectional` contract) for the
        /// callback measurement; `None` leaves it out.
        counter: Option<CounterPrograms>,
        /// Whether the host is tether's, with the measurements only tether has (lazy catalog,
        /// confinement off).
        tether: bool,
        /// Whether the host takes `--multiplex` (go-plugin's multiplexed broker: tether and
        /// go-plugin ≥ 1.6, not 1.0.1).
        multiplex: bool,
    },
    /// The raw two-process unix-socket floor (`pingpong`).
    Floor {
        /// The `pingpong` program.
        pingpong: PathBuf,
    },
}

/// A counter host and plugin: `COUNTER_PLUGIN=<plugin> <host> <args…> measure callback …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterPrograms {
    /// The host program (`counter-bench`, go-plugin's `counterhost`).
    pub host: PathBuf,
    /// The plugin program.
    pub plugin: PathBuf,
    /// Host options before `measure`, e.g. `--plaintext` for go-plugin 1.0.1, whose broker
    /// dial-backs fail under AutoMTLS.
    pub host_args: Vec<String>,
    /// Whether the host takes `--multiplex` (go-plugin's multiplexed broker: tether and
    /// go-plugin ≥ 1.6, not 1.0.1).
    pub multiplex: bool,
}
