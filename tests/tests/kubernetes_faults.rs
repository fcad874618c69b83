//! The Pod runner's faults against a real API server: an image that cannot be pulled, a Pod no
//! node can take, a plugin that crashes or never prints its handshake, a host that is killed,
//! and an owner that is deleted. Each gives an error naming the plugin and what the Pod was
//! doing, and leaves no Pod, Secret or ConfigMap.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use secrecy::SecretSlice;
use serde_json::json;
use tether_broker::error::{Phase, StartErrorKind};
use tether_broker::launch::{KubernetesOptions, Owner, Runner};
use tether_broker::{Delivery, HandshakeConfig, PluginClient, StartError};
use tether_tests::bins;
use tether_tests::kubelet::unpullable;
use tether_tests::pods::PodWorld;

const RUNTIME: &str = env!("CARGO_BIN_EXE_pod-container");
const POD_HOST: &str = env!("CARGO_BIN_EXE_pod-host");
const EXIT_BEFORE_HANDSHAKE: &str = env!("CARGO_BIN_EXE_exit-before-handshake");
const HANG_BEFORE_HANDSHAKE: &str = env!("CARGO_BIN_EXE_hang-before-handshake");

async fn world(test: &str) -> Option<PodWorld> {
    PodWorld::new(test, Path::new(RUNTIME)).await
}

/// Starts `program` of `image` with `options`, with a granted secret (so a Secret is made too);
/// the start must fail.
async fn failed_start(
    program: &str,
    options: KubernetesOptions,
    start_timeout: Duration,
) -> StartError {
    let started = PluginClient::builder(program)
        .name("faulty")
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .deliver(Delivery::new().secret("token", SecretSlice::from(b"t0ken".to_vec())))
        .start_timeout(start_timeout)
        .runner(Runner::Kubernetes(options))
        .start()
        .await;
    match started {
        Ok(_) => panic!("the start of {program} succeeded"),
        Err(e) => e,
    }
}

