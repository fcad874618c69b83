//! The Pod runner chosen by a catalog manifest (`runner = "kubernetes"` and its `[kubernetes]`
//! table) through a `Supervisor` host against the test cluster: refused until the operator's
//! grants file allows it (the refusal names the manifest's line and the grants line to add),
//! then the manifest's image and limits make the Pod, the plugin reads its granted secret, and
//! nothing is left after shutdown. `tether check` reads the same catalog.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use tether_broker::catalog::MemoryValueSource;
use tether_broker::error::UseErrorKind;
use tether_broker::launch::{MANAGED_BY, MANAGED_BY_LABEL};
use tether_broker::{Catalog, Grants, Supervisor};
use tether_examples::kv::GetRequest;
use tether_examples::kv::kv_client::KvClient;
use tether_tests::bins;
use tether_tests::guides::{self, Shell};
use tether_tests::output::stdout;
use tether_tests::peers::repo_root;
use tether_tests::pods::PodWorld;

const RUNTIME: &str = env!("CARGO_BIN_EXE_pod-container");
const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");

/// A manifest choosing the Pod runner for `image`; `runner` is on line 4.
fn manifest(image: &str) -> String {
    format!(
        r#"name = "probe"
command = "/plugin/probe-plugin"
secrets = ["db-password"]
runner = "kubernetes"

[handshake]
cookie_key = "BASIC_PLUGIN"
cookie_value = "hello"

[kubernetes]
image = "{image}"
memory_limit = "64Mi"
cpu_limit = "250m"
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_plugin_runs_in_the_pod_its_manifest_describes_only_once_the_grants_file_allows_the_pod_runner()
 {
    let Some(world) = PodWorld::new("catalog pod runner", Path::new(RUNTIME)).await else {
        return;
    };
    let image = world.binary_image("probe-plugin", Path::new(PROBE));
    let dir = tempfile::tempdir().unwrap();
    let catalog_dir = dir.path().join("catalog");
    std::fs::create_dir(&catalog_dir).unwrap();
    let manifest_file = catalog_dir.join("probe.toml");
    std::fs::write(&manifest_file, manifest(&image)).unwrap();
    let catalog = Catalog::load_dir(&catalog_dir).unwrap();
    assert!(catalog.errors().is_empty(), "{:?}", catalog.errors());
    let grants_file = dir.path().join("grants.toml");
    let host = |grants: &str| {
        std::fs::write(&grants_file, grants).unwrap();
        Supervisor::builder(catalog.clone(), dir.path().join("state"))
            .grants(Grants::load(&grants_file).unwrap())
            .secrets(MemoryValueSource::new().with("db-password", "hunter2"))
            .kubernetes(world.host_options())
            .build()
    };

    // Granted its secret but not the Pod runner: it does not start, and nothing is made.
    let refusing = host("[plugins.probe]\nsecrets = [\"db-password\"]\n");
    let refused = refusing.acquire("probe").await.unwrap_err();
    assert!(
        matches!(refused.kind(), UseErrorKind::NotGranted(_)),
        "{refused}"
    );
    let text = refused.to_string();
    for part in [
        format!("{}:4", manifest_file.display()),
        "add `runner = \"kubernetes\"` under `[plugins.probe]`".to_owned(),
        grants_file.display().to_string(),
    ] {
        assert!(text.contains(&part), "{part:?} is not in: {text}");
    }
    world.assert_nothing_left().await;

    // Granted: the Pod is made from the manifest's image and limits, on the host's cluster.
    let supervisor =
        host("[plugins.probe]\nsecrets = [\"db-password\"]\nrunner = \"kubernetes\"\n");
    let lease = supervisor
        .acquire("probe")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let pods: Api<Pod> = Api::namespaced(world.cluster.client.clone(), &world.cluster.namespace);
    let listed = pods
        .list(&ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}")))
        .await
        .unwrap()
        .items;
    assert_eq!(listed.len(), 1, "one Pod for the plugin");
    let spec = serde_json::to_value(listed[0].spec.as_ref().unwrap()).unwrap();
    let container = &spec["containers"][0];
    assert_eq!(container["image"], image.as_str());
    assert_eq!(container["resources"]["limits"]["memory"], "64Mi");
    assert_eq!(container["resources"]["limits"]["cpu"], "250m");
    let value = KvClient::new(lease.channel())
        .get(GetRequest {
            key: "secret:db-password".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .value;
    assert_eq!(value, b"hunter2");
    drop(lease);
    supervisor.shutdown().await;
    world.await_nothing_left().await;
    world.finish().await;
}

#[test]
fn tether_check_reads_a_pod_runner_manifest_and_refuses_a_tag_only_image_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog");
    std::fs::create_dir(&catalog).unwrap();
    let digest = "0123456789abcdef".repeat(4);
    std::fs::write(
        catalog.join("probe.toml"),
        manifest(&format!("registry.example/probe@sha256:{digest}")),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("secrets")).unwrap();
    std::fs::write(dir.path().join("secrets/db-password"), "hunter2").unwrap();
    let grants = dir.path().join("grants.toml");
    std::fs::write(
        &grants,
        "[plugins.probe]\nsecrets = [\"db-password\"]\nrunner = \"kubernetes\"\n",
    )
    .unwrap();
    let check = || {
        std::process::Command::new(bins::TETHER.path())
            .args(["check", "--catalog"])
            .arg(&catalog)
            .arg("--grants")
            .arg(&grants)
            .output()
            .unwrap()
    };
    let out = check();
    let text = stdout(&out);
    assert!(
        text.contains("ok       probe (runner kubernetes (image registry.example/probe@sha256:"),
        "{text}"
    );
    assert!(text.contains("memory 64Mi, cpu 250m"), "{text}");
    assert!(text.contains("world: pod"), "{text}");

    std::fs::write(
        catalog.join("probe.toml"),
        manifest("registry.example/probe:latest"),
    )
    .unwrap();
    let out = check();
    assert!(!out.status.success());
    let text = stdout(&out);
    assert!(text.contains("probe.toml:11"), "{text}");
    assert!(text.contains("not pinned by digest"), "{text}");
}

#[test]
fn the_kubernetes_guides_commands_run_as_written() {
    bins::TETHER.path();
    let blocks = guides::blocks("docs/kubernetes.md");
    let runs = guides::runs(&blocks, "tests/tests/kubernetes_catalog.rs");
    assert_eq!(runs.len(), 1);
    let out = Shell::new(repo_root())
        .path(repo_root().join("target/debug"))
        .run(runs[0]);
    let text = stdout(&out);
    for plugin in [
        "checksum",
        "hash",
        "json-transform",
        "notifier",
        "template",
        "word-count",
    ] {
        assert!(
            text.contains(&format!("ok       {plugin} (runner kubernetes (image ")),
            "{text}"
        );
    }
}
