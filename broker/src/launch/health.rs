//! The start-up health check: `grpc.health.v1.Health/Check` for service
//! [`tether_proto::HEALTH_SERVICE`].

use std::time::Duration;

use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// How a health check failed.
#[derive(Debug)]
pub(crate) enum HealthFailure {
    /// The RPC failed.
    Rpc(tonic::Status),
    /// The plugin is not `SERVING`; the status's name.
    NotServing(String),
    /// No answer within the timeout.
    Timeout,
}

/// Asks the plugin whether it serves, within `timeout`.
pub(crate) async fn check(channel: Channel, timeout: Duration) -> Result<(), HealthFailure> {
    let mut client = HealthClient::new(channel);
    let request = HealthCheckRequest {
        service: tether_proto::HEALTH_SERVICE.to_owned(),
    };
    let response = match tokio::time::timeout(timeout, client.check(request)).await {
        Err(_) => return Err(HealthFailure::Timeout),
        Ok(Err(status)) => return Err(HealthFailure::Rpc(status)),
        Ok(Ok(response)) => response.into_inner(),
    };
    match ServingStatus::try_from(response.status) {
        Ok(ServingStatus::Serving) => Ok(()),
        Ok(other) => Err(HealthFailure::NotServing(other.as_str_name().to_owned())),
        Err(_) => Err(HealthFailure::NotServing(format!(
            "unknown ({})",
            response.status
        ))),
    }
}
