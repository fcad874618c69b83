//! One simulated Pod's life, as the kubelet lives it: pull the images (or fail with
//! `ErrImagePull`), mount the volumes (or fail with `FailedMount`), run the init containers in
//! order, start the container, report `Running`, report the exit — and on deletion stop the
//! container within the grace period and delete the Pod object for good.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
    PostParams, Preconditions,
};
use serde_json::json;
use tokio::sync::watch;

use super::container::{self, ConfigError, Running};
use super::images::Image;
use super::status;
use super::volumes;

/// What the stand-in knows while it runs Pods.
pub(crate) struct Context {
    pub(crate) client: kube::Client,
    pub(crate) node: String,
    pub(crate) host_ip: String,
    pub(crate) runtime: PathBuf,
    pub(crate) images: super::Images,
    pub(crate) dir: PathBuf,
}

/// How a Pod's task is told to stop: `Some(grace)` once the Pod is being deleted.
pub(crate) type Stop = watch::Receiver<Option<Duration>>;

fn kwok_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kwok.x-k8s.io", "v1alpha1", kind),
        plural,
    )
}

/// Runs `pod` until it is deleted; `pod_ip` is the address it gets.
pub(crate) async fn live(ctx: Arc<Context>, pod: Pod, pod_ip: String, mut stop: Stop) {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let dir = ctx.dir.join(format!(
        "{namespace}_{name}_{}",
        pod.metadata.uid.clone().unwrap_or_default()
    ));
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut running = None;
    let outcome = start(&ctx, &pod, &pod_ip, &dir, &pods).await;
    match outcome {
        Ok(started) => running = Some(started),
        Err(Blocked {
            reason,
            message,
            event,
        }) => {
            if let Some((event_reason, event_message)) = event {
                ctx.event(&pod, "Warning", &event_reason, &event_message)
                    .await;
            }
            let patch = status::waiting(&pod, &ctx.host_ip, &reason, &message);
            let _ = pods
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
        }
    }
    let grace = match running.as_mut() {
        Some(run) => tokio::select! {
            exit = run.child.wait() => {
                for logger in run.loggers.drain(..) {
                    let _ = logger.await;
                }
                let code = exit.ok().and_then(|s| {
                    use std::os::unix::process::ExitStatusExt as _;
                    s.code().or_else(|| s.signal().map(|n| 128 + n))
                }).unwrap_or(1);
                let reason = if code == 0 { "Completed" } else { "Error" };
                let patch = status::terminated(&pod, code, reason, None);
                let _ = pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await;
                wait_for_stop(&mut stop).await
            }
            grace = wait_for_stop(&mut stop) => grace,
        },
        None => wait_for_stop(&mut stop).await,
    };
    if let Some(run) = running.as_mut() {
        terminate(run, grace).await;
    }
    // The Logs and PortForward objects go first, then the Pod object: what a kubelet's status
    // manager does once the containers are gone.
    for (kind, plural) in [("Logs", "logs"), ("PortForward", "portforwards")] {
        let api: Api<DynamicObject> =
            Api::namespaced_with(ctx.client.clone(), &namespace, &kwok_resource(kind, plural));
        let _ = api.delete(&name, &DeleteParams::default()).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let _ = pods.delete(&name, &params).await;
}

/// Why a Pod did not start: its containers' waiting reason and message, and an event.
struct Blocked {
    reason: String,
    message: String,
    event: Option<(String, String)>,
}

impl Blocked {
    fn new(reason: &str, message: String, event: Option<(&str, String)>) -> Self {
        Self {
            reason: reason.into(),
            message,
            event: event.map(|(r, m)| (r.into(), m)),
        }
    }
}

async fn start(
    ctx: &Context,
    pod: &Pod,
    pod_ip: &str,
    dir: &std::path::Path,
    pods: &Api<Pod>,
) -> Result<Running, Blocked> {
    let spec = pod.spec.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let mut images: Vec<Image> = Vec::new();
    for c in spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
    {
        let reference = c.image.clone().unwrap_or_default();
        match ctx.images.pull(&reference) {
            Some(image) => images.push(image),
            None => {
                let message = format!(
                    "Failed to pull image \"{reference}\": rpc error: code = NotFound desc = failed to pull and unpack image \"{reference}\": not found"
                );
                return Err(Blocked::new(
                    "ErrImagePull",
                    message.clone(),
                    Some(("Failed", message)),
                ));
            }
        }
    }
    let volumes = volumes::make(&ctx.client, pod, &dir.join("volumes"))
        .await
        .map_err(|message| {
            Blocked::new(
                "ContainerCreating",
                String::new(),
                Some(("FailedMount", message)),
            )
        })?;
    let inits = spec.init_containers.clone().unwrap_or_default();
    for (i, init) in inits.iter().enumerate() {
        let started = container::start(
            &ctx.runtime,
            pod,
            pod_ip,
            init,
            &images[i],
            &volumes,
            &dir.join(&init.name),
        );
        let mut run = config(started)?;
        let code = run
            .child
            .wait()
            .await
            .ok()
            .and_then(|s| s.code())
            .unwrap_or(1);
        for logger in run.loggers.drain(..) {
            let _ = logger.await;
        }
        if code != 0 {
            let patch = status::terminated(pod, code, "Error", Some(&init.name));
            let _ = pods
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            return Err(Blocked::new(
                "PodInitializing",
                format!("init container {} exited with {code}", init.name),
                None,
            ));
        }
    }
    let [main] = spec.containers.as_slice() else {
        return Err(Blocked::new(
            "CreateContainerConfigError",
            "the stand-in kubelet runs Pods of one container".into(),
            None,
        ));
    };
    let image = &images[inits.len()];
    let run = config(container::start(
        &ctx.runtime,
        pod,
        pod_ip,
        main,
        image,
        &volumes,
        &dir.join(&main.name),
    ))?;
    ctx.event(
        pod,
        "Normal",
        "Started",
        &format!("Started container {}", main.name),
    )
    .await;
    // Route the log stream and the forwarded ports before the Pod is reported running.
    let logs = json!({
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Logs",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"logs": [{"containers": [main.name], "logsFile": run.log, "follow": true}]},
    });
    let forwards: Vec<_> = main
        .ports
        .iter()
        .flatten()
        .map(|p| {
            json!({"ports": [p.container_port], "command": [
                ctx.runtime, "dial", run.pid.to_string(), p.container_port.to_string()]})
        })
        .collect();
    let port_forward = json!({
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "PortForward",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"forwards": forwards},
    });
    for (kind, plural, object) in [
        ("Logs", "logs", logs),
        ("PortForward", "portforwards", port_forward),
    ] {
        let api: Api<DynamicObject> =
            Api::namespaced_with(ctx.client.clone(), &namespace, &kwok_resource(kind, plural));
        let object: DynamicObject = serde_json::from_value(object).expect("a valid object");
        if let Err(e) = api.create(&PostParams::default(), &object).await {
            return Err(Blocked::new(
                "CreateContainerError",
                format!("{kind}: {e}"),
                None,
            ));
        }
    }
    let patch = status::running(pod, &ctx.host_ip, pod_ip, run.pid, inits.len());
    let _ = pods
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await;
    Ok(run)
}

