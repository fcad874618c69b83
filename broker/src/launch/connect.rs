//! The connect and health stages: connect to the address the handshake announced (only inside
//! the private directory, or loopback), with TLS pinned to the announced certificate, directly
//! or over go-plugin's multiplexed connection; check gRPC health; then set up the callback
//! broker and the host services.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tether_proto::handshake::Address;
use tether_proto::tls::{self, Identity};
use tether_transport::bind::UnixBinder;
use tether_transport::telemetry::ServedCalls;
use tether_transport::{BrokerSetup, BrokerTls, ConnectError, GrpcBroker, ListenOn, Mux, Target};
use tonic::transport::Channel;

use crate::confine::caps;
use crate::confine::network::NetworkMode;
use crate::launch::address;
use crate::launch::error::{AddressProblem, Failure, Phase, StartErrorKind};
use crate::launch::handshake::{Accepted, EXIT_SETTLE_TIMEOUT};
use crate::launch::health::{self, HealthFailure};
use crate::launch::launched::Launched;
use crate::launch::output::stdio;
use crate::launch::private_dir::PrivateDir;
use crate::launch::settings::Settings;

/// What a successful start learned.
#[derive(Debug)]
pub(crate) struct Connected {
    pub(crate) channel: Channel,
    pub(crate) broker: GrpcBroker,
    /// The multiplexed connection, when the broker mode is multiplexed.
    pub(crate) mux: Option<Mux>,
    pub(crate) app_version: u32,
    pub(crate) address: Address,
    pub(crate) peer_fingerprint: Option<String>,
}

/// Connect, health check, broker.
pub(crate) async fn stage(
    settings: &Settings,
    launched: &Launched,
    identity: Option<&Identity>,
    accepted: Accepted,
) -> Result<Connected, Failure> {
    let Accepted {
        handshake: hs,
        peer_cert,
    } = accepted;
    let private_dir = launched.private_dir();
    let announced = format!("{}:{}", hs.address.network(), hs.address);
    let seen = launched.view.to_host(&hs.address);
    let address_error = |problem| StartErrorKind::Address {
        address: announced.clone(),
        problem,
    };
    let target = match launched.view.remote_target(&hs.address) {
        // A plugin elsewhere (a Pod): its runner's one address, translated.
        Some(remote) => Target::Tcp(remote.map_err(address_error)?),
        None => {
            let target = address::check_address(&seen, private_dir).map_err(address_error)?;
            let target = launched.in_its_network(target);
            // A loopback TCP address from a plugin without network and without a network
            // namespace of its own to serve in: it cannot be serving there.
            if settings.confinement.network == NetworkMode::None && matches!(target, Target::Tcp(_))
            {
                return Err(address_error(AddressProblem::TcpWithoutNetwork).into());
            }
            address::check_socket_file(&target, private_dir).map_err(address_error)?;
            target
        }
    };
    let address = target.to_string();
    let tls_error = |e| StartErrorKind::Tls {
        address: address.clone(),
        source: std::io::Error::other(e),
    };
    let pinned = identity.zip(peer_cert.as_ref());
    let tls_config = match pinned {
        Some((identity, cert)) => Some(Arc::new(
            tls::client_config(identity, cert.clone().into()).map_err(tls_error)?,
        )),
        None => None,
    };
    // Only one port of a plugin elsewhere (a Pod) is reachable: its callbacks must share the
    // one connection, so it must take the multiplexed broker, as Vault requires of its plugins.
    let remote = launched.view.is_remote();
    let multiplexed = (settings.multiplex || remote) && hs.multiplex == Some(true);
    if remote && !multiplexed {
        return Err(StartErrorKind::Runner {
            runner: settings.runner.name(),
            problem: format!(
                "the plugin did not accept go-plugin's multiplexed broker (its handshake said {}; the Pod offered PLUGIN_MULTIPLEX_GRPC=true): only one port of its Pod is reachable, so its callbacks could not connect. Build it with go-plugin >= 1.7 or a tether SDK",
                hs.multiplex.map_or("nothing about it".to_owned(), |m| format!("multiplexing {m}"))
            ),
        }
        .into());
    }
    let (channel, mux) =
        match open_channel(settings, launched, &target, tls_config, multiplexed).await {
            Ok(opened) => opened,
            Err(e) => {
                if let Some(status) = launched.group.exited_within(EXIT_SETTLE_TIMEOUT).await {
                    return Err(Failure::exited(Phase::Connect, status));
                }
                return Err(connect_error(address, e, settings.timeouts.connect).into());
            }
        };

    if let Err(failure) = health::check(channel.clone(), settings.timeouts.health).await {
        if let Some(status) = launched.group.exited_within(EXIT_SETTLE_TIMEOUT).await {
            return Err(Failure::exited(Phase::HealthCheck, status));
        }
        return Err(health_error(failure, settings.timeouts.health).into());
    }
    stdio::drain(
        channel.clone(),
        Arc::clone(&launched.plugin),
        launched.group.pid(),
        settings.output_sink.clone(),
    );

    let broker_tls = match pinned {
        Some((identity, cert)) => {
            Some(BrokerTls::new(identity, cert.clone().into()).map_err(tls_error)?)
        }
        None => None,
    };
    let broker = open_broker(settings, launched, &channel, broker_tls, mux.clone()).await?;
    Ok(Connected {
        channel,
        broker,
        mux,
        app_version: hs.app_version,
        address: match target {
            Target::Unix(path) => Address::Unix(path),
            Target::Tcp(addr) | Target::TcpVia(addr, _) => Address::Tcp(addr),
        },
        peer_fingerprint: peer_cert.as_deref().map(tls::fingerprint),
    })
}

