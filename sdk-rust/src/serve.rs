//! The serve sequence of a [`Ready`] plugin: watch, TLS, listen, handshake, serve, stop.

use std::io::Write as _;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use tether_proto::env::PortRange;
use tether_proto::handshake::{Address, CORE_PROTOCOL_VERSION, Handshake, Protocol};
use tether_proto::plugin::grpc_controller_server::{GrpcController, GrpcControllerServer};
use tether_proto::{HEALTH_SERVICE, plugin, tls};
use tether_transport::telemetry::{ServedCalls, trace_routes};
use tether_transport::{AcceptOptions, BrokerSetup, BrokerTls, GrpcBroker, ListenOn, Mux, Target};
use tokio::sync::{Notify, oneshot, watch};
use tokio_rustls::TlsAcceptor;
use tonic::service::RoutesBuilder;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::env::Launch;
use crate::error::{Error, StopReason};
use crate::host::{HostWatch, Parent, Signals};
use crate::listen;
use crate::options::ServeOptions;
use crate::stdio::{self, Capture, StdioHub};

/// A plugin whose environment has been checked, ready to listen and serve.
pub(crate) struct Ready {
    pub(crate) options: ServeOptions,
    pub(crate) launch: Launch,
    /// The author's services for the negotiated version, and reflection.
    pub(crate) routes: RoutesBuilder,
    pub(crate) parent: Parent,
    pub(crate) broker: GrpcBroker,
}

impl Ready {
    /// Serves until told to stop; records in `stop_began` when stopping began.
    pub(crate) async fn serve(self, stop_began: &OnceLock<Instant>) -> Result<StopReason, Error> {
        let Self {
            options,
            launch,
            mut routes,
            parent,
            broker,
        } = self;

        // Stop conditions first, so that nothing after the handshake can be missed.
        let host = if options.exit_with_host {
            HostWatch::new(parent)?
        } else {
            HostWatch::Unwatched
        };
        if matches!(host, HostWatch::Gone) {
            tracing::debug!("the host exited before the plugin started serving");
            return Ok(StopReason::HostExited);
        }
        let mut signals = Signals::new(options.ignore_sigint)?;

        let start_span = crate::telemetry::start_span();
        crate::telemetry::serving_on(tokio::runtime::Handle::current());
        let tls = Tls::new(&launch)?;
        if let Some(group) = &launch.env.unix_socket_group {
            tracing::warn!(
                ?group,
                "PLUGIN_UNIX_SOCKET_GROUP is not supported yet; the socket keeps the default group"
            );
        }

        if launch.env.host_services == Some(false) {
            broker.set_no_host_services();
        }
        let bound = listen::bind(options.transport, &launch)?;
        // go-plugin's multiplexed broker when the host asks for it: the host's one connection
        // carries yamux; the main server gets the streams opened without a knock.
        let mux = (launch.env.multiplex == Some(true)).then(Mux::new);
        broker.connect(BrokerSetup {
            tls: tls.broker,
            listen: broker_listen_on(&bound.address, launch.env.ports),
            policy: Arc::new(host_address_policy),
            mux: mux.clone(),
        });

        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_service_status(HEALTH_SERVICE, ServingStatus::Serving)
            .await;
        let stop = Arc::new(Notify::new());
        let (drained, stdio_drained) = watch::channel(false);
        let stdio_hub = StdioHub::default();
        routes
            .add_service(health_service)
            .add_service(GrpcControllerServer::new(Controller {
                stop: Arc::clone(&stop),
                stdio_drained,
            }))
            .add_service(broker.service())
            .add_service(stdio_hub.service());
        let accept_options = AcceptOptions {
            tls: tls.acceptor,
            tls_handshake_timeout: options.tls_handshake_timeout,
            error_backoff: options.accept_error_backoff,
        };
        let incoming = match &mux {
            Some(mux) => mux.serve_first_connection(bound.listener, accept_options),
            None => tether_transport::accept(bound.listener, accept_options),
        };

        let handshake = Handshake {
            core_version: CORE_PROTOCOL_VERSION,
            app_version: launch.app_version,
            address: bound.address,
            protocol: Protocol::Grpc,
            server_cert: tls.server_cert,
            // Field 7 only when the host set PLUGIN_MULTIPLEX_GRPC: older hosts split the line
            // into at most six fields, and a seventh would corrupt the certificate.
            multiplex: launch.env.multiplex,
        };
        print_handshake(&handshake)?;
        drop(start_span);
        let capture = options
            .capture_stdio
            .then(|| capture_stdio(&stdio_hub))
            .flatten();
        tracing::debug!(
            network = handshake.address.network(),
            address = %handshake.address,
            tls = handshake.server_cert.is_some(),
            "serving"
        );

        let (stop_server, server_stopping) = oneshot::channel::<()>();
        let server = tonic::transport::Server::builder()
            // Each call continues the host's trace (its `traceparent`), the handler inside it.
            .add_routes(trace_routes(routes.routes(), ServedCalls::default()))
            .serve_with_incoming_shutdown(incoming, async {
                // An error means the sender was dropped, which also means stop.
                let _ = server_stopping.await;
            });
        let mut server = std::pin::pin!(server);

        let reason = tokio::select! {
            result = &mut server => {
                return Err(result.map_or_else(Error::Serve, |()| Error::ServerStopped));
            }
            () = stop.notified() => StopReason::ShutdownRequested,
            reason = signals.recv() => reason,
            () = host.exited() => StopReason::HostExited,
        };
        let _ = stop_began.set(Instant::now());
        tracing::debug!(?reason, "stopping");
        Stopping {
            options: &options,
            health,
            broker,
            capture,
            stdio_hub,
            drained,
            stop_server,
            mux,
        }
        .stop(server)
        .await;
        // Removes the socket (and the private directory holding it).
        drop(bound.cleanup);
        Ok(reason)
    }
}

