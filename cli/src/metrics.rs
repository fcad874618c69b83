//! `tether run`'s metrics: the supervisor measures its plugins on an OpenTelemetry
//! `MeterProvider` whose readers are a Prometheus text endpoint (`--metrics-listen`) and/or an
//! OTLP exporter configured by the standard `OTEL_*` variables (`--otlp-metrics`).

use std::net::SocketAddr;
use std::time::Duration;

use opentelemetry::metrics::{Meter, MeterProvider as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use prometheus::{Encoder as _, TextEncoder};

use crate::args::RunArgs;
use crate::error::CliError;

/// The protocols `--otlp-metrics` speaks, as `OTEL_EXPORTER_OTLP_PROTOCOL` spells them.
const OTLP_PROTOCOLS: &[&str] = &["http/protobuf", "grpc"];

/// The host's metrics pipeline for one `tether run`.
pub(crate) struct Pipeline {
    provider: SdkMeterProvider,
    server: Option<tokio::task::JoinHandle<()>>,
    linger: Option<Duration>,
}

impl Pipeline {
    /// The meter the supervisor's instruments are made on.
    pub(crate) fn meter(&self) -> Meter {
        self.provider.meter("tether")
    }

    /// After the run: keeps the Prometheus endpoint up for `--metrics-linger` (or until SIGINT
    /// or SIGTERM), then sends the last values over OTLP and stops.
    pub(crate) async fn finish(self) {
        if let (Some(_), Some(linger)) = (&self.server, self.linger) {
            eprintln!(
                "tether: the run ended; serving its final metrics for {} (SIGINT or SIGTERM ends this)",
                humantime::format_duration(linger)
            );
            let mut terminate =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                () = tokio::time::sleep(linger) => {}
                _ = tokio::signal::ctrl_c() => {}
                Some(()) = async { terminate.as_mut()?.recv().await } => {}
            }
        }
        if let Some(server) = &self.server {
            server.abort();
        }
        let provider = self.provider;
        // The exporter's last export runs on the reader's thread and needs this runtime's IO.
        match tokio::task::spawn_blocking(move || provider.shutdown()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the last metrics export failed"),
            Err(e) => tracing::warn!(error = %e, "the last metrics export failed"),
        }
    }
}

/// The pipeline `args` ask for, or `None` when they ask for no metrics.
///
/// # Errors
/// [`CliError::Metrics`]: the address cannot be bound, an `OTEL_*` protocol is not one this
/// build speaks, or the exporter cannot be built.
pub(crate) async fn start(args: &RunArgs) -> Result<Option<Pipeline>, CliError> {
    if args.metrics_listen.is_none() && !args.otlp_metrics {
        return Ok(None);
    }
    let mut builder = SdkMeterProvider::builder()
        .with_resource(Resource::builder().with_service_name("tether").build());
    let mut server = None;
    if let Some(addr) = args.metrics_listen {
        let registry = prometheus::Registry::new();
        let exporter = opentelemetry_prometheus::exporter()
            .with_registry(registry.clone())
            .build()
            .map_err(|e| metrics_error("the Prometheus exporter", e))?;
        builder = builder.with_reader(exporter);
        server = Some(serve(addr, registry).await?);
    }
    if args.otlp_metrics {
        check_protocols(|name| std::env::var(name).ok())?;
        let exporter = opentelemetry_otlp::MetricExporter::builder()
            .build()
            .map_err(|e| metrics_error("the OTLP exporter", e))?;
        builder = builder.with_reader(PeriodicReader::builder(exporter).build());
    }
    Ok(Some(Pipeline {
        provider: builder.build(),
        server,
        linger: args.metrics_linger,
    }))
}

/// Serves `registry` as Prometheus's text format at `http://addr/metrics`; says where on stderr
/// (port 0 picks a free one).
async fn serve(
    addr: SocketAddr,
    registry: prometheus::Registry,
) -> Result<tokio::task::JoinHandle<()>, CliError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| metrics_error(&format!("--metrics-listen {addr}"), e))?;
    let bound = listener
        .local_addr()
        .map_err(|e| metrics_error(&format!("--metrics-listen {addr}"), e))?;
    eprintln!("tether: serving metrics at http://{bound}/metrics");
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let registry = registry.clone();
            async move { exposition(&registry) }
        }),
    );
    Ok(tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "the metrics endpoint stopped");
        }
    }))
}

/// The registry's metrics in Prometheus's text format, with its content type.
fn exposition(
    registry: &prometheus::Registry,
) -> (
    axum::http::StatusCode,
    [(axum::http::HeaderName, String); 1],
    Vec<u8>,
) {
    let encoder = TextEncoder::new();
    let mut body = Vec::new();
    let status = match encoder.encode(&registry.gather(), &mut body) {
        Ok(()) => axum::http::StatusCode::OK,
        Err(e) => {
            body = e.to_string().into_bytes();
            axum::http::StatusCode::INTERNAL_SERVER_ERROR
        }
    };
    let content_type = (
        axum::http::header::CONTENT_TYPE,
        encoder.format_type().to_owned(),
    );
    (status, [content_type], body)
}

/// The OTLP protocol variables, if set, name a protocol this build speaks (the exporter itself
/// would fall back to its default without a word).
fn check_protocols(lookup: impl Fn(&str) -> Option<String>) -> Result<(), CliError> {
    for name in [
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        if let Some(value) = lookup(name)
            && !OTLP_PROTOCOLS.contains(&value.trim())
        {
            return Err(CliError::Metrics {
                what: format!("{name}={value:?}"),
                reason: format!(
                    "not a protocol --otlp-metrics speaks ({})",
                    OTLP_PROTOCOLS.join(", ")
                ),
            });
        }
    }
    Ok(())
}

fn metrics_error(what: &str, e: impl std::fmt::Display) -> CliError {
    CliError::Metrics {
        what: what.to_owned(),
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_otlp_protocol_this_build_does_not_speak_is_refused_naming_the_variable() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert!(check_protocols(env(&[])).is_ok());
        assert!(check_protocols(env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")])).is_ok());
        let err = check_protocols(env(&[("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/json")]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=\"http/json\""),
            "{err}"
        );
    }
}
