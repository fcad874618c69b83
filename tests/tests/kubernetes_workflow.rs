//! The Argo-style example of `examples/kubernetes/` against the test cluster, applied as a
//! user applies it (`kubectl apply`): the NetworkPolicy selects the plugin Pods and lets only
//! the agent's Pod reach them; the agent (`tether run`) runs the agent demo's workflow with each
//! step's plugin in a Pod of its own, each Pod's Secret holding only its granted keys, owned by
//! the agent's Pod, and nothing left afterwards; and the same workflow with every step a
//! process inside one agent, its secret read through the API. The agent runs as root and, as
//! in the example's Pods (`runAsNonRoot`), as a user that is not root (uid 61234).

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use tether_broker::launch::{DEFAULT_POD_PORT, MANAGED_BY, MANAGED_BY_LABEL, PLUGIN_LABEL};
use tether_broker::{HandshakeConfig, PluginClient};
use tether_tests::bins;
use tether_tests::host_user::{Host, UNPRIVILEGED};
use tether_tests::output::{stderr, stdout};
use tether_tests::peers::repo_root;
use tether_tests::pods::PodWorld;

const RUNTIME: &str = env!("CARGO_BIN_EXE_pod-container");
const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");

/// How long the test waits for the cluster's controllers to make the agent's Pod of its Job.
const CONTROLLER_TIMEOUT: Duration = Duration::from_secs(60);

/// The Secret the agent reads its plugins' secrets from, and the one value granted from it.
const SECRET: &str = "tether-plugin-secrets";
const WEBHOOK_TOKEN: &str = "the-webhook-token-of-the-test";

/// The placeholder image of the example's step manifests.
const STEPS_PLACEHOLDER: &str = "registry.example/tether-agent-steps@sha256:0000000000000000000000000000000000000000000000000000000000000000";

fn example(file: &str) -> PathBuf {
    repo_root().join("examples/kubernetes").join(file)
}

fn apply(world: &PodWorld, file: &str) {
    let _ = world
        .cluster
        .kubectl(&["apply", "-f", example(file).to_str().unwrap()]);
}

/// The Pods `selector` selects in the world's namespace, by name.
async fn selected(world: &PodWorld, selector: &LabelSelector) -> Vec<String> {
    let labels: Vec<String> = selector
        .match_labels
        .clone()
        .unwrap_or_default()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    assert!(
        selector.match_expressions.is_none(),
        "only matchLabels are read here"
    );
    let mut names: Vec<String> =
        Api::<Pod>::namespaced(world.cluster.client.clone(), &world.cluster.namespace)
            .list(&ListParams::default().labels(&labels.join(",")))
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect();
    names.sort();
    names
}

