//! [`TestHost`]: a plugin's services served in this process, reached by a fake host over the
//! same AutoMTLS, broker and host services a real host uses — without launching a process.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tether_proto::HEALTH_SERVICE;
use tether_proto::handshake::Address;
use tether_proto::tls::{self, Identity};
use tether_sdk::{Granted, GrpcBroker, GrpcBrokerConfig};
use tether_transport::{
    AcceptOptions, BrokerSetup, BrokerTls, DEFAULT_ACCEPT_ERROR_BACKOFF,
    DEFAULT_TLS_HANDSHAKE_TIMEOUT, GrpcService, ListenOn, Listener, Target,
};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tonic::service::RoutesBuilder;
use tonic::transport::Channel;
use tonic_health::ServingStatus;

use crate::error::KitError;

/// How long the fake host may take to connect to the in-process plugin (TLS included); it
/// normally takes a millisecond. Override with [`TestHost::connect_timeout`].
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How the plugin's broker names the fake host in its errors, as under a real host.
const HOST: &str = "the host";

/// How the fake host's broker names the plugin in its errors.
const PLUGIN: &str = "the plugin under test";

/// A fake host for a plugin's services, set up before the services exist (they need its
/// [`plugin_broker`](Self::plugin_broker) and [`granted`](Self::granted)), then
/// [`start`](Self::start)ed.
///
/// What the plugin sees is what it sees under a tether host: its broker dials ids the host
/// serves ([`InProcess::host_broker`]) and the host services
/// ([`host_service`](Self::host_service); with none, `host_services()` fails at once as under a
/// tether host that serves none), with AutoMTLS identities pinned both ways; its [`Granted`]
/// reads the secrets and config files given here from a temporary directory (the process
/// environment is not touched, so tests may run in parallel).
///
/// ```
/// use tether_examples::kv::kv_client::KvClient;
/// use tether_examples::kv::kv_server::{Kv, KvServer};
/// use tether_examples::kv::{Empty, GetRequest, GetResponse, PutRequest};
/// use tether_sdk::ExposeSecret as _;
/// use tonic::{Request, Response, Status};
///
/// /// Answers `Get{key}` with the granted secret `key`.
/// struct Secrets(tether_sdk::Granted);
///
/// #[tonic::async_trait]
/// impl Kv for Secrets {
///     async fn get(&self, r: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
///         let secret = self.0.secret(&r.into_inner().key)
///             .map_err(|e| Status::failed_precondition(e.to_string()))?;
///         Ok(Response::new(GetResponse { value: secret.expose_secret().to_vec() }))
///     }
///     async fn put(&self, _: Request<PutRequest>) -> Result<Response<Empty>, Status> {
///         Err(Status::unimplemented("read-only"))
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let host = tether_sdk_test::TestHost::new()?.secret("token", "s3cret");
/// let service = Secrets(host.granted());
/// let plugin = host.add_service(KvServer::new(service)).start().await?;
/// let got = KvClient::new(plugin.channel()).get(GetRequest { key: "token".into() }).await?;
/// assert_eq!(got.into_inner().value, b"s3cret");
/// plugin.shutdown().await;
/// # Ok(()) }
/// ```
#[must_use = "a test host does nothing until `start` is called"]
pub struct TestHost {
    root: tempfile::TempDir,
    granted: Granted,
    plugin_broker: GrpcBroker,
    broker_config: GrpcBrokerConfig,
    plugin_routes: RoutesBuilder,
    host_routes: Option<RoutesBuilder>,
    files: Vec<(PathBuf, Vec<u8>)>,
    connect_timeout: Duration,
}

impl std::fmt::Debug for TestHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestHost")
            .field("root", &self.root.path())
            .field("host_services", &self.host_routes.is_some())
            .finish_non_exhaustive()
    }
}

impl TestHost {
    /// A fake host with a fresh temporary directory (secrets, config, sockets), no host
    /// services and nothing granted yet.
    ///
    /// # Errors
    /// [`KitError::Io`] when the directory cannot be made.
    pub fn new() -> Result<Self, KitError> {
        let io = |what| move |source| KitError::Io { what, source };
        // Under /tmp: unix socket paths are limited to 107 bytes.
        let root = tempfile::Builder::new()
            .prefix("tether-test-")
            .tempdir_in("/tmp")
            .map_err(io("the temporary directory"))?;
        let secrets = root.path().join("secrets");
        let config = root.path().join("config");
        for dir in [&secrets, &config] {
            std::fs::create_dir(dir).map_err(io("the secrets and config directories"))?;
        }
        let broker_config = GrpcBrokerConfig::new();
        Ok(Self {
            granted: Granted::from_dirs(Some(secrets), Some(config)),
            plugin_broker: GrpcBroker::new(HOST, broker_config.clone()),
            broker_config,
            root,
            plugin_routes: RoutesBuilder::default(),
            host_routes: None,
            files: Vec::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        })
    }

    /// The plugin side's broker, as `tether_sdk::Plugin::broker` gives it: hand it to the
    /// service under test. It works once [`start`](Self::start)ed.
    #[must_use]
    pub fn plugin_broker(&self) -> GrpcBroker {
        self.plugin_broker.clone()
    }

    /// The plugin side's granted secrets and config files, as `tether_sdk::Plugin::granted`
    /// gives them: hand it to the service under test.
    #[must_use]
    pub fn granted(&self) -> Granted {
        self.granted.clone()
    }

    /// Grants the secret `name` with `value` (written when the host starts).
    pub fn secret(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        let dir = self.granted.secrets_dir().map(Path::to_owned);
        self.files
            .push((dir.unwrap_or_default().join(name), value.as_ref().to_vec()));
        self
    }

