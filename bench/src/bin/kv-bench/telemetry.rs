//! `--telemetry off|metrics|tracing`: the host's telemetry, to measure what turning it on costs
//! (issue 24; the harness alternates the three in one run).
//!
//! - `off` — tether's default: no meter, and a subscriber without an OpenTelemetry layer, so a
//!   call costs a disabled span and a `None` check.
//! - `metrics` — a real OpenTelemetry SDK `MeterProvider` whose one reader is a
//!   [`ManualReader`] that is never collected: every call is aggregated into the instruments
//!   (the histogram's buckets, the calls-in-flight counters) as under a Prometheus or OTLP
//!   reader, and nothing is exported. (A provider without any reader would hand out no-op
//!   instruments and measure nothing.)
//! - `tracing` — an OpenTelemetry layer (`tracing-opentelemetry`) on an SDK `TracerProvider`
//!   with no span processor and no exporter, for `INFO` and above as `tests/tests/otel.rs`
//!   installs it: every call is a sampled, recorded span with its attributes, ended and
//!   dropped; its `traceparent` goes to the plugin in the call's metadata.

use std::sync::Arc;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::{ManualReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tether_broker::telemetry::{CallMetrics, Metrics};
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// The plugin name the metrics carry.
const PLUGIN_NAME: &str = "kv";

/// What the host measures and traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TelemetryMode {
    /// Neither (tether's default).
    Off,
    /// Per-plugin metrics on a meter whose reader is never collected.
    Metrics,
    /// Call spans recorded by an OpenTelemetry layer with no exporter.
    Tracing,
}

/// The host's telemetry, installed; kept alive for the whole run.
pub(crate) struct HostTelemetry {
    /// What each launch tells about its calls (`metrics` only).
    pub(crate) call_metrics: Option<Arc<dyn CallMetrics>>,
    _meter_provider: Option<SdkMeterProvider>,
    _tracer_provider: Option<SdkTracerProvider>,
}

/// Installs the logging subscriber (`var` holds its filter, default `warn`) and, as `mode`
/// says, the meter or the OpenTelemetry layer.
pub(crate) fn install(mode: TelemetryMode, var: &str) -> HostTelemetry {
    match mode {
        TelemetryMode::Off => {
            tether_examples::init_logging(var);
            HostTelemetry {
                call_metrics: None,
                _meter_provider: None,
                _tracer_provider: None,
            }
        }
        TelemetryMode::Metrics => {
            tether_examples::init_logging(var);
            let provider = SdkMeterProvider::builder()
                .with_reader(ManualReader::builder().build())
                .build();
            let metrics = Metrics::new(&provider.meter("kv-bench"));
            HostTelemetry {
                call_metrics: Some(Arc::new(metrics.plugin(PLUGIN_NAME, None))),
                _meter_provider: Some(provider),
                _tracer_provider: None,
            }
        }
        TelemetryMode::Tracing => {
            let provider = SdkTracerProvider::builder().build();
            let otel = tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("kv-bench"))
                .with_filter(LevelFilter::INFO);
            let log = tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .with_filter(
                    tracing_subscriber::EnvFilter::try_from_env(var)
                        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
                );
            tracing_subscriber::registry().with(log).with(otel).init();
            HostTelemetry {
                call_metrics: None,
                _meter_provider: None,
                _tracer_provider: Some(provider),
            }
        }
    }
}