/// The Pod the Job of `examples/kubernetes/agent.yaml` made (the controller-manager's Job
/// controller, real), once it exists.
async fn agent_pod(world: &PodWorld) -> Pod {
    let pods: Api<Pod> = Api::namespaced(world.cluster.client.clone(), &world.cluster.namespace);
    let config = watcher::Config::default().labels("app.kubernetes.io/name=tether-agent");
    let mut changes = watcher(pods.clone(), config).boxed();
    let found = tokio::time::timeout(CONTROLLER_TIMEOUT, async {
        loop {
            let listed = pods
                .list(&ListParams::default().labels("app.kubernetes.io/name=tether-agent"))
                .await
                .unwrap()
                .items;
            if let Some(pod) = listed.into_iter().next() {
                return pod;
            }
            changes.next().await;
        }
    })
    .await;
    found.expect("the agent Job's Pod is made by the Job controller")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_network_policy_selects_the_plugin_pods_and_lets_only_the_agents_pod_reach_them() {
    let Some(world) = PodWorld::new("network policy", Path::new(RUNTIME)).await else {
        return;
    };
    apply(&world, "rbac.yaml");
    apply(&world, "rbac.yaml");
    apply(&world, "networkpolicy.yaml");
    apply(&world, "agent.yaml");
    let agent = agent_pod(&world).await.metadata.name.unwrap();
    let image = world.binary_image("probe-plugin", Path::new(PROBE));
    let plugin = PluginClient::builder("/plugin/probe-plugin")
        .name("probe")
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .runner(tether_broker::launch::Runner::Kubernetes(
            world.options(&image),
        ))
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let plugin_pods = selected(
        &world,
        &LabelSelector {
            match_labels: Some(BTreeMap::from([(
                MANAGED_BY_LABEL.to_owned(),
                MANAGED_BY.to_owned(),
            )])),
            ..LabelSelector::default()
        },
    )
    .await;
    assert_eq!(plugin_pods.len(), 1, "{plugin_pods:?}");

    // The policy as the API server stored it: it selects the plugin's Pod and not the agent's.
    let policy =
        Api::<NetworkPolicy>::namespaced(world.cluster.client.clone(), &world.cluster.namespace)
            .get("tether-plugins-reach-only-the-agent")
            .await
            .unwrap();
    let spec = policy.spec.unwrap();
    assert_eq!(
        selected(&world, spec.pod_selector.as_ref().unwrap()).await,
        plugin_pods
    );
    let mut types = spec.policy_types.unwrap();
    types.sort();
    assert_eq!(types, ["Egress", "Ingress"]);
    // Ingress: only from the agent's Pod, only to the shim's port.
    let ingress = spec.ingress.unwrap();
    assert_eq!(ingress.len(), 1);
    let from = ingress[0].from.as_ref().unwrap();
    assert_eq!(from.len(), 1);
    assert!(from[0].namespace_selector.is_none() && from[0].ip_block.is_none());
    assert_eq!(
        selected(&world, from[0].pod_selector.as_ref().unwrap()).await,
        std::slice::from_ref(&agent)
    );
    let ports = serde_json::to_value(ingress[0].ports.as_ref().unwrap()).unwrap();
    assert_eq!(
        ports,
        json!([{"protocol": "TCP", "port": DEFAULT_POD_PORT}])
    );
    // Egress: only to the agent's Pod (no DNS, no API server, no other plugin).
    let egress = spec.egress.unwrap();
    assert_eq!(egress.len(), 1);
    let to = egress[0].to.as_ref().unwrap();
    assert_eq!(to.len(), 1);
    assert!(to[0].namespace_selector.is_none() && to[0].ip_block.is_none());
    assert_eq!(
        selected(&world, to[0].pod_selector.as_ref().unwrap()).await,
        [agent]
    );

    plugin.shutdown().await.unwrap();
    world.assert_nothing_left().await;
    world.finish().await;
}

/// What a watcher saw of the Pod runner's objects while the agent ran: each plugin Pod's
/// plugin and owners' uids, each Secret's plugin and keys.
#[derive(Debug, Default)]
struct Seen {
    pods: BTreeMap<String, Vec<String>>,
    secrets: BTreeMap<String, Vec<String>>,
}

/// Records every Pod and Secret of the Pod runner made in the world's namespace.
fn watch(world: &PodWorld, seen: &Arc<Mutex<Seen>>) -> tokio::task::JoinHandle<()> {
    let config = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    let client = world.cluster.client.clone();
    let ns = world.cluster.namespace.clone();
    let pods = watcher(Api::<Pod>::namespaced(client.clone(), &ns), config.clone());
    let secrets = watcher(Api::<Secret>::namespaced(client, &ns), config);
    let plugin =
        |labels: &Option<BTreeMap<String, String>>| labels.as_ref().unwrap()[PLUGIN_LABEL].clone();
    let (pod_seen, secret_seen) = (Arc::clone(seen), Arc::clone(seen));
    let pods = pods.for_each(move |event| {
        if let Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) = event {
            let owners = pod.metadata.owner_references.clone().unwrap_or_default();
            pod_seen.lock().unwrap().pods.insert(
                plugin(&pod.metadata.labels),
                owners.into_iter().map(|o| o.uid).collect(),
            );
        }
        async {}
    });
    let secrets = secrets.for_each(move |event| {
        if let Ok(watcher::Event::Apply(secret) | watcher::Event::InitApply(secret)) = event {
            let keys = secret.data.unwrap_or_default().into_keys().collect();
            secret_seen
                .lock()
                .unwrap()
                .secrets
                .insert(plugin(&secret.metadata.labels), keys);
        }
        async {}
    });
    tokio::spawn(async move {
        futures_util::future::join(pods, secrets).await;
    })
}

/// Who runs the agent: this test's user, or [`UNPRIVILEGED`] (a self-contained copy of the
/// kubeconfig it can read, a home of its own).
struct Agent {
    user: Option<(u32, u32)>,
    kubeconfig: PathBuf,
    _home: Option<tempfile::TempDir>,
}

impl Agent {
    fn new(world: &PodWorld, user: Option<(u32, u32)>) -> Self {
        let Some((uid, gid)) = user else {
            return Self {
                user,
                kubeconfig: world.cluster.kubeconfig.clone(),
                _home: None,
            };
        };
        let home = tempfile::tempdir().unwrap();
        let kubeconfig = home.path().join("kubeconfig.yaml");
        // Its certificates inline: the cluster's own files are root's.
        let flat = world
            .cluster
            .kubectl(&["config", "view", "--raw", "--flatten"]);
        std::fs::write(&kubeconfig, flat).unwrap();
        for path in [home.path(), &kubeconfig] {
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
        }
        Self {
            user,
            kubeconfig,
            _home: Some(home),
        }
    }
}

/// `tether run` of the agent demo's workflow with `args`, against the test cluster, as
/// `agent`'s user.
async fn tether_run(
    world: &PodWorld,
    agent: &Agent,
    args: &[&str],
    env: &[(&str, &str)],
) -> std::process::Output {
    bins::AGENT_DEMO.path();
    let demo = repo_root().join("examples/agent");
    let mut command = tokio::process::Command::new(bins::TETHER.path());
    if let (Some((uid, gid)), Some(home)) = (agent.user, &agent._home) {
        command.uid(uid).gid(gid).env("HOME", home.path());
    }
    command
        .arg("run")
        .args(args)
        .arg(format!("--artifacts={}", demo.join("artifacts").display()))
        .arg(format!("--secrets-from-secret={SECRET}"))
        .arg(format!("--pods-namespace={}", world.cluster.namespace))
        .arg(demo.join("workflow.toml"))
        .env("KUBECONFIG", &agent.kubeconfig)
        .envs(env.iter().copied())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap()
}

