//! Least privilege, end to end, with real plugins (the Rust probe plugin and the Go go-plugin
//! probe plugin, v1.8 and Debian's v1.0.1): each plugin reads only the secrets it requested
//! and was granted; it cannot read another plugin's secrets or directories, the host's secret
//! source, the host's environment (directly or through `/proc/<host>/environ`) or the host's
//! files.
//!
//! The host's environment must hold `HOST_DB_PASSWORD` from its start (`/proc/<pid>/environ`
//! shows the environment given at exec), so each test re-runs itself in a child test process
//! that has it.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use tether_broker::error::UseErrorKind;
use tether_broker::{Catalog, DirValueSource, Grants, Lease, Supervisor};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};
use tether_tests::peers::{self, GoPlugin};
use tether_tests::world::{PluginSpec, World};

const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");
const HOST_SECRET_VAR: &str = "HOST_DB_PASSWORD";
const HOST_SECRET: &str = "host-db-password-3f9a1c";

/// Runs `test` in a child test process whose environment holds `HOST_DB_PASSWORD` from exec;
/// returns `true` in that child (the caller then runs the test body).
fn in_host_with_password(test: &str) -> bool {
    if std::env::var(HOST_SECRET_VAR).as_deref() == Ok(HOST_SECRET) {
        return true;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(HOST_SECRET_VAR, HOST_SECRET)
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{test} failed in the child host:\n{text}"
    );
    assert!(text.contains("1 passed"), "{test} did not run:\n{text}");
    false
}

async fn get(lease: &Lease, key: &str) -> Result<Vec<u8>, tonic::Status> {
    KvClient::new(lease.channel())
        .get(GetRequest { key: key.into() })
        .await
        .map(|r| r.into_inner().value)
}

async fn put(lease: &Lease, key: &str, value: &[u8]) -> Result<(), tonic::Status> {
    KvClient::new(lease.channel())
        .put(PutRequest {
            key: key.into(),
            value: value.to_vec(),
        })
        .await
        .map(|_| ())
}

#[track_caller]
fn assert_denied(result: Result<Vec<u8>, tonic::Status>, what: &str) {
    match result {
        Err(status) => assert!(
            refused(&status),
            "{what}: expected permission denied (or, in a world, not there), got {status:?}"
        ),
        Ok(value) => panic!(
            "{what}: the plugin could read it: {:?}",
            String::from_utf8_lossy(&value)
        ),
    }
}

/// A refusal: Landlock's (permission denied), or in a plugin's world the path is not there or
/// is on a read-only mount.
fn refused(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::PermissionDenied | tonic::Code::NotFound
    ) || status.message().contains("Read-only file system")
}

fn supervisor(world: &World, grants: Grants) -> Supervisor {
    let catalog = Catalog::load_dir(&world.catalog()).unwrap();
    assert!(catalog.errors().is_empty(), "{:?}", catalog.errors());
    let (delivery, run) = (world.delivery(), world.run());
    Supervisor::builder(catalog, world.state())
        .grants(grants)
        .secrets(DirValueSource::new(world.secrets()))
        .customize(move |b| b.delivery_dir(&delivery).private_dir_base(&run))
        .build()
}