/// The main gRPC channel. Multiplexed: one connection to the plugin's socket carries yamux,
/// and the main channel is a stream of it, as is every brokered connection.
async fn open_channel(
    settings: &Settings,
    launched: &Launched,
    target: &Target,
    tls_config: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
    multiplexed: bool,
) -> Result<(Channel, Option<Mux>), ConnectError> {
    let running = {
        let group = Arc::clone(&launched.group);
        Arc::new(move || group.exit_status().is_none())
    };
    let timeout = settings.timeouts.connect;
    if !multiplexed {
        let channel =
            tether_transport::connect(target.clone(), tls_config, running, timeout).await?;
        return Ok((channel, None));
    }
    let raw = match tokio::time::timeout(timeout, tether_transport::connect_raw(target)).await {
        Err(_) => return Err(ConnectError::Timeout(timeout)),
        Ok(Err(e)) => return Err(ConnectError::Io(Box::new(e))),
        Ok(Ok(raw)) => raw,
    };
    let session = Mux::client(raw);
    let channel =
        tether_transport::connect_streams(session.opener(), tls_config, running, timeout).await?;
    Ok((channel, Some(session)))
}

/// The broker: callbacks served in the private directory, dials only to what the address
/// policy accepts, with the same pinned identities; then the host services, if any.
async fn open_broker(
    settings: &Settings,
    launched: &Launched,
    channel: &Channel,
    tls: Option<BrokerTls>,
    mux: Option<Mux>,
) -> Result<GrpcBroker, Failure> {
    let broker = GrpcBroker::new(
        format!("plugin `{}`", launched.plugin),
        settings.broker.clone().telemetry(ServedCalls {
            plugin: Some(Arc::clone(&launched.plugin)),
            metrics: settings.telemetry.call_metrics.clone(),
            trace_context: settings.telemetry.trace_context,
        }),
    );
    let dir = launched.private_dir().to_owned();
    let listen = match launched.view.translated_dir() {
        Some(seen_as) => ListenOn::UnixSeenAs {
            dir: dir.clone(),
            announced_dir: seen_as.to_owned(),
            binder: socket_binder(launched),
        },
        None => ListenOn::Unix(dir.clone()),
    };
    let view = launched.view.clone();
    let sockets = launched.sockets.clone();
    broker.connect(BrokerSetup {
        tls,
        listen,
        policy: Arc::new(move |address| {
            let address = view.to_host(address);
            let target = address::check_address(&address, &dir).map_err(|e| e.to_string())?;
            address::check_socket_file(&target, &dir).map_err(|e| e.to_string())?;
            Ok(match (target, &sockets) {
                (Target::Tcp(addr), Some(sockets)) => Target::TcpVia(addr, sockets.clone()),
                (target, _) => target,
            })
        }),
        mux,
    });
    broker.open_stream(channel.clone());
    if let Some(routes) = settings.host_services.clone() {
        broker
            .serve_host_services(routes)
            .await
            .map_err(|e| StartErrorKind::Prepare {
                what: "serving the host services",
                source: Box::new(e),
            })?;
    }
    Ok(broker)
}

/// How brokered sockets are made in the private directory: as the plugin's ids when the host
/// makes its files so (a root host's plugin in a world: the world's tmpfs takes no file of
/// uid 0, which its user namespace does not map).
fn socket_binder(launched: &Launched) -> UnixBinder {
    match launched.dir.as_ref().and_then(PrivateDir::file_owner) {
        Some(ids) => UnixBinder::new(move |path| {
            caps::as_file_owner(ids, || tether_transport::bind::connectable_unix(path))
        }),
        None => UnixBinder::default(),
    }
}

fn connect_error(address: String, error: ConnectError, timeout: Duration) -> StartErrorKind {
    match error {
        ConnectError::Tls(source) => StartErrorKind::Tls { address, source },
        ConnectError::Timeout(_) => StartErrorKind::ConnectTimeout { address, timeout },
        ConnectError::Io(source) => StartErrorKind::Connect { address, source },
        ConnectError::Exited => StartErrorKind::Connect {
            address,
            source: "the plugin exited".into(),
        },
        other => StartErrorKind::Connect {
            address,
            source: Box::new(other),
        },
    }
}

fn health_error(failure: HealthFailure, timeout: Duration) -> StartErrorKind {
    match failure {
        HealthFailure::Rpc(status) => StartErrorKind::HealthCheck(Box::new(status)),
        HealthFailure::NotServing(status) => StartErrorKind::Unhealthy { status },
        HealthFailure::Timeout => StartErrorKind::HealthTimeout { timeout },
    }
}

impl Launched {
    /// The launch's private directory (socket, `TMPDIR`, brokered sockets).
    fn private_dir(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new(""), |dir| dir.path())
    }

    /// `target` as the host reaches it: a TCP address of a plugin in a network namespace of
    /// its own is dialled with sockets made there.
    fn in_its_network(&self, target: Target) -> Target {
        match (target, &self.sockets) {
            (Target::Tcp(addr), Some(sockets)) => Target::TcpVia(addr, sockets.clone()),
            (target, _) => target,
        }
    }
}
