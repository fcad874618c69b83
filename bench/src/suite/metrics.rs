//! The metrics the report shows: id, label, unit and which direction is better.

/// Whether a smaller or a larger value is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Latency, memory.
    Lower,
    /// Throughput.
    Higher,
}

/// A row of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricSpec {
    /// Key in `bench-results.json`.
    pub id: &'static str,
    /// Row label.
    pub label: &'static str,
    /// Unit of the values.
    pub unit: &'static str,
    /// Direction.
    pub better: Better,
}

/// The report's rows, in order.
pub const METRICS: &[MetricSpec] = &[
    MetricSpec {
        id: "launch_p50",
        label: "launch → first call done (AutoMTLS), p50",
        unit: "ms",
        better: Better::Lower,
    },
    MetricSpec {
        id: "launch_p90",
        label: "launch → first call done (AutoMTLS), p90",
        unit: "ms",
        better: Better::Lower,
    },
    MetricSpec {
        id: "launch_p99",
        label: "launch → first call done (AutoMTLS), p99",
        unit: "ms",
        better: Better::Lower,
    },
    MetricSpec {
        id: "unary_p50",
        label: "unary 64 B round trip, sequential, p50",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "unary_p99",
        label: "unary 64 B round trip, sequential, p99",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "unary_1kib_p50",
        label: "unary 1 KiB round trip, sequential, p50",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "unary_1kib_p99",
        label: "unary 1 KiB round trip, sequential, p99",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "unary_64kib_p50",
        label: "unary 64 KiB round trip, sequential, p50",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "unary_64kib_p99",
        label: "unary 64 KiB round trip, sequential, p99",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "rate_c1",
        label: "calls/s, 1 caller",
        unit: "calls/s",
        better: Better::Higher,
    },
    MetricSpec {
        id: "rate_c16",
        label: "calls/s, 16 concurrent callers",
        unit: "calls/s",
        better: Better::Higher,
    },
    MetricSpec {
        id: "rate_c64",
        label: "calls/s, 64 concurrent callers",
        unit: "calls/s",
        better: Better::Higher,
    },
    MetricSpec {
        id: "rate_mux_c64",
        label: "calls/s, 64 concurrent callers, multiplexed broker",
        unit: "calls/s",
        better: Better::Higher,
    },
    MetricSpec {
        id: "payload_1mib",
        label: "1 MiB request + 1 MiB response",
        unit: "MB/s",
        better: Better::Higher,
    },
    MetricSpec {
        id: "payload_64mib",
        label: "64 MiB request + 64 MiB response",
        unit: "MB/s",
        better: Better::Higher,
    },
    MetricSpec {
        id: "plugin_rss",
        label: "idle plugin RSS after one call",
        unit: "MB",
        better: Better::Lower,
    },
    MetricSpec {
        id: "host_rss_per_plugin",
        label: "host RSS growth per extra live plugin",
        unit: "kB",
        better: Better::Lower,
    },
    MetricSpec {
        id: "host_fds_per_plugin",
        label: "host descriptors per live plugin",
        unit: "fds",
        better: Better::Lower,
    },
    MetricSpec {
        id: "callback_plain_p50",
        label: "plain call (counter `Get`), interleaved with the callback calls, p50",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "callback_p50",
        label: "call carrying one callback via the broker (default mode), p50",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "callback_p99",
        label: "call carrying one callback via the broker (default mode), p99",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "callback_over_plain",
        label: "callback call ÷ plain call (default mode), p50s",
        unit: "×",
        better: Better::Lower,
    },
    MetricSpec {
        id: "callback_mux_plain_p50",
        label: "plain call (counter `Get`), multiplexed broker, interleaved with its callback calls, p50",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "callback_mux_p50",
        label: "call carrying one callback via the broker (multiplexed mode), p50",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "callback_mux_p99",
        label: "call carrying one callback via the broker (multiplexed mode), p99",
        unit: "µs",
        better: Better::Lower,
    },
    MetricSpec {
        id: "callback_mux_over_plain",
        label: "callback call ÷ plain call (multiplexed mode), p50s",
        unit: "×",
        better: Better::Lower,
    },
    MetricSpec {
        id: "launch_off_p50",
        label: "launch → first call done, confinement `off`, p50 (the launch rows are `enforce`)",
        unit: "ms",
        better: Better::Lower,
    },
    MetricSpec {
        id: "launch_layers_p50",
        label: "launch → first call done, namespaces `off` (the other layers only), p50 (the launch rows are in a world where the host can make one)",
        unit: "ms",
        better: Better::Lower,
    },
    MetricSpec {
        id: "launch_layers_p90",
        label: "launch → first call done, namespaces `off`, p90",
        unit: "ms",
        better: Better::Lower,
    },
    MetricSpec {
        id: "catalog_load",
        label: "lazy catalog: load 1,000 manifests, p50",
        unit: "ms",
        better: Better::Lower,
    },
    MetricSpec {
        id: "catalog_use",
        label: "lazy catalog: load 1,000 manifests + start and call 2 plugins, p50",
        unit: "ms",
        better: Better::Lower,
    },
    MetricSpec {
        id: "catalog_started",
        label: "lazy catalog: plugin processes started",
        unit: "processes",
        better: Better::Lower,
    },
];

/// Metrics of features go-plugin does not have (confinement, the lazy catalog): `n/a` in its
/// columns.
pub const TETHER_ONLY: &[&str] = &[
    "launch_off_p50",
    "launch_layers_p50",
    "launch_layers_p90",
    "host_fds_per_plugin",
    "catalog_load",
    "catalog_use",
    "catalog_started",
];

/// Looks a metric up by id.
#[must_use]
pub fn metric(id: &str) -> Option<&'static MetricSpec> {
    METRICS.iter().find(|m| m.id == id)
}
