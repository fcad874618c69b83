//! The operator's policy gates every loosening a manifest asks for (issue 11 item 9): without
//! the grant the plugin does not start and the error names the grants line to add; with it the
//! plugin starts and the loosening is in force. Through the library's `Supervisor` and through
//! the real `tether` binary (`call --catalog`, `check`, `list`).

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tether_broker::catalog::Request;
use tether_broker::error::UseErrorKind;
use tether_broker::{Catalog, Grants, Lease, Supervisor};
use tether_examples::kv::GetRequest;
use tether_examples::kv::kv_client::KvClient;
use tether_tests::bins;
use tether_tests::peers::repo_root;
use tether_tests::world::{PluginSpec, World};

const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");
const EXIT_START: i32 = 3;

/// A directory outside everything a plugin is allowed by default, with one file in it.
struct Outside {
    dir: tempfile::TempDir,
}

impl Outside {
    fn new() -> Self {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        // Readable by any user: what is checked is the confinement, not the plugin's id (a
        // root host's plugin runs as an unprivileged one, and tempdir makes a 0700 directory).
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join("data.txt"), "outside-data").unwrap();
        Self { dir }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    fn file(&self) -> String {
        self.path().join("data.txt").display().to_string()
    }
}

fn supervisor(world: &World, grants: Grants) -> Supervisor {
    let catalog = Catalog::load_dir(&world.catalog()).unwrap();
    assert!(catalog.errors().is_empty(), "{:?}", catalog.errors());
    let (delivery, run) = (world.delivery(), world.run());
    Supervisor::builder(catalog, world.state())
        .grants(grants)
        .customize(move |b| b.delivery_dir(&delivery).private_dir_base(&run))
        .build()
}

async fn get(lease: &Lease, key: &str) -> Result<Vec<u8>, tonic::Status> {
    KvClient::new(lease.channel())
        .get(GetRequest { key: key.into() })
        .await
        .map(|r| r.into_inner().value)
}

/// The grants file `text` written beside the world's catalog, parsed.
fn grants_file(world: &World, text: &str) -> (PathBuf, Grants) {
    let file = world.catalog().parent().unwrap().join("grants.toml");
    std::fs::write(&file, text).unwrap();
    let grants = Grants::load(&file).unwrap();
    (file, grants)
}

/// Each loosening, as the manifest asks for it, and the grants line that allows it.
fn loosenings(outside: &Outside) -> Vec<(String, String)> {
    let dir = outside.path().display().to_string();
    vec![
        ("sandbox = \"off\"".into(), "sandbox = \"off\"".into()),
        (
            "sandbox = \"best-effort\"".into(),
            "sandbox = \"best-effort\"".into(),
        ),
        ("network = \"host\"".into(), "network = \"host\"".into()),
        ("seccomp = \"off\"".into(), "seccomp = \"off\"".into()),
        (
            "env_allow = [\"HOME\"]".into(),
            "env_allow = [\"HOME\"]".into(),
        ),
        (
            format!("sandbox_allow_read = [\"{dir}\"]"),
            format!("sandbox_allow_read = [\"{dir}\"]"),
        ),
        (
            format!("sandbox_allow_exec = [\"{dir}\"]"),
            format!("sandbox_allow_exec = [\"{dir}\"]"),
        ),
    ]
}

#[tokio::test]
async fn each_loosening_without_its_grant_does_not_start_and_names_the_grants_line_to_add() {
    let outside = Outside::new();
    for (asked, line) in loosenings(&outside) {
        let world = World::new();
        world.add_plugin(&PluginSpec::new("p", PROBE).extra(&asked));
        let (file, grants) = grants_file(&world, "[plugins.other]\nnetwork = \"host\"\n");
        let supervisor = supervisor(&world, grants);
        let err = supervisor.acquire("p").await.unwrap_err();
        let UseErrorKind::NotGranted(refused) = err.kind() else {
            panic!("{asked}: expected NotGranted, got {err}");
        };
        assert_eq!(refused.request.grants_line(), line, "{asked}");
        let add = format!("add `{line}` under `[plugins.p]` in {}", file.display());
        assert!(err.to_string().contains(&add), "{asked}: {err}");
        assert_eq!(supervisor.starts("p"), 0, "{asked}: it must not start");
    }
}

#[tokio::test]
async fn each_loosening_with_its_grant_starts_and_is_in_force() {
    let outside = Outside::new();
    for (asked, line) in loosenings(&outside) {
        let world = World::new();
        world.add_plugin(&PluginSpec::new("p", PROBE).extra(&asked));
        let (_, grants) = grants_file(&world, &format!("[plugins.p]\n{line}\n"));
        let supervisor = supervisor(&world, grants);
        let lease = supervisor
            .acquire("p")
            .await
            .unwrap_or_else(|e| panic!("{asked}: {e}"));
        let read = get(&lease, &format!("read:{}", outside.file())).await;
        let home = get(&lease, "env:HOME").await;
        match asked.split(' ').next().unwrap() {
            // The file outside is readable only when the grant opened it.
            "sandbox" if asked.contains("off") => assert_eq!(read.unwrap(), b"outside-data"),
            "sandbox_allow_read" | "sandbox_allow_exec" => {
                assert_eq!(read.unwrap(), b"outside-data", "{asked}");
            }
            "env_allow" => {
                if let Ok(expected) = std::env::var("HOME") {
                    assert_eq!(home.unwrap(), expected.as_bytes());
                }
            }
            _ => {
                // Landlock's refusal, or in a world of its own the file is not there.
                let code = read.unwrap_err().code();
                assert!(
                    matches!(code, tonic::Code::PermissionDenied | tonic::Code::NotFound),
                    "{asked}: still confined: {code:?}"
                );
                assert_eq!(home.unwrap_err().code(), tonic::Code::NotFound, "{asked}");
            }
        }
        drop(lease);
        supervisor.shutdown().await;
    }
}