    /// Grants the config file `name` with `value` (written when the host starts).
    pub fn config(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        let dir = self.granted.config_dir().map(Path::to_owned);
        self.files
            .push((dir.unwrap_or_default().join(name), value.as_ref().to_vec()));
        self
    }

    /// Serves `service` as a host service: the plugin reaches it with
    /// `broker.host_services()`, as under `tether_broker::PluginClientBuilder::host_service`.
    pub fn host_service<S: GrpcService>(mut self, service: S) -> Self {
        self.host_routes
            .get_or_insert_with(RoutesBuilder::default)
            .add_service(service);
        self
    }

    /// Serves the plugin's `service` (a generated `…Server::new(…)`).
    pub fn add_service<S: GrpcService>(mut self, service: S) -> Self {
        self.plugin_routes.add_service(service);
        self
    }

    /// See [`DEFAULT_CONNECT_TIMEOUT`].
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The fake host's broker timeouts (the plugin's broker keeps its own, set by
    /// [`plugin_broker`](Self::plugin_broker)'s defaults).
    pub fn grpc_broker(mut self, config: GrpcBrokerConfig) -> Self {
        self.broker_config = config;
        self
    }

    /// Writes the granted files, serves the plugin's services with AutoMTLS on a unix socket
    /// of the temporary directory, connects the fake host to them and opens the broker stream.
    ///
    /// # Errors
    /// [`KitError`] when a file, socket, identity or connection cannot be made.
    pub async fn start(self) -> Result<InProcess, KitError> {
        let Self {
            root,
            granted: _,
            plugin_broker,
            broker_config,
            mut plugin_routes,
            host_routes,
            files,
            connect_timeout,
        } = self;
        for (path, value) in files {
            std::fs::write(&path, value).map_err(|source| KitError::Io {
                what: "a granted secret or config file",
                source,
            })?;
        }
        let host_id = Identity::generate()?;
        let plugin_id = Identity::generate()?;
        let policy: tether_transport::AddressPolicy = Arc::new(|address: &Address| match address {
            Address::Unix(path) if path.is_absolute() => Ok(Target::Unix(path.clone())),
            other => Err(format!("the test kit dials only unix sockets, not {other}")),
        });

        // The plugin side, as `tether_sdk` serves it.
        plugin_broker.connect(BrokerSetup {
            tls: Some(BrokerTls::new(&plugin_id, host_id.cert_der().clone())?),
            listen: ListenOn::Unix(root.path().to_owned()),
            policy: Arc::clone(&policy),
            mux: None,
        });
        if host_routes.is_none() {
            plugin_broker.set_no_host_services();
        }
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_service_status(HEALTH_SERVICE, ServingStatus::Serving)
            .await;
        plugin_routes
            .add_service(health_service)
            .add_service(plugin_broker.service());
        let socket = root.path().join("plugin.sock");
        let listener = tokio::net::UnixListener::bind(&socket).map_err(|source| KitError::Io {
            what: "the plugin's socket",
            source,
        })?;
        let acceptor = TlsAcceptor::from(Arc::new(tls::server_config(
            &plugin_id,
            host_id.cert_der().clone(),
        )?));
        let incoming = tether_transport::accept(
            Listener::Unix(listener),
            AcceptOptions {
                tls: Some(acceptor),
                tls_handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
                error_backoff: DEFAULT_ACCEPT_ERROR_BACKOFF,
            },
        );
        let (stop, stopping) = oneshot::channel::<()>();
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_routes(plugin_routes.routes())
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopping.await;
                }),
        );

        // The host side, as `tether_broker` connects.
        let client_tls = tls::client_config(&host_id, plugin_id.cert_der().clone())?;
        let channel = tether_transport::connect(
            Target::Unix(socket),
            Some(Arc::new(client_tls)),
            Arc::new(|| true),
            connect_timeout,
        )
        .await?;
        let host_broker = GrpcBroker::new(PLUGIN, broker_config);
        host_broker.connect(BrokerSetup {
            tls: Some(BrokerTls::new(&host_id, plugin_id.cert_der().clone())?),
            listen: ListenOn::Unix(root.path().to_owned()),
            policy,
            mux: None,
        });
        host_broker.open_stream(channel.clone());
        let plugin = InProcess {
            channel,
            host_broker,
            plugin_broker,
            stop: Some(stop),
            server: Some(server),
            root,
        };
        if let Some(routes) = host_routes {
            plugin
                .host_broker
                .serve_host_services(routes.routes())
                .await?;
        }
        Ok(plugin)
    }
}

/// A plugin's services running in this process, connected to a fake host; made by
/// [`TestHost::start`]. Dropping it stops everything and removes the temporary directory;
/// [`shutdown`](Self::shutdown) also waits for the server to finish.
#[derive(Debug)]
pub struct InProcess {
    channel: Channel,
    host_broker: GrpcBroker,
    plugin_broker: GrpcBroker,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<Result<(), tonic::transport::Error>>>,
    root: tempfile::TempDir,
}

impl InProcess {
    /// The fake host's channel to the plugin's services: give it to a generated client.
    #[must_use]
    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }

    /// The fake host's broker: serve a callback with
    /// `host_broker().accept_and_serve(id, service)` and send `id` in a request (go-plugin's
    /// `add_server`), or dial what the plugin serves.
    #[must_use]
    pub fn host_broker(&self) -> GrpcBroker {
        self.host_broker.clone()
    }

    /// The temporary directory holding the sockets and the granted files.
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.root.path()
    }

    /// Stops the brokers (served ids and their sockets end) and the server, and waits for it.
    pub async fn shutdown(mut self) {
        self.close();
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }

    fn close(&mut self) {
        self.host_broker.close();
        self.plugin_broker.close();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.close();
    }
}