/// AutoMTLS for one launch: all `None` when the host sent no certificate (plaintext).
struct Tls {
    /// Accepts only the host's certificate on the main connection.
    acceptor: Option<TlsAcceptor>,
    /// The plugin's certificate, DER, for the handshake line.
    server_cert: Option<Vec<u8>>,
    /// The same identities for brokered connections.
    broker: Option<BrokerTls>,
}

impl Tls {
    /// Makes the plugin's throw-away identity and pins the host's certificate, if it sent one.
    fn new(launch: &Launch) -> Result<Self, Error> {
        let Some(host_cert) = &launch.env.client_cert else {
            return Ok(Self {
                acceptor: None,
                server_cert: None,
                broker: None,
            });
        };
        let identity = tls::Identity::generate().map_err(Error::Identity)?;
        let server_config =
            tls::server_config(&identity, host_cert.clone()).map_err(Error::TlsConfig)?;
        let broker = BrokerTls::new(&identity, host_cert.clone()).map_err(Error::TlsConfig)?;
        Ok(Self {
            acceptor: Some(TlsAcceptor::from(Arc::new(server_config))),
            server_cert: Some(identity.cert_der().to_vec()),
            broker: Some(broker),
        })
    }
}

/// Brokered sockets go next to the main one (the host's directory or the plugin's private
/// one); TCP plugins broker over TCP too, in the same port range.
fn broker_listen_on(main: &Address, ports: PortRange) -> ListenOn {
    match main {
        Address::Unix(path) => ListenOn::Unix(
            path.parent()
                .map(ToOwned::to_owned)
                .unwrap_or_else(std::env::temp_dir),
        ),
        Address::Tcp(_) => ListenOn::Tcp {
            min: ports.min,
            max: ports.max,
        },
    }
}

/// Captures fd 1 for `plugin.GRPCStdio` and sends log lines to the original stderr; on failure
/// output keeps going to the pipes.
fn capture_stdio(hub: &StdioHub) -> Option<Capture> {
    match stdio::capture(hub) {
        Ok((original_stderr, captured)) => {
            crate::log::redirect(original_stderr);
            Some(captured)
        }
        Err(error) => {
            tracing::warn!(
                %error,
                "cannot capture stdout/stderr for plugin.GRPCStdio; output goes to the pipes"
            );
            None
        }
    }
}