#[tokio::test]
async fn a_granted_directory_does_not_cover_a_sibling_or_a_climb_out_of_it() {
    let outside = Outside::new();
    let granted = outside.path().join("granted");
    std::fs::create_dir(&granted).unwrap();
    let world = World::new();
    let climb = format!("{}/../", granted.display());
    world.add_plugin(
        &PluginSpec::new("p", PROBE).extra(&format!("sandbox_allow_read = [\"{climb}\"]")),
    );
    let grants = Grants::new().sandbox_allow_read("p", &granted);
    let err = supervisor(&world, grants).acquire("p").await.unwrap_err();
    assert!(
        matches!(err.kind(), UseErrorKind::NotGranted(r) if matches!(r.request, Request::SandboxAllowRead(_))),
        "{err}"
    );
}

fn tether(work: &Path, args: &[&str]) -> Output {
    Command::new(bins::TETHER.path())
        .args(args)
        .current_dir(work)
        .env_remove("TETHER_CATALOG")
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_tether_command_refuses_an_ungranted_loosening_and_runs_a_granted_one() {
    let outside = Outside::new();
    let dir = outside.path().display().to_string();
    let world = World::new();
    world.add_plugin(&PluginSpec::new("p", PROBE).extra(&format!(
        "network = \"host\"\nsandbox_allow_read = [\"{dir}\"]"
    )));
    let catalog = world.catalog().display().to_string();
    let proto = repo_root().join("examples/proto/kv.proto");
    let proto = proto.to_str().unwrap();
    let key = format!(r#"{{"key":"read:{}"}}"#, outside.file());
    let call = |grants: &str| {
        let file = world.catalog().parent().unwrap().join("grants.toml");
        std::fs::write(&file, grants).unwrap();
        let call = [
            "call",
            "--catalog",
            &catalog,
            "p",
            "--proto",
            proto,
            "proto.KV/Get",
            &key,
        ];
        let check = tether(world.state().as_path(), &["check", "--catalog", &catalog]);
        (file, tether(world.state().as_path(), &call), check)
    };

    let (file, out, check) = call("");
    assert_eq!(out.status.code(), Some(EXIT_START), "{}", text(&out));
    let add = format!(
        "add `network = \"host\"` under `[plugins.p]` in {}",
        file.display()
    );
    assert!(text(&out).contains(&add), "{}", text(&out));
    // `check` lists both refusals and marks them among the privileges.
    assert!(!check.status.success());
    let report = text(&check);
    assert!(report.contains(&add), "{report}");
    assert!(
        report.contains(&format!("add `sandbox_allow_read = [\"{dir}\"]`")),
        "{report}"
    );
    assert!(
        report.contains("network: host (NOT GRANTED: does not start)"),
        "{report}"
    );

    let (_, out, check) = call(&format!(
        "[plugins.p]\nnetwork = \"host\"\nsandbox_allow_read = [\"{dir}\"]\n"
    ));
    assert!(out.status.success(), "{}", text(&out));
    // "outside-data", base64.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"value\":\"b3V0c2lkZS1kYXRh\"}\n"
    );
    assert!(check.status.success(), "{}", text(&check));
    let report = text(&check);
    assert!(report.contains("network: host;"), "{report}");
    assert!(report.contains(&format!("allow-read: {dir};")), "{report}");

    let list = tether(world.state().as_path(), &["list", "--catalog", &catalog]);
    assert!(list.status.success(), "{}", text(&list));
    let listed = text(&list);
    for fact in [
        "secrets: none",
        "network: host",
        "sandbox: enforce",
        "env: PATH",
        "seccomp: default",
    ] {
        assert!(listed.contains(fact), "{fact}: {listed}");
    }
}

#[test]
fn the_demo_runs_with_the_notifiers_network_granted_and_refuses_it_without() {
    let demo = repo_root().join("examples/agent");
    let catalog = demo.join("catalog");
    let catalog = catalog.to_str().unwrap();
    let work = tempfile::tempdir().unwrap();
    let out = tether(work.path(), &["run", "--catalog", catalog]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("announce (notifier): sent"),
        "{}",
        text(&out)
    );

    let stripped = work.path().join("grants.toml");
    let policy = std::fs::read_to_string(demo.join("grants.toml")).unwrap();
    std::fs::write(&stripped, policy.replace("network = \"host\"\n", "")).unwrap();
    let grants = stripped.to_str().unwrap();
    let out = tether(
        work.path(),
        &["run", "--catalog", catalog, "--grants", grants],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("add `network = \"host\"` under `[plugins.notifier]`"),
        "{}",
        text(&out)
    );
}
