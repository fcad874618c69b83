//! How many calls, launches and rounds a run takes.

/// How many calls, launches and rounds each measurement takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Alternating rounds.
    pub rounds: u32,
    /// Launches per round (`launch`).
    pub launches: u64,
    /// Timed sequential calls per round (`unary`).
    pub unary_calls: u64,
    /// Timed calls per concurrency level per round (`rate`).
    pub rate_calls: u64,
    /// Untimed sequential calls before `unary`.
    pub warmup: u64,
    /// Untimed calls before `rate`, spread over the same concurrent callers as the timed ones,
    /// so that timing starts with the machine already under that load: with only a few
    /// sequential calls first, the first ≈ 2,000 concurrent calls ran up to 30 % slower on this
    /// VM while its CPUs came out of idle (bench/BENCHMARKS.md, Decisions).
    pub rate_warmup: u64,
    /// Timed 1 MiB round trips per round.
    pub rounds_1mib: u64,
    /// Timed 64 MiB round trips per round.
    pub rounds_64mib: u64,
    /// Live plugins for the host-RSS measurement.
    pub live_plugins: u64,
    /// Timed (plain call, callback call) pairs per round.
    pub callback_pairs: u64,
    /// Untimed pairs before them.
    pub callback_warmup: u64,
    /// Manifests in the lazy catalog.
    pub catalog_manifests: u64,
    /// Plugins of the catalog used.
    pub catalog_used: u64,
    /// Catalog loads per round.
    pub catalog_repeat: u64,
}

impl Counts {
    /// The full benchmark: [`DEFAULT_ROUNDS`] rounds.
    pub const FULL: Self = Self {
        rounds: DEFAULT_ROUNDS,
        launches: 40,
        unary_calls: 5_000,
        rate_calls: 30_000,
        warmup: 100,
        rate_warmup: 2_000,
        rounds_1mib: 50,
        rounds_64mib: 3,
        live_plugins: 100,
        callback_pairs: 1_000,
        callback_warmup: 20,
        catalog_manifests: 1_000,
        catalog_used: 2,
        catalog_repeat: 5,
    };

    /// A smoke run (`--quick`): every measurement runs, with tiny counts; numbers are not
    /// meaningful.
    pub const QUICK: Self = Self {
        rounds: 1,
        launches: 2,
        unary_calls: 50,
        rate_calls: 200,
        warmup: 5,
        rate_warmup: 20,
        rounds_1mib: 2,
        rounds_64mib: 1,
        live_plugins: 3,
        callback_pairs: 5,
        callback_warmup: 1,
        catalog_manifests: 1_000,
        catalog_used: 2,
        catalog_repeat: 1,
    };
}

/// Rounds of the full benchmark. Each round runs every measurement on every system, the
/// systems' order rotating from round to round; the report gives the median round.
pub const DEFAULT_ROUNDS: u32 = 3;

/// 1 MiB.
pub const MIB: u64 = 1024 * 1024;

/// Concurrency levels of the calls/s measurement.
pub const CONCURRENCY_LEVELS: [u64; 3] = [1, 16, 64];

/// Concurrent callers of the calls/s measurement in the multiplexed broker mode.
pub const MULTIPLEXED_CONCURRENCY: u64 = 64;

/// Value sizes of the unary measurement: 64 B, 1 KiB, 64 KiB.
pub const UNARY_SIZES: [u64; 3] = [64, 1024, 64 * 1024];
