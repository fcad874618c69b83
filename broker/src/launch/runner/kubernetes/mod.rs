//! The Pod runner: each plugin instance is a Pod of its own on a Kubernetes cluster.
//!
//! A launch makes a Secret and a ConfigMap holding exactly the plugin's granted values and a
//! Pod ([`objects`]) whose one container runs the plugin behind `tether-pod-shim`
//! (`sdk-rust/pod-shim`), waits until the container runs ([`life`]; the Pod start timeout
//! covers scheduling and the image pull, and a Pod that will not run fails at once with the
//! kubelet's or the scheduler's words), then hands the stages after it what they expect of any
//! runner: the container's log stream as stdout ([`logs`]), a [`Remote`] leader whose signals
//! are deletions ([`remote`]), and a view that translates the one address the shim announces to
//! where the host reaches it — the Pod's IP in cluster, a port-forward through the API server
//! otherwise ([`forward`]). The plugin must accept go-plugin's multiplexed broker: only that
//! one port is reachable.
//!
//! Nothing is left: the runner deletes the Pod and its companions when the plugin ends (exit,
//! idle stop, shutdown, a failed start) and reports the end only once they are gone; every
//! object carries the host's owner reference (garbage collection when the owner goes) and its
//! identity label (the start-up [`sweep`](sweep::sweep)).

mod cluster;
mod forward;
mod life;
mod logs;
mod objects;
pub(crate) mod options;
mod remote;
mod status;
mod sweep;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::unix::pipe;
use tokio::sync::watch;

use crate::confine::pids::ProcessLimit;
use crate::confine::process::{ExitHook, Leader, ProcessGroup};
use crate::launch::error::{Failure, StartErrorKind};
use crate::launch::launched::{InForce, Launched, Resources, Spawned};
use crate::launch::plan::LaunchPlan;
use crate::launch::runner::view::PluginView;
use crate::launch::settings::{HandshakeConfig, Settings};

pub(crate) use cluster::client;
pub(crate) use options::KubernetesOptions;
pub use sweep::sweep;

/// The runner's name in errors and `tether check`.
pub(crate) const RUNNER: &str = "kubernetes";

fn runner_error(problem: String) -> Failure {
    StartErrorKind::Runner {
        runner: RUNNER,
        problem,
    }
    .into()
}

/// Starts `name` in a Pod: the objects, the wait for its container, the log stream and the
/// connection's translation.
pub(crate) async fn start(
    options: &KubernetesOptions,
    handshake: &HandshakeConfig,
    plan: &LaunchPlan,
    resources: Resources,
    settings: &Settings,
    name: &Arc<str>,
) -> Result<Spawned, Failure> {
    // The binary is in the image (pinned by digest); the values go into the Pod's Secret.
    // The janitor registration (the private directory, made before this runner) goes with the
    // launched plugin: dropping it here would have the janitor remove the directory at once.
    let Resources {
        dir,
        identity,
        janitor,
        ..
    } = resources;
    let (client, namespace) = cluster::connect(options).await.map_err(runner_error)?;
    if let Some(identity) = options.identity() {
        sweep::once(&client, &namespace, identity)
            .await
            .map_err(|e| {
                runner_error(format!(
                    "sweeping what a previous incarnation of this host left: {e}"
                ))
            })?;
    }
    let pod_ip = objects::uses_pod_ip(options.connection, cluster::in_cluster());
    let pod_name = objects::pod_name(name, &random_suffix());
    let delivery = settings.delivery.as_deref();
    let program = settings.program.to_string_lossy();
    let planned = objects::plan(&objects::Inputs {
        options,
        name: &pod_name,
        namespace: &namespace,
        plugin: name,
        program: &program,
        args: settings
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        env: &plan.env.vars,
        cookie: &handshake.cookie.key,
        explicit: settings
            .confinement
            .env
            .iter()
            .filter_map(|(k, _)| k.to_str().map(str::to_owned))
            .collect(),
        secrets: delivery.map_or(&[], |d| &d.secrets),
        config: delivery.map_or(&[], |d| &d.config),
        terminate_grace: settings.timeouts.terminate_grace,
        pod_ip,
    })
    .map_err(runner_error)?;
    let announced = planned.announced;
    if !pod_ip {
        let pods = kube::Api::namespaced(client.clone(), &namespace);
        forward::probe(&pods, &pod_name, options.port, settings.timeouts.connect)
            .await
            .map_err(|problem| runner_error(format!("Pod {namespace}/{pod_name}: {problem}")))?;
    }
    let objects = life::create(&client, &namespace, planned)
        .await
        .map_err(runner_error)?;
    let at = |why: String| runner_error(format!("Pod {namespace}/{pod_name}: {why}"));
    let ip = objects
        .running(options.pod_start_timeout)
        .await
        .map_err(&at)?;
    let (exit_tx, exit_rx) = watch::channel(None);
    let mut forward = None;
    let reached = if pod_ip {
        let Some(ip) = ip.and_then(|ip| ip.parse::<std::net::IpAddr>().ok()) else {
            objects.delete(std::time::Duration::ZERO).await;
            return Err(at(
                "its container runs but it has no IP to connect to".into()
            ));
        };
        SocketAddr::new(ip, options.port)
    } else {
        match forward::start(objects.pods.clone(), pod_name.clone(), options.port).await {
            Ok(started) => {
                let local = started.local;
                forward = Some(started);
                local
            }
            Err(problem) => {
                objects.delete(std::time::Duration::ZERO).await;
                return Err(at(problem));
            }
        }
    };
    let (stdout_tx, stdout) =
        pipe::pipe().map_err(|e| at(format!("cannot make the stdout pipe: {e}")))?;
    let (stderr_tx, stderr) =
        pipe::pipe().map_err(|e| at(format!("cannot make the stderr pipe: {e}")))?;
    // The container's stderr is in its log stream with its stdout; nothing else writes here.
    drop(stderr_tx);
    let streaming = tokio::spawn(logs::follow(
        objects.pods.clone(),
        pod_name.clone(),
        stdout_tx,
    ));
    tokio::spawn(objects.clone().follow(exit_tx));
    let plugin = remote::PodPlugin::new(objects, settings.timeouts.terminate_grace, exit_rx);
    let group = ProcessGroup::new(Leader::Remote(Arc::new(plugin)), Arc::clone(name))
        .map_err(|e| at(format!("cannot watch the Pod: {e}")))?;
    group.on_exit(ExitHook(Box::new(move || {
        streaming.abort();
        drop(forward);
    })));
    tracing::debug!(plugin = &**name, pod = %pod_name, %namespace, %reached, "plugin Pod running");
    let launched = Launched {
        view: PluginView::remote(dir.path(), announced, reached),
        diagnose: None,
        // Reached through the API server's port-forward or the Pod's IP, not a namespace here.
        sockets: None,
        group,
        dir: Some(dir),
        plugin: Arc::clone(name),
        terminate_grace: settings.timeouts.terminate_grace,
        janitor,
    };
    Ok(Spawned {
        launched,
        stdout,
        stderr,
        identity,
        // The Pod's security context and the cluster's policies confine it.
        in_force: InForce {
            landlock_abi: None,
            process_limit: ProcessLimit::Rlimit { max: None },
            network_mechanism: None,
            // Not a world this host built: the container runtime's and the cluster's isolation.
            world: crate::confine::world::WorldMechanism::Pod,
            ids: None,
        },
    })
}

/// Eight hex digits unlikely to repeat (a Pod name's unique part): a randomly keyed hash of the
/// time and a counter.
fn random_suffix() -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{:08x}", hasher.finish() as u32)
}