/// The `signature` of the run's output line (`output: {"channel":…,"signature":…}`).
fn signature(out: &str) -> String {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("output: "))
        .unwrap_or_else(|| panic!("no output line in {out}"));
    let value: serde_json::Value = serde_json::from_str(line).unwrap();
    value["signature"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_runs_the_workflows_steps_as_pods_with_only_their_granted_keys_or_as_processes_in_one_pod_and_leaves_nothing()
 {
    let Some(world) = PodWorld::new("argo-style agent", Path::new(RUNTIME)).await else {
        return;
    };
    apply(&world, "rbac.yaml");
    apply(&world, "networkpolicy.yaml");
    apply(&world, "agent.yaml");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": SECRET},
        "stringData": {"webhook-token": WEBHOOK_TOKEN, "db-password": "granted to no step"},
    }))
    .unwrap();
    Api::<Secret>::namespaced(world.cluster.client.clone(), &world.cluster.namespace)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    let mut hosts = vec![None];
    if Host::current().is_root() {
        hosts.push(Some(UNPRIVILEGED));
    }
    for user in hosts {
        eprintln!("the agent runs as {user:?} (None: this test's user)");
        let agent = Agent::new(&world, user);
        run_both_ways(&world, &agent).await;
    }
    world.finish().await;
}

/// The workflow with every step a process in the agent, then with every step's plugin a Pod:
/// what each mode makes, and that nothing is left.
async fn run_both_ways(world: &PodWorld, agent: &Agent) {
    // One agent, every step a confined process (the agent demo's own catalog); the notifier's
    // secret read through the API.
    let out = tether_run(
        world,
        agent,
        &[&format!(
            "--catalog={}",
            repo_root().join("examples/agent/catalog").display()
        )],
        &[],
    )
    .await;
    let (text, errors) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{errors}\n{text}");
    assert!(text.contains("steps run: 10"), "{text}");
    let in_processes = signature(&text);
    world.assert_nothing_left().await;

    // The same workflow, each step's plugin a Pod (examples/kubernetes/workflow/), owned by
    // the agent Job's Pod as the downward API names it.
    let owner = agent_pod(world).await;
    let (agent_name, agent_uid) = (owner.metadata.name.unwrap(), owner.metadata.uid.unwrap());
    let image = world.images.add(
        "agent-steps",
        &[("/plugin/agent-demo", Path::new(bins::AGENT_DEMO.path()))],
        &[],
    );
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog");
    std::fs::create_dir(&catalog).unwrap();
    // Readable by an agent that is not root.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for entry in std::fs::read_dir(example("workflow/catalog")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(STEPS_PLACEHOLDER), "{}", path.display());
        std::fs::write(
            catalog.join(path.file_name().unwrap()),
            text.replace(STEPS_PLACEHOLDER, &image),
        )
        .unwrap();
    }
    let seen = Arc::new(Mutex::new(Seen::default()));
    let watching = watch(world, &seen);
    let out = tether_run(
        world,
        agent,
        &[
            &format!("--catalog={}", catalog.display()),
            &format!("--grants={}", example("workflow/grants.toml").display()),
            &format!("--pods-shim-image={}", world.shim),
            &format!(
                "--pods-node-selector=kubernetes.io/hostname={}",
                world.kubelet.node()
            ),
        ],
        &[
            ("TETHER_POD_NAME", &agent_name),
            ("TETHER_POD_UID", &agent_uid),
        ],
    )
    .await;
    let (text, errors) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{errors}\n{text}");
    assert!(text.contains("steps run: 10"), "{text}");
    // `hash` runs no step: checksum's call through the agent started it.
    assert!(text.contains("plugins: 6 started of 6"), "{text}");
    // The same steps, the same granted secret: the same signed note.
    assert_eq!(signature(&text), in_processes);
    assert!(!text.contains(WEBHOOK_TOKEN) && !errors.contains(WEBHOOK_TOKEN));
    world.await_nothing_left().await;
    watching.abort();
    let seen = std::mem::take(&mut *seen.lock().unwrap());

    // A Pod per plugin used, each owned by the agent's Pod; `hash`'s for checksum's call.
    assert_eq!(
        seen.pods.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "checksum",
            "hash",
            "json-transform",
            "notifier",
            "template",
            "word-count"
        ]
    );
    for (plugin, owners) in &seen.pods {
        assert_eq!(
            owners,
            std::slice::from_ref(&agent_uid),
            "{plugin}'s Pod's owners"
        );
    }
    // One Secret, the notifier's, holding its one granted key of the two-key source.
    assert_eq!(
        seen.secrets,
        BTreeMap::from([("notifier".to_owned(), vec!["webhook-token".to_owned()])])
    );
}
