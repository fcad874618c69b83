//! The [`Plugin`] builder and how it runs: check the author's choices, read the environment,
//! pick the services for the negotiated version, then hand over to [`Ready::serve`].

use std::collections::HashSet;
use std::fmt;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Instant;

use tether_proto::plugin::grpc_controller_server;
use tether_transport::{GrpcBroker, GrpcService};
use tonic::service::RoutesBuilder;

use crate::env::Launch;
use crate::error::{Error, StopReason};
use crate::granted::Granted;
use crate::host::Parent;
use crate::options::{RuntimeFlavor, ServeOptions};
use crate::serve::Ready;

/// A plugin being assembled: its [`ServeOptions`] plus the gRPC services to serve.
///
/// Made by [`Plugin::new`], given services with [`add_service`](Self::add_service), then run
/// by [`run`](Self::run) (blocking, returns an [`ExitCode`]), [`try_run`](Self::try_run)
/// (blocking, returns a typed result) or [`run_async`](Self::run_async) (on the caller's
/// tokio runtime).
#[must_use = "a plugin does nothing until it is run"]
pub struct Plugin {
    broker: GrpcBroker,
    options: ServeOptions,
    services: Vec<AuthorService>,
    descriptor_sets: Vec<&'static [u8]>,
    parent: Parent,
}

/// A service added by the author, type-erased until the routes are built.
struct AuthorService {
    name: &'static str,
    /// `None`: served for every app version.
    version: Option<u32>,
    add: Box<dyn FnOnce(&mut RoutesBuilder) + Send>,
}

impl fmt::Debug for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let services: Vec<_> = self.services.iter().map(|s| (s.name, s.version)).collect();
        f.debug_struct("Plugin")
            .field("options", &self.options)
            .field("services", &services)
            .finish_non_exhaustive()
    }
}

/// The gRPC services the SDK serves itself; an author's service may not reuse these names.
const BUILT_IN_SERVICES: &[&str] = &[
    tonic_health::pb::health_server::SERVICE_NAME,
    grpc_controller_server::SERVICE_NAME,
    tonic_reflection::pb::v1::server_reflection_server::SERVICE_NAME,
    tonic_reflection::pb::v1alpha::server_reflection_server::SERVICE_NAME,
    tether_proto::plugin::grpc_broker_server::SERVICE_NAME,
    tether_proto::plugin::grpc_stdio_server::SERVICE_NAME,
];

/// Descriptor sets reflection always serves: the health service and go-plugin's own.
const BUILT_IN_DESCRIPTOR_SETS: &[&[u8]] = &[
    tonic_health::pb::FILE_DESCRIPTOR_SET,
    tether_proto::plugin::FILE_DESCRIPTOR_SET,
];

/// How the plugin's broker names its peer in errors and logs.
const HOST: &str = "the host";

impl Plugin {
    /// Starts assembling a plugin that serves as `options` say: add its gRPC services, then
    /// [`run`](Self::run) it.
    ///
    /// Call it first thing in `main`: it records the parent process id, which is how the plugin
    /// later notices that its host has exited.
    ///
    /// ```no_run
    /// # use tonic_health::pb::health_server::{Health, HealthServer};
    /// # fn kv_server() -> HealthServer<impl Health> { tonic_health::server::health_reporter().1 }
    /// use tether_sdk::{Plugin, ServeOptions};
    ///
    /// fn main() -> std::process::ExitCode {
    ///     Plugin::new(ServeOptions::new("BASIC_PLUGIN", "hello"))
    ///         .add_service(kv_server())
    ///         .run()
    /// }
    /// ```
    pub fn new(options: ServeOptions) -> Self {
        Self {
            broker: GrpcBroker::new(HOST, options.broker.clone()),
            options,
            services: Vec::new(),
            descriptor_sets: Vec::new(),
            parent: Parent::record(),
        }
    }

