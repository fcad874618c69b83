//! The Kubernetes test cluster itself (`tests/k8s/cluster.sh`) and the stand-in kubelet the
//! Pod runner's tests rely on: a Pod is scheduled onto the stand-in's kwok node, its container
//! runs as a real process behind `tether-pod-shim`, its log stream and forwarded port come
//! through the real API server, and garbage collection deletes what an owner owned.

use std::path::Path;
use std::time::Duration;

use futures_util::{AsyncBufReadExt as _, StreamExt as _};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, DeleteParams, LogParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;
use tether_tests::bins;
use tether_tests::cluster::{Cluster, cluster_or_skip};
use tether_tests::kubelet::{Images, StandIn};
use tokio::io::AsyncBufReadExt as _;

const RUNTIME: &str = env!("CARGO_BIN_EXE_pod-container");

/// How long a test waits for the cluster to do something it does in well under a second.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(30);

/// A stand-in "plugin": prints a stray line and a handshake for a unix socket in its
/// `TMPDIR`, and answers each connection with one line.
const ECHO_PLUGIN: &str = r#"
import os, socket
path = os.path.join(os.environ["TMPDIR"], "plugin.sock")
server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen()
print("hello from the container, uid", os.getuid(), flush=True)
print(f"1|1|unix|{path}|grpc||true", flush=True)
while True:
    conn, _ = server.accept()
    conn.sendall(b"answered inside the pod\n")
    conn.close()
"#;

async fn stand_in(cluster: &Cluster, images: Images) -> StandIn {
    StandIn::start(cluster.client.clone(), Path::new(RUNTIME), images)
        .await
        .expect("the stand-in kubelet starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_on_the_stand_in_runs_behind_the_shim_with_its_log_and_port_forward_through_the_api_server()
 {
    let test = "stand-in pod log and port-forward";
    let Some(cluster) = cluster_or_skip(test).await else {
        return;
    };
    let Some(python) = tether_tests::python::python_or_skip(test) else {
        return;
    };
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(script.path(), ECHO_PLUGIN).unwrap();
    let images = Images::default();
    let shim = images.add(
        "pod-shim",
        &[("/tether-pod-shim", Path::new(bins::POD_SHIM.path()))],
        &["/tether-pod-shim"],
    );
    let mut files: Vec<(&str, &Path)> = vec![("/plugin/echo.py", script.path())];
    let prefixes: Vec<String> = python
        .prefixes
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    for (prefix, path) in prefixes.iter().zip(&python.prefixes) {
        files.push((prefix, path));
    }
    let plugin = images.add("echo-plugin", &files, &[]);
    let kubelet = stand_in(&cluster, images).await;
    let interpreter = python.interpreter.display().to_string();
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "echo", "labels": {"app.kubernetes.io/managed-by": "tether"}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": kubelet.node()},
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "volumes": [{"name": "bin", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
            "initContainers": [{
                "name": "shim", "image": shim,
                "command": ["/tether-pod-shim", "install", "/run/tether/bin"],
                "volumeMounts": [{"name": "bin", "mountPath": "/run/tether/bin"}],
            }],
            "containers": [{
                "name": "plugin", "image": plugin,
                "command": ["/run/tether/bin/tether-pod-shim", "run", "--listen", "127.0.0.1:7070",
                    "--", interpreter, "/plugin/echo.py"],
                "env": [{"name": "TMPDIR", "value": "/run/tether/tmp"}],
                "ports": [{"containerPort": 7070}],
                "securityContext": {"runAsNonRoot": true, "readOnlyRootFilesystem": true},
                "volumeMounts": [
                    {"name": "bin", "mountPath": "/run/tether/bin", "readOnly": true},
                    {"name": "tmp", "mountPath": "/run/tether/tmp"},
                ],
            }],
        },
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let uid = pods
        .create(&PostParams::default(), &pod)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let running = await_condition(pods.clone(), "echo", conditions::is_pod_running());
    tokio::time::timeout(CLUSTER_TIMEOUT, running)
        .await
        .unwrap()
        .unwrap();

    // The log stream, through the API server and kwok, from the container's CRI log file.
    let params = LogParams {
        container: Some("plugin".into()),
        follow: true,
        ..LogParams::default()
    };
    let mut lines = pods.log_stream("echo", &params).await.unwrap().lines();
    let first = tokio::time::timeout(CLUSTER_TIMEOUT, lines.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first, "hello from the container, uid 65532");
    let handshake = lines.next().await.unwrap().unwrap();
    assert_eq!(
        handshake, "1|1|tcp|127.0.0.1:7070|grpc||true",
        "the shim's port, announced"
    );

    // The forwarded port, through the API server and kwok, into the Pod's network namespace.
    let mut forwarder = pods.portforward("echo", &[7070]).await.unwrap();
    let mut stream = tokio::io::BufReader::new(forwarder.take_stream(7070).unwrap());
    let mut answer = String::new();
    stream.read_line(&mut answer).await.unwrap();
    assert_eq!(answer, "answered inside the pod\n");
    drop(stream);
    let _ = forwarder.join().await;

    pods.delete("echo", &DeleteParams::default()).await.unwrap();
    let deleted = await_condition(pods.clone(), "echo", conditions::is_deleted(&uid));
    tokio::time::timeout(CLUSTER_TIMEOUT, deleted)
        .await
        .unwrap()
        .unwrap();
    kubelet.stop().await;
    cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_owner_garbage_collects_the_pod_and_secret_it_owns() {
    let Some(cluster) = cluster_or_skip("owner deletion collects").await else {
        return;
    };
    let images = Images::default();
    let sleeper = images.add("sleeper", &[], &["/bin/sleep", "3600"]);
    let kubelet = stand_in(&cluster, images).await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let owner: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap();
    let owner = maps.create(&PostParams::default(), &owner).await.unwrap();
    let owned_by = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
        "uid": owner.metadata.uid}]);
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "owned", "ownerReferences": owned_by,
            "labels": {"app.kubernetes.io/managed-by": "tether"}},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": kubelet.node()},
            "automountServiceAccountToken": false,
            // `sleep` as a container's first process ignores SIGTERM: the grace period decides.
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": sleeper}]},
    }))
    .unwrap();
    let pod_uid = pods
        .create(&PostParams::default(), &pod)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "owned", "ownerReferences": owned_by}, "stringData": {"k": "v"},
    }))
    .unwrap();
    let secret_uid = secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let running = await_condition(pods.clone(), "owned", conditions::is_pod_running());
    tokio::time::timeout(CLUSTER_TIMEOUT, running)
        .await
        .unwrap()
        .unwrap();

    maps.delete("owner", &DeleteParams::default())
        .await
        .unwrap();
    let pod_gone = await_condition(pods.clone(), "owned", conditions::is_deleted(&pod_uid));
    let secret_gone = await_condition(
        secrets.clone(),
        "owned",
        conditions::is_deleted(&secret_uid),
    );
    tokio::time::timeout(CLUSTER_TIMEOUT, async {
        pod_gone.await.unwrap();
        secret_gone.await.unwrap()
    })
    .await
    .expect("garbage collection deletes the owned Pod and Secret");
    let listed = pods.list(&Default::default()).await.unwrap();
    assert!(
        listed.items.is_empty(),
        "{:?}",
        listed
            .items
            .iter()
            .map(|p| &p.metadata.name)
            .collect::<Vec<_>>()
    );
    kubelet.stop().await;
    cluster.cleanup().await;
}
