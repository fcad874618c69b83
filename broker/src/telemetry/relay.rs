//! The host's relay of its plugins' traces: an OTLP trace service served to plugins as a host
//! service (over the connection they already have — no network grant, no exporter
//! configuration inside the plugin), forwarding what they export to the OTLP endpoint the
//! host's own pipeline is configured with (OpenTelemetry's `OTEL_EXPORTER_OTLP_*` variables).
//! Each forwarded batch names the plugin it came from in its resource
//! (`tether.plugin.name`), from what the host knows, not what the plugin says.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry_http::HttpClient as _;
use opentelemetry_http::hyper::HyperClient;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message as _;
use tether_transport::telemetry::CallingPlugin;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};

/// Where the relay sends when no `OTEL_EXPORTER_OTLP_*ENDPOINT` is set: OpenTelemetry's
/// default for OTLP over gRPC.
pub const DEFAULT_OTLP_GRPC_ENDPOINT: &str = "http://localhost:4317";
/// The default for OTLP over HTTP (`…/v1/traces` is appended, as the specification says).
pub const DEFAULT_OTLP_HTTP_ENDPOINT: &str = "http://localhost:4318";
/// How long one forwarded export may take when `OTEL_EXPORTER_OTLP_TIMEOUT` is unset
/// (OpenTelemetry's default). Override with [`OtlpRelay::timeout`].
pub const DEFAULT_RELAY_TIMEOUT: Duration = Duration::from_secs(10);

/// The resource attribute naming the plugin a relayed batch came from.
pub const PLUGIN_NAME_ATTRIBUTE: &str = "tether.plugin.name";

/// The wire the relay forwards over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OtlpProtocol {
    /// OTLP over gRPC (`grpc`).
    Grpc,
    /// OTLP over HTTP with protobuf bodies (`http/protobuf`).
    HttpProtobuf,
}

/// Why an [`OtlpRelay`] could not be configured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    /// An `OTEL_EXPORTER_OTLP_*` variable has a value the relay cannot use.
    #[error("{variable}={value:?}: {problem}")]
    Variable {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it, and what would do.
        problem: &'static str,
    },
}

/// Forwards plugins' OTLP trace exports to the host's OTLP endpoint. Serve it to plugins with
/// [`PluginClientBuilder::host_service`](crate::PluginClientBuilder::host_service)`(relay.service())`
/// (the supervisor and `tether run` do when telemetry is on); tether's SDKs and go-plugin
/// plugins exporting over the host-services connection send there.
#[derive(Clone)]
pub struct OtlpRelay {
    target: Target,
    timeout: Duration,
}

#[derive(Clone)]
enum Target {
    Grpc(TraceServiceClient<Channel>),
    Http {
        url: String,
        client: Arc<HyperClient>,
    },
}