/// The whole least-privilege check for plugins running `binary`; `sdk` when it is the Rust
/// probe (which reads secrets through `tether_sdk::secrets`).
async fn plugin_a_reads_only_what_it_was_granted(binary: &Path) {
    let world = World::new();
    world.add_secret("a", "alpha-secret");
    world.add_secret("b", "bravo-secret");
    world.add_plugin(&PluginSpec::new("a", binary).secrets(&["a"]));
    world.add_plugin(&PluginSpec::new("b", binary).secrets(&["b"]));
    let grants = Grants::new().secret("a", "a").secret("b", "b");
    let supervisor = supervisor(&world, grants);

    let a = supervisor.acquire("a").await.unwrap();
    let b = supervisor.acquire("b").await.unwrap();

    // A reads its own secret, through TETHER_SECRETS_DIR.
    assert_eq!(get(&a, "secret:a").await.unwrap(), b"alpha-secret");
    let a_secrets =
        PathBuf::from(String::from_utf8(get(&a, "env:TETHER_SECRETS_DIR").await.unwrap()).unwrap());
    // Where the host made them, or in a world, under its own read-only /run/tether.
    assert!(
        a_secrets.starts_with(world.delivery()) || a_secrets.starts_with("/run/tether"),
        "{}",
        a_secrets.display()
    );
    // Positive control: A may write in its own state directory.
    put(
        &a,
        &format!("write:{}", world.state().join("a/own").display()),
        b"x",
    )
    .await
    .unwrap();

    // B's secret and directories.
    let b_secrets =
        PathBuf::from(String::from_utf8(get(&b, "env:TETHER_SECRETS_DIR").await.unwrap()).unwrap());
    // The host sees B's file there unless it is in B's world.
    if b_secrets.starts_with(world.delivery()) {
        assert_eq!(std::fs::read(b_secrets.join("b")).unwrap(), b"bravo-secret");
    }
    assert_ne!(a_secrets, b_secrets);
    assert_denied(
        get(&a, &format!("read:{}", b_secrets.join("b").display())).await,
        "B's secret",
    );
    assert_denied(
        get(&a, &format!("list:{}", b_secrets.display())).await,
        "B's secrets directory",
    );
    assert_denied(
        get(&a, &format!("list:{}", world.delivery().display())).await,
        "all delivery directories",
    );
    put(
        &b,
        &format!("write:{}", world.state().join("b/notes").display()),
        b"b's notes",
    )
    .await
    .unwrap();
    assert_denied(
        get(
            &a,
            &format!("read:{}", world.state().join("b/notes").display()),
        )
        .await,
        "B's state directory",
    );

    // The host's secret source, including A's own secret there.
    assert_denied(
        get(&a, &format!("read:{}", world.secrets().join("b").display())).await,
        "the host's source of secret b",
    );
    assert_denied(
        get(&a, &format!("read:{}", world.secrets().join("a").display())).await,
        "the host's source of secret a",
    );

    // The host's environment: not inherited, and /proc/<host>/environ is refused (it exists and
    // holds the password: the test itself can read it).
    let environ = format!("/proc/{}/environ", std::process::id());
    let host_environ = std::fs::read(&environ).unwrap();
    assert!(String::from_utf8_lossy(&host_environ).contains(HOST_SECRET));
    assert_denied(
        get(&a, &format!("read:{environ}")).await,
        "the host's /proc environ",
    );
    let missing = get(&a, &format!("env:{HOST_SECRET_VAR}"))
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);
    let all = String::from_utf8(get(&a, "envall:").await.unwrap()).unwrap();
    assert!(!all.contains(HOST_SECRET), "{all}");
    assert!(
        !all.contains("bravo-secret") && !all.contains("alpha-secret"),
        "{all}"
    );

    // The host's files.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    assert_denied(
        get(&a, &format!("read:{}", manifest.display())).await,
        "a host file",
    );

    drop((a, b));
    supervisor.shutdown().await;
    assert_eq!(World::leftovers(&world.delivery()), Vec::<String>::new());
    assert_eq!(World::leftovers(&world.run()), Vec::<String>::new());
}

#[tokio::test]
async fn a_rust_plugin_reads_its_granted_secret_and_nothing_of_b_or_the_host() {
    if in_host_with_password("a_rust_plugin_reads_its_granted_secret_and_nothing_of_b_or_the_host")
    {
        plugin_a_reads_only_what_it_was_granted(Path::new(PROBE)).await;
    }
}