fn runner_problem(error: &StartError) -> &str {
    match error.kind() {
        StartErrorKind::Runner { runner, problem } => {
            assert_eq!(*runner, "kubernetes");
            problem
        }
        other => panic!("not the runner's error: {other:?} ({error})"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_that_cannot_be_pulled_fails_the_start_with_err_image_pull_and_leaves_nothing() {
    let Some(world) = world("image pull fails").await else {
        return;
    };
    let options = world.options(&unpullable("no-such-plugin"));
    let error = failed_start("/plugin/kv", options, Duration::from_secs(5)).await;
    assert_eq!(error.plugin(), "faulty");
    assert_eq!(error.phase(), Phase::Spawn);
    let problem = runner_problem(&error);
    assert!(
        problem.contains("ErrImagePull") && problem.contains("no-such-plugin"),
        "{problem}"
    );
    assert!(error.to_string().contains("faulty"), "{error}");
    world.await_nothing_left().await;
    world.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_no_node_can_take_fails_at_the_pod_start_timeout_with_the_schedulers_words() {
    let Some(world) = world("unschedulable").await else {
        return;
    };
    let image = world.binary_image("counter-plugin", Path::new(bins::COUNTER_PLUGIN.path()));
    let options = world
        .options(&image)
        .node_selector("tether.test/no-such-label", "anywhere")
        .pod_start_timeout(Duration::from_secs(3));
    let error = failed_start("/plugin/counter-plugin", options, Duration::from_secs(5)).await;
    let problem = runner_problem(&error);
    assert!(
        problem.contains("not scheduled (Unschedulable)")
            && problem.contains("node affinity/selector"),
        "{problem}"
    );
    assert!(
        problem.contains("pod_start_timeout"),
        "names the timeout: {problem}"
    );
    world.await_nothing_left().await;
    world.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_crashes_before_its_handshake_fails_the_start_with_its_status_and_leaves_nothing()
 {
    let Some(world) = world("crash in a pod").await else {
        return;
    };
    let image = world.binary_image("exit-before-handshake", Path::new(EXIT_BEFORE_HANDSHAKE));
    let error = failed_start(
        "/plugin/exit-before-handshake",
        world.options(&image),
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(error.phase(), Phase::Handshake, "{error}");
    assert!(
        matches!(error.kind(), StartErrorKind::Exited { .. }),
        "the plugin's exit, read from its Pod: {error}"
    );
    world.await_nothing_left().await;
    world.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_never_prints_its_handshake_fails_at_the_start_timeout_and_leaves_nothing() {
    let Some(world) = world("start timeout in a pod").await else {
        return;
    };
    let image = world.binary_image("hang-before-handshake", Path::new(HANG_BEFORE_HANDSHAKE));
    let error = failed_start(
        "/plugin/hang-before-handshake",
        world.options(&image),
        Duration::from_secs(2),
    )
    .await;
    assert_eq!(error.phase(), Phase::Handshake);
    assert!(
        matches!(error.kind(), StartErrorKind::Timeout { .. }),
        "{error}"
    );
    world.await_nothing_left().await;
    world.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_hosts_pod_is_swept_by_its_next_incarnation_and_then_nothing_is_left() {
    let Some(world) = world("host killed").await else {
        return;
    };
    let image = world.binary_image("counter-plugin", Path::new(bins::COUNTER_PLUGIN.path()));
    let host = |id: &str| {
        let mut child = Command::new(POD_HOST)
            .arg(&world.cluster.kubeconfig)
            .args([
                &world.cluster.namespace,
                world.kubelet.node(),
                &world.shim,
                &image,
            ])
            .args(["/plugin/counter-plugin", id])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "started\n");
        child
    };
    let mut first = host("agent-7");
    let before = world.leftovers().await;
    assert_eq!(
        before.iter().filter(|o| o.starts_with("pod/")).count(),
        1,
        "{before:?}"
    );
    first.kill().unwrap();
    first.wait().unwrap();
    assert_eq!(
        world.leftovers().await,
        before,
        "a killed host cannot delete its Pod"
    );

    let mut second = host("agent-7");
    let now = world.leftovers().await;
    assert_eq!(now.len(), 1, "only the new incarnation's Pod: {now:?}");
    assert_ne!(now, before, "the first incarnation's Pod was swept");
    drop(second.stdin.take());
    assert!(second.wait().unwrap().success());
    world.assert_nothing_left().await;
    world.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_hosts_owner_pod_deletes_the_plugins_pod_and_secret_and_the_plugin_exits() {
    let Some(world) = world("owner deleted").await else {
        return;
    };
    // The host's own Pod, simulated by kwok like any other (it is not the Pod runner's).
    let pods: Api<Pod> = Api::namespaced(world.cluster.client.clone(), &world.cluster.namespace);
    let agent: Pod = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {"containers": [{"name": "agent", "image": "agent@sha256:0000000000000000000000000000000000000000000000000000000000000000"}],
            "terminationGracePeriodSeconds": 0},
    }))
    .unwrap();
    let agent = pods.create(&PostParams::default(), &agent).await.unwrap();
    let owner = Owner::pod("agent", agent.metadata.uid.unwrap());
    let image = world.binary_image("counter-plugin", Path::new(bins::COUNTER_PLUGIN.path()));
    let plugin = PluginClient::builder("/plugin/counter-plugin")
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .deliver(Delivery::new().secret("token", SecretSlice::from(b"t0ken".to_vec())))
        .runner(Runner::Kubernetes(world.options(&image).owner(owner)))
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let left = world.leftovers().await;
    assert!(left.iter().any(|o| o.starts_with("secret/")), "{left:?}");

    pods.delete("agent", &DeleteParams::default())
        .await
        .unwrap();
    // Garbage collection deletes the plugin's Pod; the plugin ends with it.
    let status = tokio::time::timeout(Duration::from_secs(30), plugin.exited())
        .await
        .unwrap();
    assert!(!status.success());
    world.await_nothing_left().await;
    world.finish().await;
}