fn config(started: Result<Result<Running, String>, ConfigError>) -> Result<Running, Blocked> {
    match started {
        Ok(Ok(run)) => Ok(run),
        Ok(Err(message)) => Err(Blocked::new(
            "CreateContainerError",
            message.clone(),
            Some(("Failed", message)),
        )),
        Err(ConfigError(message)) => Err(Blocked::new(
            "CreateContainerConfigError",
            message.clone(),
            Some(("Failed", format!("Error: {message}"))),
        )),
    }
}

async fn wait_for_stop(stop: &mut Stop) -> Duration {
    match stop.wait_for(Option::is_some).await {
        Ok(grace) => grace.unwrap_or_default(),
        Err(_) => Duration::ZERO,
    }
}

/// SIGTERM, then SIGKILL when the grace period is over.
async fn terminate(run: &mut Running, grace: Duration) {
    if let Ok(None) = run.child.try_wait() {
        if let Ok(pid) = libc::pid_t::try_from(run.pid) {
            // SAFETY: kill has no memory preconditions; the child is not reaped yet.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        if tokio::time::timeout(grace, run.child.wait()).await.is_err() {
            let _ = run.child.kill().await;
        }
    }
    for logger in run.loggers.drain(..) {
        let _ = logger.await;
    }
}

impl Context {
    /// Records an event about `pod`, as the kubelet on this node.
    pub(crate) async fn event(&self, pod: &Pod, kind: &str, reason: &str, message: &str) {
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let event = Event {
            metadata: ObjectMeta {
                generate_name: Some(format!(
                    "{}.",
                    pod.metadata.name.clone().unwrap_or_default()
                )),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: pod.metadata.name.clone(),
                namespace: Some(namespace.clone()),
                uid: pod.metadata.uid.clone(),
                ..ObjectReference::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some(kind.into()),
            source: Some(EventSource {
                component: Some("kubelet".into()),
                host: Some(self.node.clone()),
            }),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            count: Some(1),
            reporting_component: Some("kubelet".into()),
            reporting_instance: Some(self.node.clone()),
            ..Event::default()
        };
        let _ = Api::<Event>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), &event)
            .await;
    }
}