#[tokio::test]
async fn a_go_plugin_v1_8_reads_its_granted_secret_and_nothing_of_b_or_the_host() {
    let test = "a_go_plugin_v1_8_reads_its_granted_secret_and_nothing_of_b_or_the_host";
    let Some(go) = peers::go_or_skip(GoPlugin::V18, test) else {
        return;
    };
    if in_host_with_password(test) {
        plugin_a_reads_only_what_it_was_granted(&go.probe).await;
    }
}

#[tokio::test]
async fn a_go_plugin_v1_0_1_reads_its_granted_secret_and_nothing_of_b_or_the_host() {
    let test = "a_go_plugin_v1_0_1_reads_its_granted_secret_and_nothing_of_b_or_the_host";
    let Some(go) = peers::go_or_skip(GoPlugin::V101, test) else {
        return;
    };
    if in_host_with_password(test) {
        plugin_a_reads_only_what_it_was_granted(&go.probe).await;
    }
}

#[tokio::test]
async fn a_request_that_is_not_granted_stops_only_that_plugin() {
    let world = World::new();
    world.add_secret("a", "alpha");
    world.add_secret("b", "bravo");
    world.add_plugin(&PluginSpec::new("a", PROBE).secrets(&["a"]));
    world.add_plugin(&PluginSpec::new("greedy", PROBE).secrets(&["a", "b"]));
    world.add_plugin(&PluginSpec::new("unsourced", PROBE).secrets(&["c"]));
    let grants = Grants::new()
        .secret("a", "a")
        .secret("greedy", "a")
        .secret("unsourced", "c");
    let supervisor = supervisor(&world, grants);

    let err = supervisor.acquire("greedy").await.unwrap_err();
    let UseErrorKind::NotGranted(refused) = err.kind() else {
        panic!("expected NotGranted, got {err}");
    };
    assert_eq!(
        (refused.plugin.as_str(), &refused.request),
        (
            "greedy",
            &tether_broker::catalog::Request::Secret("b".into())
        )
    );
    assert!(
        err.to_string()
            .starts_with("plugin `greedy` requests `secrets = [\"b\"]`"),
        "{err}"
    );
    assert_eq!(supervisor.starts("greedy"), 0);

    // Granted, but the host's source has no such value.
    let err = supervisor.acquire("unsourced").await.unwrap_err();
    assert!(
        err.plugin() == "unsourced"
            && matches!(err.kind(), UseErrorKind::MissingValue { name, .. } if name == "c"),
        "{err}"
    );
    assert_eq!(supervisor.starts("unsourced"), 0);

    let a = supervisor.acquire("a").await.unwrap();
    assert_eq!(get(&a, "secret:a").await.unwrap(), b"alpha");
    // The SDK's error for a secret that was not delivered says what to do.
    let status = get(&a, "secret:b").await.unwrap_err();
    assert!(
        status.message().contains(
            "secret \"b\" is not available to this plugin: the host delivered other secrets, not this one"
        ),
        "{status:?}"
    );
    drop(a);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn config_files_are_delivered_read_only_next_to_secrets() {
    let world = World::new();
    world.add_config("settings.json", "{\"mode\":\"fast\"}");
    world.add_plugin(&PluginSpec::new("a", PROBE).config(&["settings.json"]));
    let catalog = Catalog::load_dir(&world.catalog()).unwrap();
    let delivery = world.delivery();
    let supervisor = Supervisor::builder(catalog, world.state())
        .grants(Grants::new().config("a", "settings.json"))
        .config_source(DirValueSource::new(world.config()))
        .customize(move |b| b.delivery_dir(&delivery))
        .build();
    let a = supervisor.acquire("a").await.unwrap();
    assert_eq!(
        get(&a, "config:settings.json").await.unwrap(),
        b"{\"mode\":\"fast\"}"
    );
    let dir = String::from_utf8(get(&a, "env:TETHER_CONFIG_DIR").await.unwrap()).unwrap();
    let write = put(&a, &format!("write:{dir}/settings.json"), b"changed")
        .await
        .unwrap_err();
    assert!(refused(&write), "{write:?}");
    let secrets = get(&a, "env:TETHER_SECRETS_DIR").await.unwrap_err();
    assert_eq!(
        secrets.code(),
        tonic::Code::NotFound,
        "no secrets requested, no variable"
    );
    drop(a);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_tampered_binary_is_refused_with_both_hashes() {
    let world = World::new();
    let hash = tether_broker::confine::sha256_file(Path::new(PROBE)).unwrap();
    world.add_plugin(
        &PluginSpec::new("good", PROBE)
            .copied()
            .extra(&format!("sha256 = \"{hash}\"")),
    );
    world.add_plugin(
        &PluginSpec::new("bad", PROBE)
            .copied()
            .extra(&format!("sha256 = \"{hash}\"")),
    );
    let bad = world.catalog().join("bin/bad");
    let mut bytes = std::fs::read(&bad).unwrap();
    bytes.push(0);
    std::fs::write(&bad, &bytes).unwrap();
    let supervisor = supervisor(&world, Grants::new());

    let good = supervisor.acquire("good").await.unwrap();
    assert!(!get(&good, "pid:").await.unwrap().is_empty());
    drop(good);

    let err = supervisor.acquire("bad").await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&hash), "{text}");
    assert!(
        text.contains(&tether_broker::confine::sha256_file(&bad).unwrap()),
        "{text}"
    );
    assert!(
        text.contains("plugin `bad` is refused before start"),
        "{text}"
    );
    assert_eq!(supervisor.starts("bad"), 0);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_symlinked_binary_with_a_hash_is_refused() {
    let world = World::new();
    let hash = tether_broker::confine::sha256_file(Path::new(PROBE)).unwrap();
    // Not copied: `bin/linked` is a symbolic link to the real binary.
    world.add_plugin(&PluginSpec::new("linked", PROBE).extra(&format!("sha256 = \"{hash}\"")));
    let supervisor = supervisor(&world, Grants::new());
    let err = supervisor.acquire("linked").await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("without following symbolic links"), "{text}");
    assert_eq!(supervisor.starts("linked"), 0);
}