/// What a graceful stop winds down, in order.
struct Stopping<'a> {
    options: &'a ServeOptions,
    health: HealthReporter,
    broker: GrpcBroker,
    capture: Option<Capture>,
    stdio_hub: StdioHub,
    /// Set once the captured output has gone to the host's stream (or the wait ran out).
    drained: watch::Sender<bool>,
    stop_server: oneshot::Sender<()>,
    mux: Option<Mux>,
}

impl Stopping<'_> {
    /// Reports not serving, ends long-lived streams, drains stdio, then lets `server` finish
    /// its in-flight calls for at most the shutdown grace period.
    async fn stop(self, server: impl Future<Output = Result<(), tonic::transport::Error>>) {
        self.health
            .set_service_status(HEALTH_SERVICE, ServingStatus::NotServing)
            .await;
        // The last spans go while the host-services connection is still there.
        crate::telemetry::flush().await;
        // Long-lived streams end first, so the graceful stop need not wait for them.
        self.broker.close();
        // The plugin's last output reaches the host before its stream ends.
        if let Some(capture) = self.capture {
            let timeout = self.options.stdio_drain_timeout;
            let _ = tokio::task::spawn_blocking(move || capture.finish(timeout)).await;
        }
        self.stdio_hub.close(self.options.stdio_drain_timeout).await;
        // Now `GRPCController.Shutdown` may answer: a go-plugin host closes its connection
        // as soon as it has the answer, so output sent after it would be lost.
        self.drained.send_replace(true);
        let _ = self.stop_server.send(());
        let grace = self.options.shutdown_grace;
        match tokio::time::timeout(grace, server).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "the gRPC server failed while stopping"),
            Err(_) => tracing::warn!(
                ?grace,
                "connections still open after the shutdown grace period; stopping anyway"
            ),
        }
        if let Some(mux) = &self.mux {
            mux.close();
        }
    }
}

/// Which addresses the host may announce for brokered connections: absolute unix socket paths
/// (go-plugin hosts put them in their temporary directory) and loopback TCP addresses.
fn host_address_policy(address: &Address) -> Result<Target, String> {
    match address {
        Address::Unix(path) if path.is_absolute() => Ok(Target::Unix(path.clone())),
        Address::Unix(_) => Err("a unix socket path must be absolute".to_owned()),
        Address::Tcp(addr) if addr.ip().is_loopback() => Ok(Target::Tcp(*addr)),
        Address::Tcp(_) => Err("a TCP address must be a loopback address".to_owned()),
    }
}

/// Writes the handshake line as the first output on stdout.
fn print_handshake(handshake: &Handshake) -> Result<(), Error> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{handshake}")
        .and_then(|()| stdout.flush())
        .map_err(Error::Handshake)
}

/// `plugin.GRPCController`: the host asks the plugin to stop.
pub(crate) struct Controller {
    pub(crate) stop: Arc<Notify>,
    /// Becomes `true` when the stop has handed the last captured output to the host's
    /// `GRPCStdio` stream (bounded by the stdio drain timeout).
    pub(crate) stdio_drained: watch::Receiver<bool>,
}

#[tonic::async_trait]
impl GrpcController for Controller {
    async fn shutdown(
        &self,
        _request: tonic::Request<plugin::Empty>,
    ) -> Result<tonic::Response<plugin::Empty>, tonic::Status> {
        // The server stops gracefully, so this response is still delivered — after the
        // plugin's last output, which the host would otherwise lose when it closes the
        // connection on this answer. The wait ends when the stop has drained stdio (bounded
        // by the drain timeout) or gave up on it (the sender is dropped).
        self.stop.notify_one();
        let mut drained = self.stdio_drained.clone();
        let _ = drained.wait_for(|drained| *drained).await;
        Ok(tonic::Response::new(plugin::Empty {}))
    }
}
