//! [`GrpcService`]: the one bound for "a tonic service tether can serve".

use std::convert::Infallible;

use axum::response::IntoResponse;
use tonic::body::Body;
use tonic::codegen::Service;
use tonic::codegen::http::Request;
use tonic::server::NamedService;

/// A gRPC service that tether can serve: what tonic's generated `…Server<T>` types are (and
/// what [`tonic::service::Routes::new`] takes).
///
/// Implemented for every type with these properties; there is nothing to implement by hand.
/// Use it as the bound wherever a service is accepted, instead of spelling the bound out:
///
/// ```
/// use tether_transport::GrpcService;
/// use tonic::service::Routes;
///
/// fn routes_of<S: GrpcService>(service: S) -> Routes {
///     Routes::new(service)
/// }
///
/// let (_reporter, health) = tonic_health::server::health_reporter();
/// let _routes = routes_of(health);
/// ```
pub trait GrpcService:
    Service<Request<Body>, Error = Infallible, Response: IntoResponse, Future: Send + 'static>
    + NamedService
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S> GrpcService for S where
    S: Service<Request<Body>, Error = Infallible, Response: IntoResponse, Future: Send + 'static>
        + NamedService
        + Clone
        + Send
        + Sync
        + 'static
{
}