#[tokio::test]
async fn a_plugin_cannot_write_outside_its_own_directories() {
    let world = World::new();
    world.add_plugin(&PluginSpec::new("a", PROBE));
    let supervisor = supervisor(&world, Grants::new());
    let a = supervisor.acquire("a").await.unwrap();
    let outside = world.secrets().join("planted");
    let err = put(&a, &format!("write:{}", outside.display()), b"x")
        .await
        .unwrap_err();
    assert!(refused(&err), "{err:?}");
    assert!(!outside.exists());
    drop(a);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_descriptor_the_host_leaks_is_closed_before_the_plugin_runs() {
    use std::os::fd::AsRawFd as _;
    let world = World::new();
    world.add_plugin(&PluginSpec::new("a", PROBE));
    let marker = world.state().join("leak-marker");
    let file = std::fs::File::create(&marker).unwrap();
    // dup() makes a descriptor without close-on-exec: a plain spawn would pass it on.
    // SAFETY: dup of a valid descriptor; the copy is closed below.
    let leaked = unsafe { libc::dup(file.as_raw_fd()) };
    assert!(leaked > 2);
    let supervisor = supervisor(&world, Grants::new());
    let a = supervisor.acquire("a").await.unwrap();
    let fds: Vec<PathBuf> = std::fs::read_dir(format!("/proc/{}/fd", a.pid()))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .collect();
    // SAFETY: closes the descriptor dup'ed above.
    unsafe { libc::close(leaked) };
    assert!(!fds.is_empty());
    assert!(
        !fds.contains(&marker),
        "the plugin inherited {}: {fds:?}",
        marker.display()
    );
    drop(a);
    supervisor.shutdown().await;
}
