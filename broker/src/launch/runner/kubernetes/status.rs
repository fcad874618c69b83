//! What a plugin's Pod is doing, read from its status as the kubelet and the scheduler report
//! it: still starting (and what it waits for), running, never going to run (and why), or
//! ended. Pure.

use k8s_openapi::api::core::v1::{ContainerStatus, Event, Pod};

use super::objects::CONTAINER;

/// Waiting reasons after which the container will not start without someone changing
/// something (the image, the Secret, the Pod): the start fails at once instead of at the Pod
/// start timeout.
const FATAL_WAITING: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// Where a Pod is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Progress {
    /// Not running yet: what it waits for, in words.
    Starting(String),
    /// The plugin's container runs; the Pod's IP once it has one.
    Running { pod_ip: Option<String> },
    /// It will not run: why.
    Failed(String),
    /// The plugin's container ended with `code` (`reason`: `Error`, `OOMKilled`, …).
    Exited { code: i32, reason: String },
}

/// `pod`'s progress.
pub(crate) fn progress(pod: &Pod) -> Progress {
    let Some(status) = &pod.status else {
        return Progress::Starting("Pending: created, not yet seen by the scheduler".into());
    };
    for init in status.init_container_statuses.iter().flatten() {
        if let Some(done) = init.state.as_ref().and_then(|s| s.terminated.as_ref())
            && done.exit_code != 0
        {
            return Progress::Failed(format!(
                "its init container `{}` exited with {}{}",
                init.name,
                done.exit_code,
                suffix(done.message.as_deref())
            ));
        }
    }
    let container: Option<&ContainerStatus> = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == CONTAINER);
    if let Some(state) = container.and_then(|c| c.state.as_ref()) {
        if let Some(done) = &state.terminated {
            return Progress::Exited {
                code: done.exit_code,
                reason: done.reason.clone().unwrap_or_else(|| "Error".into()),
            };
        }
        if state.running.is_some() {
            return Progress::Running {
                pod_ip: status.pod_ip.clone().filter(|ip| !ip.is_empty()),
            };
        }
        if let Some(waiting) = &state.waiting {
            let reason = waiting.reason.clone().unwrap_or_default();
            let said = format!("{reason}{}", suffix(waiting.message.as_deref()));
            if FATAL_WAITING.contains(&reason.as_str()) {
                return Progress::Failed(format!("its container cannot start: {said}"));
            }
            return Progress::Starting(format!("Pending: the container waits: {said}"));
        }
    }
    if matches!(status.phase.as_deref(), Some("Failed" | "Succeeded")) {
        return Progress::Failed(format!(
            "the Pod is {}{}",
            status.phase.as_deref().unwrap_or_default(),
            suffix(status.message.as_deref().or(status.reason.as_deref()))
        ));
    }
    let unscheduled = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False");
    if let Some(condition) = unscheduled {
        return Progress::Starting(format!(
            "Pending: not scheduled ({}){}",
            condition.reason.as_deref().unwrap_or("no reason given"),
            suffix(condition.message.as_deref())
        ));
    }
    match pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
        Some(node) => Progress::Starting(format!(
            "Pending: scheduled onto node {node}, the container is being created (image pull, volumes)"
        )),
        None => Progress::Starting("Pending: waiting for the scheduler".into()),
    }
}

/// The newest warning among `events` (about the Pod), for an error message.
pub(crate) fn latest_warning(events: &[Event]) -> Option<String> {
    events
        .iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .max_by_key(|e| e.last_timestamp.as_ref().map(|t| t.0))
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.as_deref().unwrap_or("Warning"),
                e.message.as_deref().unwrap_or_default()
            )
        })
}

fn suffix(message: Option<&str>) -> String {
    match message.map(str::trim).filter(|m| !m.is_empty()) {
        Some(message) => format!(": {message}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "plugin"}]}, "status": status}))
            .unwrap()
    }

    fn waiting(reason: &str, message: &str) -> Pod {
        pod(
            json!({"phase": "Pending", "containerStatuses": [{"name": "plugin", "image": "i",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": reason, "message": message}}}]}),
        )
    }

    #[test]
    fn an_image_that_cannot_be_pulled_fails_the_start_with_the_kubelets_words() {
        let progress = progress(&waiting(
            "ErrImagePull",
            "failed to pull image \"x\": not found",
        ));
        assert_eq!(
            progress,
            Progress::Failed(
                "its container cannot start: ErrImagePull: failed to pull image \"x\": not found"
                    .into()
            )
        );
        assert!(
            matches!(progress_of("ContainerCreating"), Progress::Starting(s) if s.contains("ContainerCreating"))
        );
    }

    fn progress_of(reason: &str) -> Progress {
        progress(&waiting(reason, ""))
    }

    #[test]
    fn an_unschedulable_pod_is_still_starting_and_says_why() {
        let p = pod(
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."}]}),
        );
        assert_eq!(
            progress(&p),
            Progress::Starting("Pending: not scheduled (Unschedulable): 0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.".into())
        );
    }

    #[test]
    fn running_and_ended_containers_are_read_with_the_pod_ip_and_exit_code() {
        let running = pod(
            json!({"phase": "Running", "podIP": "10.1.2.3", "containerStatuses": [{"name": "plugin",
            "image": "i", "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}]}),
        );
        assert_eq!(
            progress(&running),
            Progress::Running {
                pod_ip: Some("10.1.2.3".into())
            }
        );
        let oom = pod(
            json!({"phase": "Failed", "containerStatuses": [{"name": "plugin", "image": "i",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}),
        );
        assert_eq!(
            progress(&oom),
            Progress::Exited {
                code: 137,
                reason: "OOMKilled".into()
            }
        );
        let init = pod(
            json!({"phase": "Failed", "initContainerStatuses": [{"name": "tether-pod-shim", "image": "i",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 125}}}]}),
        );
        assert!(
            matches!(progress(&init), Progress::Failed(s) if s.contains("tether-pod-shim") && s.contains("125"))
        );
    }
}