    /// The plugin's [`GrpcBroker`]: hand a clone to the services that call back into the host
    /// (`broker.dial(id)` with an id the host sent) or serve something to it
    /// (`broker.accept_and_serve(broker.next_id(), service)`). It works once the plugin
    /// serves, i.e. inside call handlers.
    ///
    /// ```no_run
    /// let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello");
    /// let plugin = tether_sdk::Plugin::new(options);
    /// let broker = plugin.broker();
    /// // plugin.add_service(CounterServer::new(Counter { broker })).run();
    /// # drop((plugin, broker));
    /// ```
    #[must_use]
    pub fn broker(&self) -> GrpcBroker {
        self.broker.clone()
    }

    /// The secrets and config files the host granted ([`Granted::from_env`]): hand a clone to
    /// the services that read them, so that tests can give them a directory of their own
    /// ([`Granted::from_dirs`], `tether-sdk-test`).
    #[must_use]
    pub fn granted(&self) -> Granted {
        Granted::from_env()
    }

    /// Serves `service` whichever app protocol version is negotiated.
    ///
    /// `service` is a tonic server such as the generated `KvServer::new(my_impl)` (the same
    /// bounds as [`tonic::service::Routes::add_service`]).
    pub fn add_service<S: GrpcService>(self, service: S) -> Self {
        self.push(None, service)
    }

    /// Serves `service` only when `app_version` is the negotiated app protocol version — how a
    /// plugin that supports several versions ([`ServeOptions::app_versions`]) serves each host the
    /// API it expects. The version must be one the [`ServeOptions`] list.
    ///
    /// ```no_run
    /// # use tonic_health::pb::health_server::{Health, HealthServer};
    /// # fn v1() -> HealthServer<impl Health> { tonic_health::server::health_reporter().1 }
    /// # fn v2() -> HealthServer<impl Health> { tonic_health::server::health_reporter().1 }
    /// // `v1()` and `v2()` make the servers of two versions of the app's service.
    /// let options = tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").app_versions([1, 2]);
    /// let plugin = tether_sdk::Plugin::new(options)
    ///     .add_service_for(1, v1())
    ///     .add_service_for(2, v2());
    /// # let _ = plugin;
    /// ```
    pub fn add_service_for<S: GrpcService>(self, app_version: u32, service: S) -> Self {
        self.push(Some(app_version), service)
    }

    /// Describes the author's services for gRPC server reflection, so that tools such as
    /// `tether call` and `grpcurl` can call them without `.proto` files: `descriptor_set` is an
    /// encoded `FileDescriptorSet`, e.g. the `.bin` tether-codegen writes next to the generated
    /// code, or tonic-prost-build's `file_descriptor_set_path` output. Reflection always
    /// describes the SDK's own services.
    ///
    /// ```no_run
    /// # const KV_DESCRIPTORS: &[u8] = &[];
    /// tether_sdk::Plugin::new(tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello"))
    ///     .file_descriptor_set(KV_DESCRIPTORS)
    ///     .run();
    /// ```
    pub fn file_descriptor_set(mut self, descriptor_set: &'static [u8]) -> Self {
        self.descriptor_sets.push(descriptor_set);
        self
    }

    fn push<S: GrpcService>(mut self, version: Option<u32>, service: S) -> Self {
        self.services.push(AuthorService {
            name: S::NAME,
            version,
            add: Box::new(move |routes: &mut RoutesBuilder| {
                routes.add_service(service);
            }),
        });
        self
    }

    /// Runs the plugin until it is told to stop, on a runtime of its own, and returns the
    /// process exit status: success after any [`StopReason`], failure after an [`Error`],
    /// which is printed to stderr first (for a missing or wrong cookie, go-plugin's message
    /// for humans and nothing else).
    pub fn run(self) -> ExitCode {
        match self.try_run() {
            Ok(_) => ExitCode::SUCCESS,
            Err(error) if error.is_not_launched_by_host() => {
                eprintln!("{error}");
                ExitCode::FAILURE
            }
            Err(error) => {
                // Not through `tracing`: the logger may be off, filtered or not installed yet,
                // and the host must see why the plugin died. `[ERROR]` is the level for hosts.
                eprintln!("[ERROR] plugin failed: {error}");
                ExitCode::FAILURE
            }
        }
    }