impl fmt::Debug for OtlpRelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = match &self.target {
            Target::Grpc(_) => "grpc".to_owned(),
            Target::Http { url, .. } => url.clone(),
        };
        f.debug_struct("OtlpRelay")
            .field("target", &target)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl OtlpRelay {
    /// Configured as OpenTelemetry's OTLP exporters are: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`
    /// or `OTEL_EXPORTER_OTLP_PROTOCOL` (`grpc`, the default, or `http/protobuf`),
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) or `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// (`/v1/traces` appended over HTTP), `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` or
    /// `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds).
    ///
    /// # Errors
    /// A variable with a value that is not a protocol, URL or number of milliseconds.
    pub fn from_env() -> Result<Self, RelayError> {
        Self::from_lookup(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// As [`from_env`](Self::from_env), reading the variables through `lookup`.
    ///
    /// # Errors
    /// As [`from_env`](Self::from_env).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, RelayError> {
        let first = |names: [&'static str; 2]| {
            names
                .into_iter()
                .find_map(|n| lookup(n).map(|value| (n, value)))
        };
        let protocol = match first([
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ]) {
            None => OtlpProtocol::Grpc,
            Some((_, v)) if v == "grpc" => OtlpProtocol::Grpc,
            Some((_, v)) if v == "http/protobuf" => OtlpProtocol::HttpProtobuf,
            Some((variable, value)) => {
                return Err(RelayError::Variable {
                    variable,
                    value,
                    problem: "the relay speaks `grpc` or `http/protobuf`",
                });
            }
        };
        let timeout = match first([
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ]) {
            None => DEFAULT_RELAY_TIMEOUT,
            Some((variable, value)) => match value.parse::<u64>() {
                Ok(ms) => Duration::from_millis(ms),
                Err(_) => {
                    return Err(RelayError::Variable {
                        variable,
                        value,
                        problem: "expected a whole number of milliseconds",
                    });
                }
            },
        };
        let endpoint = match (lookup("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), protocol) {
            (Some(url), _) => ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url),
            (None, OtlpProtocol::Grpc) => (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                lookup("OTEL_EXPORTER_OTLP_ENDPOINT")
                    .unwrap_or_else(|| DEFAULT_OTLP_GRPC_ENDPOINT.to_owned()),
            ),
            (None, OtlpProtocol::HttpProtobuf) => (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!(
                    "{}/v1/traces",
                    lookup("OTEL_EXPORTER_OTLP_ENDPOINT")
                        .as_deref()
                        .unwrap_or(DEFAULT_OTLP_HTTP_ENDPOINT)
                        .trim_end_matches('/')
                ),
            ),
        };
        Self::new(protocol, endpoint.0, endpoint.1).map(|relay| relay.timeout(timeout))
    }

    /// Forwards over `protocol` to `url` (for HTTP, the full URL of the traces endpoint).
    ///
    /// # Errors
    /// [`RelayError::Variable`] (named `variable`) when `url` is not a URL.
    fn new(
        protocol: OtlpProtocol,
        variable: &'static str,
        url: String,
    ) -> Result<Self, RelayError> {
        let bad_url = |value: String| RelayError::Variable {
            variable,
            value,
            problem: "expected an http:// or https:// URL",
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(bad_url(url));
        }
        let target = match protocol {
            OtlpProtocol::Grpc => {
                let endpoint = Endpoint::from_shared(url.clone()).map_err(|_| bad_url(url))?;
                Target::Grpc(TraceServiceClient::new(endpoint.connect_lazy()))
            }
            OtlpProtocol::HttpProtobuf => Target::Http {
                url,
                client: Arc::new(HyperClient::with_default_connector(
                    DEFAULT_RELAY_TIMEOUT,
                    None,
                )),
            },
        };
        Ok(Self {
            target,
            timeout: DEFAULT_RELAY_TIMEOUT,
        })
    }

    /// Forwards over OTLP/gRPC to `url` (`http://collector:4317`).
    ///
    /// # Errors
    /// When `url` is not an `http://` or `https://` URL.
    pub fn grpc(url: impl Into<String>) -> Result<Self, RelayError> {
        Self::new(
            OtlpProtocol::Grpc,
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            url.into(),
        )
    }

    /// See [`DEFAULT_RELAY_TIMEOUT`].
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The OTLP trace service to serve to plugins as a host service.
    #[must_use]
    pub fn service(&self) -> TraceServiceServer<Self> {
        TraceServiceServer::new(self.clone())
    }

    async fn forward(&self, request: ExportTraceServiceRequest) -> Result<(), Status> {
        match &self.target {
            Target::Grpc(client) => {
                let mut request = Request::new(request);
                request.set_timeout(self.timeout);
                client.clone().export(request).await.map(drop)
            }
            Target::Http { url, client } => {
                let http = tonic::codegen::http::Request::post(url.as_str())
                    .header("content-type", "application/x-protobuf")
                    .body(request.encode_to_vec().into())
                    .map_err(|e| Status::internal(e.to_string()))?;
                let sent = tokio::time::timeout(self.timeout, client.send_bytes(http)).await;
                match sent {
                    Err(_) => Err(Status::deadline_exceeded(
                        "the OTLP endpoint did not answer",
                    )),
                    Ok(Err(e)) => Err(Status::unavailable(e.to_string())),
                    Ok(Ok(response)) if response.status().is_success() => Ok(()),
                    Ok(Ok(response)) => Err(Status::unavailable(format!(
                        "the OTLP endpoint answered {}",
                        response.status()
                    ))),
                }
            }
        }
    }
}

