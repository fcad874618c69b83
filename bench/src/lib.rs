//! Benchmarks of tether side by side with HashiCorp go-plugin, on the same machine in the same
//! run.
//!
//! `bash bench/run.sh` builds what it needs (release `kv-bench`, `counter-bench`, `kv-plugin`, `counter-plugin`, `pingpong` and
//! `tether-bench`; the Go peers with `tests/go/build.sh`) and runs the `tether-bench`
//! orchestrator, which
//!
//! 1. runs every [`suite::Measurement`] on every [`suite::System`] — tether host ↔ tether
//!    plugin, go-plugin v1.8 host ↔ plugin, Debian's go-plugin 1.0.1 host ↔ plugin, and the raw
//!    unix-socket floor (`pingpong`) — in alternating rounds;
//! 2. parses each program's one-line output ([`line`](mod@line)) and computes every statistic itself
//!    ([`stats`], nearest-rank percentiles, median round), so both systems are judged by the
//!    same code;
//!    The runners' rows ([`suite::RunnerMeasurement`]) run in the same rounds: `kv-bench`
//!    under the process runner and under gVisor, and N workflow steps as one gVisor container
//!    per step (`kv-step`) against one long-lived plugin;
//! 3. writes the generated section of `bench/BENCHMARKS.md` and `bench-results.json` ([`report`]),
//!    with the machine ([`machine`]), the goals and what each measured.
//!
//! The drivers' `measure` subcommands do the timing: tether's `kv-bench` and `counter-bench`
//! (`src/bin/kv-bench/`, `src/bin/counter-bench/`: tether hosts of the KV and counter examples'
//! contracts) and go-plugin's (`tests/go/kvhost/measure.go`, `tests/go/counterhost`);
//! `pingpong` (`src/bin/pingpong.rs`) is the floor.
//! `cargo bench -p tether-bench` runs divan micro-benchmarks of the handshake codec and
//! certificate generation.

pub mod affinity;
pub mod line;
pub mod machine;
pub mod report;
pub mod rounds;
pub mod run;
pub mod stats;
pub mod suite;