    /// Like [`run`](Self::run), but returns why the plugin stopped or the [`Error`] instead of
    /// printing it.
    ///
    /// # Errors
    /// Any [`Error`]; before the handshake line is printed, the host sees the plugin exit
    /// without one.
    pub fn try_run(self) -> Result<StopReason, Error> {
        let ready = self.prepare()?;
        let mut builder = match ready.options.runtime {
            RuntimeFlavor::CurrentThread => tokio::runtime::Builder::new_current_thread(),
            RuntimeFlavor::MultiThread => tokio::runtime::Builder::new_multi_thread(),
        };
        let runtime = builder.enable_all().build().map_err(Error::Runtime)?;
        let grace = ready.options.shutdown_grace;
        let stop_began = OnceLock::new();
        let result = runtime.block_on(ready.serve(&stop_began));
        // Tasks still running (connections, blocking file IO) get what is left of the grace
        // period, so that the whole stop takes at most `grace`; then they are dropped.
        let remaining = stop_began.get().map_or(grace, |began: &Instant| {
            grace.saturating_sub(began.elapsed())
        });
        runtime.shutdown_timeout(remaining);
        result
    }

    /// Runs the plugin on the caller's tokio runtime until it is told to stop.
    ///
    /// The runtime must have IO, time and signals enabled (`enable_all`). Connection tasks
    /// that outlive the shutdown grace period stay on that runtime until it shuts down.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn run_async(self) -> Result<StopReason, Error> {
        self.prepare()?.serve(&OnceLock::new()).await
    }

    /// Everything before IO: configuration checks, the cookie, the environment, the services
    /// for the negotiated version.
    fn prepare(self) -> Result<Ready, Error> {
        self.check_configuration()?;
        let launch = Launch::read(&self.options, |name| std::env::var_os(name))?;
        if self.options.log_to_stderr {
            crate::log::install_stderr_logger(&self.broker, launch.env.host_services == Some(true));
        }
        tracing::debug!(
            app_version = launch.app_version,
            "negotiated app protocol version"
        );
        let mut routes = RoutesBuilder::default();
        add_reflection(&mut routes, &self.descriptor_sets)?;
        for service in self.services {
            if service.version.is_none_or(|v| v == launch.app_version) {
                (service.add)(&mut routes);
            }
        }
        Ok(Ready {
            options: self.options,
            launch,
            routes,
            parent: self.parent,
            broker: self.broker,
        })
    }

    /// Checks what is the author's responsibility, whatever the environment.
    fn check_configuration(&self) -> Result<(), Error> {
        let options = &self.options;
        if options.cookie_key.is_empty() || options.cookie_value.is_empty() {
            return Err(Error::EmptyCookie);
        }
        if options.app_versions.is_empty() {
            return Err(Error::NoAppVersions);
        }
        for service in &self.services {
            if let Some(version) = service.version
                && !options.app_versions.contains(&version)
            {
                return Err(Error::ServiceForUnsupportedVersion {
                    service: service.name,
                    version,
                });
            }
        }
        for &version in &options.app_versions {
            let mut names: HashSet<&str> = BUILT_IN_SERVICES.iter().copied().collect();
            for service in &self.services {
                if service.version.is_none_or(|v| v == version) && !names.insert(service.name) {
                    return Err(Error::DuplicateService {
                        service: service.name,
                    });
                }
            }
        }
        Ok(())
    }
}