#[tonic::async_trait]
impl TraceService for OtlpRelay {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let plugin = request.extensions().get::<CallingPlugin>().cloned();
        let mut request = request.into_inner();
        if let Some(CallingPlugin(plugin)) = plugin {
            name_plugin(&mut request, &plugin);
        }
        if let Err(status) = self.forward(request).await {
            tracing::debug!(%status, "relaying a plugin's spans failed");
            // The plugin's exporter retries or drops, as it would with a collector.
            return Err(Status::unavailable(format!(
                "the host could not forward the spans: {}",
                status.message()
            )));
        }
        Ok(Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// Sets `tether.plugin.name` on every resource of `request` (replacing what the plugin said).
fn name_plugin(request: &mut ExportTraceServiceRequest, plugin: &str) {
    for spans in &mut request.resource_spans {
        let resource = spans.resource.get_or_insert_with(Default::default);
        resource
            .attributes
            .retain(|kv| kv.key != PLUGIN_NAME_ATTRIBUTE);
        resource.attributes.push(KeyValue {
            key: PLUGIN_NAME_ATTRIBUTE.to_owned(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(plugin.to_owned())),
            }),
            ..KeyValue::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use opentelemetry_proto::tonic::trace::v1::ResourceSpans;

    use super::*;

    fn relay(vars: &[(&str, &str)]) -> Result<OtlpRelay, RelayError> {
        let vars: HashMap<_, _> = vars.iter().copied().collect();
        OtlpRelay::from_lookup(|name| vars.get(name).map(|v| (*v).to_owned()))
    }

    #[tokio::test]
    async fn the_otlp_variables_choose_the_wire_the_url_and_the_timeout() {
        let grpc = relay(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317")]).unwrap();
        assert!(matches!(grpc.target, Target::Grpc(_)));
        let http = relay(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "250"),
        ])
        .unwrap();
        assert!(
            matches!(&http.target, Target::Http { url, .. } if url == "http://c:4318/v1/traces")
        );
        assert_eq!(http.timeout, Duration::from_millis(250));
        let signal = relay(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:9/traces"),
        ])
        .unwrap();
        assert!(matches!(&signal.target, Target::Http { url, .. } if url == "http://c:9/traces"));
    }

    #[tokio::test]
    async fn a_protocol_the_relay_cannot_speak_or_a_bad_url_is_an_error_naming_the_variable() {
        let err = relay(&[("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=\"http/json\"")
        );
        let err = relay(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317")]).unwrap_err();
        assert!(err.to_string().contains("OTEL_EXPORTER_OTLP_ENDPOINT"));
        let err = relay(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "10s")]).unwrap_err();
        assert!(err.to_string().contains("milliseconds"));
    }

    #[test]
    fn the_host_names_the_plugin_in_each_resource_over_what_the_plugin_claimed() {
        let claimed = KeyValue {
            key: PLUGIN_NAME_ATTRIBUTE.to_owned(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue("someone-else".into())),
            }),
            ..KeyValue::default()
        };
        let mut request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans::default(), ResourceSpans::default()],
        };
        request.resource_spans[0]
            .resource
            .get_or_insert_with(Default::default)
            .attributes
            .push(claimed);
        name_plugin(&mut request, "kv");
        for spans in &request.resource_spans {
            let names: Vec<_> = spans
                .resource
                .as_ref()
                .unwrap()
                .attributes
                .iter()
                .filter(|kv| kv.key == PLUGIN_NAME_ATTRIBUTE)
                .map(|kv| kv.value.clone().unwrap().value.unwrap())
                .collect();
            assert_eq!(names, [any_value::Value::StringValue("kv".into())]);
        }
    }
}
