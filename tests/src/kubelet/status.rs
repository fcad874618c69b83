//! The Pod statuses the stand-in kubelet writes, as the kubelet writes them (merge patches of
//! the `status` subresource). Pure.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

/// Now, as the API's `Time` (seconds).
pub(crate) fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn condition(kind: &str, status: bool, reason: Option<&str>) -> Value {
    let mut c = json!({
        "type": kind,
        "status": if status { "True" } else { "False" },
        "lastTransitionTime": now(),
    });
    if let Some(reason) = reason {
        c["reason"] = json!(reason);
    }
    c
}

fn containers(pod: &Pod) -> Vec<(String, String)> {
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
        .collect()
}

/// The containers wait: `reason` (`ErrImagePull`, `ContainerCreating`,
/// `CreateContainerConfigError`) with `message`.
pub(crate) fn waiting(pod: &Pod, host_ip: &str, reason: &str, message: &str) -> Value {
    let statuses: Vec<Value> = containers(pod)
        .into_iter()
        .map(|(name, image)| {
            json!({
                "name": name, "image": image, "imageID": "", "ready": false, "restartCount": 0,
                "started": false,
                "state": {"waiting": {"reason": reason, "message": message}},
            })
        })
        .collect();
    json!({"status": {
        "phase": "Pending",
        "hostIP": host_ip,
        "startTime": now(),
        "conditions": [
            condition("PodScheduled", true, None),
            condition("Initialized", true, None),
            condition("ContainersReady", false, Some("ContainersNotReady")),
            condition("Ready", false, Some("ContainersNotReady")),
        ],
        "containerStatuses": statuses,
    }})
}

/// Every container runs (container id `standin://PID`).
pub(crate) fn running(pod: &Pod, host_ip: &str, pod_ip: &str, pid: u32, init_done: usize) -> Value {
    let started = now();
    let statuses: Vec<Value> = containers(pod)
        .into_iter()
        .map(|(name, image)| {
            json!({
                "name": name, "image": image, "imageID": image, "ready": true, "restartCount": 0,
                "started": true, "containerID": format!("standin://{pid}"),
                "state": {"running": {"startedAt": started}},
            })
        })
        .collect();
    let init: Vec<Value> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .take(init_done)
        .map(|c| {
            json!({
                "name": c.name, "image": c.image, "imageID": c.image, "ready": true,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                    "startedAt": started, "finishedAt": started}},
            })
        })
        .collect();
    json!({"status": {
        "phase": "Running",
        "hostIP": host_ip,
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": started,
        "conditions": [
            condition("PodScheduled", true, None),
            condition("Initialized", true, None),
            condition("ContainersReady", true, None),
            condition("Ready", true, None),
        ],
        "initContainerStatuses": init,
        "containerStatuses": statuses,
    }})
}

/// The container `failed_init` (an init container) or the main containers ended with `code`.
pub(crate) fn terminated(pod: &Pod, code: i32, reason: &str, failed_init: Option<&str>) -> Value {
    let at = now();
    let state = json!({"terminated": {
        "exitCode": code, "reason": reason, "startedAt": at, "finishedAt": at,
    }});
    let phase = if code == 0 && failed_init.is_none() {
        "Succeeded"
    } else {
        "Failed"
    };
    let mut status = json!({
        "phase": phase,
        "conditions": [
            condition("ContainersReady", false, Some("PodCompleted")),
            condition("Ready", false, Some("PodCompleted")),
        ],
    });
    match failed_init {
        Some(init) => {
            status["initContainerStatuses"] = json!([{
                "name": init, "image": "", "imageID": "", "ready": false, "restartCount": 0,
                "state": state,
            }]);
        }
        None => {
            status["containerStatuses"] = Value::Array(
                containers(pod)
                    .into_iter()
                    .map(|(name, image)| {
                        json!({"name": name, "image": image, "imageID": image, "ready": false,
                            "restartCount": 0, "started": false, "state": state})
                    })
                    .collect(),
            );
        }
    }
    json!({ "status": status })
}