/// Adds gRPC server reflection (v1, and v1alpha for older clients) describing the built-in
/// services and `author_sets`.
fn add_reflection(routes: &mut RoutesBuilder, author_sets: &[&'static [u8]]) -> Result<(), Error> {
    let configure = || {
        BUILT_IN_DESCRIPTOR_SETS
            .iter()
            .chain(author_sets)
            .fold(tonic_reflection::server::Builder::configure(), |b, set| {
                b.register_encoded_file_descriptor_set(set)
            })
    };
    let v1 = configure().build_v1().map_err(Error::InvalidDescriptors)?;
    let v1alpha = configure()
        .build_v1alpha()
        .map_err(Error::InvalidDescriptors)?;
    routes.add_service(v1).add_service(v1alpha);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tether_proto::plugin::grpc_controller_server::GrpcControllerServer;
    use tokio::sync::Notify;

    use super::*;
    use std::convert::Infallible;

    use crate::serve::Controller;
    use tonic::body::Body;
    use tonic::codegen::Service;
    use tonic::codegen::http::Request;
    use tonic::server::NamedService;

    fn health()
    -> tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health>
    {
        tonic_health::server::health_reporter().1
    }

    fn controller() -> GrpcControllerServer<Controller> {
        GrpcControllerServer::new(Controller {
            stop: Arc::new(Notify::new()),
            stdio_drained: tokio::sync::watch::channel(true).1,
        })
    }

    #[test]
    fn the_async_variant_can_be_spawned_on_a_multi_thread_runtime() {
        fn assert_send<T: Send>(_: &T) {}
        let future = Plugin::new(ServeOptions::new("K", "v")).run_async();
        assert_send(&future);
    }

    #[test]
    fn reflection_describes_built_in_services_and_rejects_garbage_descriptor_sets() {
        let mut routes = RoutesBuilder::default();
        add_reflection(&mut routes, &[]).unwrap();
        let err = add_reflection(&mut routes, &[b"\xff\xffnot a descriptor set"]).unwrap_err();
        assert!(matches!(err, Error::InvalidDescriptors(_)), "{err:?}");
    }

    #[test]
    fn an_empty_cookie_is_a_configuration_error() {
        let err = Plugin::new(ServeOptions::new("", "x"))
            .check_configuration()
            .unwrap_err();
        assert!(matches!(err, Error::EmptyCookie));
    }

    #[test]
    fn a_plugin_without_app_versions_is_a_configuration_error() {
        let options = ServeOptions::new("K", "v").app_versions([]);
        let err = Plugin::new(options).check_configuration().unwrap_err();
        assert!(matches!(err, Error::NoAppVersions));
    }

    #[test]
    fn a_service_for_an_unlisted_version_is_a_configuration_error() {
        let plugin = Plugin::new(ServeOptions::new("K", "v").app_versions([1, 2]))
            .add_service_for(3, controller());
        let err = plugin.check_configuration().unwrap_err();
        assert!(matches!(
            err,
            Error::ServiceForUnsupportedVersion {
                service: "plugin.GRPCController",
                version: 3
            }
        ));
    }

    #[test]
    fn a_service_named_like_a_built_in_one_is_rejected() {
        let err = Plugin::new(ServeOptions::new("K", "v"))
            .add_service(health())
            .check_configuration()
            .unwrap_err();
        assert!(matches!(
            err,
            Error::DuplicateService {
                service: "grpc.health.v1.Health"
            }
        ));
    }

    #[test]
    fn the_same_service_may_be_added_once_per_version_but_not_twice_for_one() {
        let options = ServeOptions::new("K", "v").app_versions([1, 2]);
        let per_version = Plugin::new(options.clone())
            .add_service_for(1, stdio_service())
            .add_service_for(2, stdio_service());
        assert!(per_version.check_configuration().is_ok());

        let twice = Plugin::new(options)
            .add_service(stdio_service())
            .add_service_for(2, stdio_service());
        assert!(matches!(
            twice.check_configuration(),
            Err(Error::DuplicateService { .. })
        ));
    }

    /// A service whose name is not built in.
    #[derive(Clone)]
    struct Dummy;

    impl NamedService for Dummy {
        const NAME: &'static str = "test.Dummy";
    }

    impl Service<Request<Body>> for Dummy {
        type Response = tonic::codegen::http::Response<Body>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Self::Response, Infallible>>;

        fn poll_ready(
            &mut self,
            _cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Infallible>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn call(&mut self, _request: Request<Body>) -> Self::Future {
            std::future::ready(Ok(tonic::codegen::http::Response::new(Body::empty())))
        }
    }

    fn stdio_service() -> Dummy {
        Dummy
    }
}
