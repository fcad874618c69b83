//! What only the operator decides (issue 22 item 3 and the namespaces policy of item 1): the
//! user a catalog plugin runs as (`run_as`, granted in the grants file like every loosening,
//! root only with `allow_root`), whether plugins must have a world of their own (the grants
//! file's top-level `namespaces`), and that a root host's plugin without a world still never
//! holds the host's uid 0. Real probe plugins started from a catalog through the library's
//! `Supervisor` and the `tether` command; the hosts that cannot make worlds run under
//! `no-userns`, a system-call filter refusing user namespaces as a container runtime's does.
//!
//! Each test runs for a root and a non-root host (`host_user::root_and_unprivileged`).

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use tether_broker::catalog::Request;
use tether_broker::error::{StartErrorKind, UseErrorKind};
use tether_broker::{Grants, Lease};
use tether_examples::kv::GetRequest;
use tether_examples::kv::kv_client::KvClient;
use tether_tests::bins;
use tether_tests::host_user::root_and_unprivileged;
use tether_tests::peers::repo_root;
use tether_tests::world::{PluginSpec, World};

const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");
const NO_USERNS: &str = env!("CARGO_BIN_EXE_no-userns");
/// `tether`'s exit status when a plugin does not start.
const EXIT_START: i32 = 3;
/// `tether`'s exit status for a bad catalog or grants file.
const EXIT_INPUT: i32 = 4;
/// The ids the `run_as` tests grant: neither the host's nor the default plugin ids, uid and
/// gid different so that a swap shows.
const GRANTED: (u32, u32) = (4242, 4343);

/// A world whose directories any user may traverse: a root host's plugin without a world runs
/// as an unprivileged id, which must reach its program and state directory (in a world,
/// idmapped binds show root's read-only paths as its own).
fn open_world() -> World {
    let world = World::new();
    let root = world.catalog().parent().unwrap().to_owned();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    world
}

fn grants_file(world: &World, text: &str) -> (PathBuf, Grants) {
    let file = world.catalog().parent().unwrap().join("grants.toml");
    std::fs::write(&file, text).unwrap();
    (file.clone(), Grants::load(&file).unwrap())
}

async fn get(lease: &Lease, key: &str) -> String {
    let value = KvClient::new(lease.channel())
        .get(GetRequest { key: key.into() })
        .await
        .unwrap_or_else(|status| panic!("{key}: {status:?}"))
        .into_inner()
        .value;
    String::from_utf8(value).unwrap()
}

/// The real, effective, saved and file-system uids and gids of host process `pid`, from the
/// host's `/proc`.
fn host_ids(pid: u32) -> (Vec<u32>, Vec<u32>) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let ids = |label: &str| -> Vec<u32> {
        let line = status.lines().find(|l| l.starts_with(label)).unwrap();
        line[label.len()..]
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect()
    };
    (ids("Uid:"), ids("Gid:"))
}

fn host_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

#[tokio::test]
async fn run_as_from_the_catalog_takes_effect_only_when_the_grants_file_allows_it() {
    let run = root_and_unprivileged(
        "run_as_from_the_catalog_takes_effect_only_when_the_grants_file_allows_it",
    );
    let world = open_world();
    let manifest = world.add_plugin(&PluginSpec::new("p", PROBE).extra("run_as = \"4242:4343\""));
    // Not granted: located at the manifest's line, naming the grants line to add.
    let (file, grants) = grants_file(&world, "[plugins.p]\nsecrets = []\n");
    let supervisor = world.supervisor(grants).build();
    let err = supervisor.acquire("p").await.unwrap_err();
    let UseErrorKind::NotGranted(refused) = err.kind() else {
        panic!("expected NotGranted, got {err}");
    };
    assert_eq!(refused.request, Request::RunAs(GRANTED.0, GRANTED.1));
    let text = err.to_string();
    let at = format!("in {}:5,", manifest.display());
    assert!(text.contains(&at), "{at}: {text}");
    let add = format!(
        "add `run_as = \"4242:4343\"` under `[plugins.p]` in {}",
        file.display()
    );
    assert!(text.contains(&add), "{text}");
    assert_eq!(supervisor.starts("p"), 0);
    supervisor.shutdown().await;

    // Granted: the plugin's real ids are the granted ones (root host), or it does not start,
    // located at the grants line (a non-root host cannot switch users), leaving nothing.
    let (file, grants) = grants_file(&world, "[plugins.p]\nrun_as = \"4242:4343\"\n");
    let supervisor = world.supervisor(grants).build();
    match supervisor.acquire("p").await {
        Ok(lease) => {
            assert!(run.host.is_root(), "a non-root host switched users");
            assert_eq!(get(&lease, "ids").await, "4242 4343");
            let (uids, gids) = host_ids(lease.pid());
            assert_eq!((uids, gids), (vec![4242; 4], vec![4343; 4]));
            drop(lease);
        }
        Err(err) => {
            assert!(!run.host.is_root(), "{err}");
            let UseErrorKind::Start(start) = err.kind() else {
                panic!("expected a start error, got {err}");
            };
            assert!(
                matches!(start.kind(), StartErrorKind::RunAsNeedsRoot { .. }),
                "{err}"
            );
            let text = err.to_string();
            let at = format!("(`run_as` at {}:2)", file.display());
            assert!(text.contains(&at), "{at}: {text}");
            assert!(
                text.contains("only root can start a process as another user"),
                "{text}"
            );
            assert!(text.contains("phase: prepare"), "{text}");
            assert_eq!(World::leftovers(&world.run()), Vec::<String>::new());
            assert_eq!(World::leftovers(&world.delivery()), Vec::<String>::new());
        }
    }
    supervisor.shutdown().await;
}

#[tokio::test]
async fn the_operators_run_as_applies_to_a_plugin_whose_manifest_does_not_ask() {
    let run = root_and_unprivileged(
        "the_operators_run_as_applies_to_a_plugin_whose_manifest_does_not_ask",
    );
    if !run.host.is_root() {
        return; // A non-root host's refusal: the test above.
    }
    let world = open_world();
    world.add_plugin(&PluginSpec::new("p", PROBE));
    let (_, grants) = grants_file(&world, "[plugins.p]\nrun_as = \"4242:4343\"\n");
    let supervisor = world.supervisor(grants).build();
    let lease = supervisor.acquire("p").await.unwrap();
    assert_eq!(get(&lease, "ids").await, "4242 4343");
    assert_eq!(host_ids(lease.pid()).0, vec![4242; 4]);
    drop(lease);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn without_a_world_a_root_hosts_plugin_runs_as_an_unprivileged_id_unless_allow_root() {
    let _run = root_and_unprivileged(
        "without_a_world_a_root_hosts_plugin_runs_as_an_unprivileged_id_unless_allow_root",
    );
    let host = host_uid();
    for (grants, root_allowed) in [
        ("namespaces = \"off\"\n", false),
        (
            "namespaces = \"off\"\n[plugins.p]\nallow_root = true\n",
            true,
        ),
    ] {
        let world = open_world();
        world.add_plugin(&PluginSpec::new("p", PROBE));
        let (_, grants) = grants_file(&world, grants);
        let supervisor = world.supervisor(grants).build();
        let lease = supervisor.acquire("p").await.unwrap();
        assert_eq!(
            lease.world_mechanism(),
            tether_broker::confine::WorldMechanism::Layers
        );
        let (uids, _) = host_ids(lease.pid());
        let uid: u32 = get(&lease, "ids")
            .await
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(uids, vec![uid; 4]);
        match (host, root_allowed) {
            (0, false) => assert_ne!(uid, 0, "a root host's plugin ran as root"),
            (0, true) => assert_eq!(uid, 0, "allow_root: the operator's policy says so"),
            _ => assert_eq!(uid, host, "a non-root host's plugin runs as the host"),
        }
        drop(lease);
        supervisor.shutdown().await;
    }
}

/// A catalog of one probe plugin `p` (manifest `extra`) and a grants file, for `tether`.
struct Site {
    world: World,
    /// The hosts' `TMPDIR`: their private and delivery directories are made below it.
    tmp: tempfile::TempDir,
}

impl Site {
    fn new(extra: &str, grants: &str) -> Self {
        let world = open_world();
        world.add_plugin(&PluginSpec::new("p", PROBE).extra(extra));
        // Written, not parsed: some tests give `tether` a grants file it must refuse.
        std::fs::write(
            world.catalog().parent().unwrap().join("grants.toml"),
            grants,
        )
        .unwrap();
        Self {
            world,
            tmp: tempfile::tempdir().unwrap(),
        }
    }

    /// `tether ARGS…`, under `no-userns` when `confined`.
    fn tether(&self, confined: bool, args: &[&str]) -> Output {
        let mut cmd = if confined {
            let mut cmd = Command::new(NO_USERNS);
            cmd.arg(bins::TETHER.path());
            cmd
        } else {
            Command::new(bins::TETHER.path())
        };
        cmd.args(args)
            .current_dir(self.world.state())
            .env_remove("TETHER_CATALOG")
            .env_remove("RUST_LOG")
            .env("TMPDIR", self.tmp.path())
            .output()
            .unwrap()
    }

    fn catalog(&self) -> String {
        self.world.catalog().display().to_string()
    }

    /// `tether [-v] call --catalog … p proto.KV/Get {"key": KEY}`.
    fn call(&self, confined: bool, key: &str) -> Output {
        let proto = repo_root().join("examples/proto/kv.proto");
        let request = serde_json::json!({ "key": key }).to_string();
        self.tether(
            confined,
            &[
                "-v",
                "call",
                "--catalog",
                &self.catalog(),
                "p",
                "--proto",
                proto.to_str().unwrap(),
                "proto.KV/Get",
                &request,
            ],
        )
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The value of a successful `tether call` of `proto.KV/Get`.
fn value(out: &Output) -> String {
    assert!(out.status.success(), "{}", text(out));
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(out)));
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(json["value"].as_str().unwrap())
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

#[test]
fn an_operator_requiring_namespaces_starts_no_plugin_where_no_world_can_be_made_and_leaves_nothing()
{
    let _run = root_and_unprivileged(
        "an_operator_requiring_namespaces_starts_no_plugin_where_no_world_can_be_made_and_leaves_nothing",
    );
    let site = Site::new("", "namespaces = \"required\"\n");
    // The control: this host makes worlds, and the plugin runs in one.
    let out = site.call(false, "pid");
    assert_ne!(value(&out), "", "{}", text(&out));
    assert!(text(&out).contains("world=namespaces"), "{}", text(&out));

    // Under the filter: a typed refusal naming the plugin, the phase and why.
    let out = site.call(true, "pid");
    let report = text(&out);
    assert_eq!(out.status.code(), Some(EXIT_START), "{report}");
    for part in [
        "plugin `p` cannot start (phase: prepare)",
        "namespaces are required",
        "cannot make a plugin's world",
    ] {
        assert!(report.contains(part), "{part}: {report}");
    }
    assert_eq!(
        World::leftovers(site.tmp.path()),
        Vec::<String>::new(),
        "{report}"
    );

    // `list` and `check` say so before anything is started.
    let catalog = site.catalog();
    let list = site.tether(true, &["list", "--catalog", &catalog]);
    let listed = text(&list);
    assert!(
        listed.contains("world: none: namespaces are required but this host cannot make them"),
        "{listed}"
    );
    let check = site.tether(true, &["check", "--catalog", &catalog]);
    assert!(!check.status.success(), "{}", text(&check));
    assert!(
        text(&check).contains(
            "plugin `p` does not start here: namespaces are required (by the operator's grants)"
        ),
        "{}",
        text(&check)
    );
    assert_eq!(World::leftovers(site.tmp.path()), Vec::<String>::new());

    // A manifest cannot turn the world off under the operator's `required`, even granted.
    let grants = "namespaces = \"required\"\n[plugins.p]\nnamespaces = \"off\"\n";
    let site = Site::new("namespaces = \"off\"", grants);
    let out = site.call(false, "pid");
    assert_eq!(out.status.code(), Some(EXIT_INPUT), "{}", text(&out));
    assert!(
        text(&out).contains("contradicts the top-level `namespaces = \"required\"`"),
        "{}",
        text(&out)
    );
    let site = Site::new("namespaces = \"off\"", "namespaces = \"required\"\n");
    let out = site.call(false, "pid");
    assert_eq!(out.status.code(), Some(EXIT_START), "{}", text(&out));
    assert!(
        text(&out).contains("which the operator's policy refuses for every plugin"),
        "{}",
        text(&out)
    );
}

#[test]
fn where_no_world_can_be_made_a_preferred_plugin_runs_with_the_layers_and_every_view_says_so() {
    let _run = root_and_unprivileged(
        "where_no_world_can_be_made_a_preferred_plugin_runs_with_the_layers_and_every_view_says_so",
    );
    let site = Site::new("", "");
    let out = site.call(true, "ids");
    let report = text(&out);
    let uid: u32 = value(&out).split(' ').next().unwrap().parse().unwrap();
    if host_uid() == 0 {
        assert_ne!(
            uid, 0,
            "a root host's plugin ran as root without a world: {report}"
        );
    } else {
        assert_eq!(uid, host_uid(), "{report}");
    }
    // The start log: the warning and the plugin's mechanism.
    assert!(
        report.contains("plugins run without namespaces on this host"),
        "{report}"
    );
    assert!(report.contains("world=layers"), "{report}");
    let catalog = site.catalog();
    for command in ["list", "check"] {
        let out = site.tether(true, &[command, "--catalog", &catalog]);
        assert!(out.status.success(), "{command}: {}", text(&out));
        assert!(
            text(&out).contains("world: layers only: no namespaces on this host ("),
            "{command}: {}",
            text(&out)
        );
    }
    // Without the filter the same catalog gets worlds.
    let out = site.tether(false, &["list", "--catalog", &catalog]);
    assert!(
        text(&out).contains("world: namespaces (user, mount"),
        "{}",
        text(&out)
    );
}

#[test]
fn tether_check_shows_the_operators_run_as_and_refuses_it_on_a_host_that_is_not_root() {
    let run = root_and_unprivileged(
        "tether_check_shows_the_operators_run_as_and_refuses_it_on_a_host_that_is_not_root",
    );
    let site = Site::new("", "[plugins.p]\nrun_as = \"4242:4343\"\n");
    let catalog = site.catalog();
    let check = site.tether(false, &["check", "--catalog", &catalog]);
    let report = text(&check);
    if run.host.is_root() {
        assert!(check.status.success(), "{report}");
        assert!(report.contains("uid: 4242:4343 (run_as)"), "{report}");
    } else {
        assert!(!check.status.success(), "{report}");
        let grants = Path::new(&catalog).parent().unwrap().join("grants.toml");
        let at = format!(
            "{}:2: plugin `p`: `run_as = \"4242:4343\"` needs a root host",
            grants.display()
        );
        assert!(report.contains(&at), "{at}: {report}");
    }
    // uid 0 without allow_root: the grants file is refused at its line.
    let site = Site::new("", "[plugins.p]\nrun_as = \"0:0\"\n");
    let check = site.tether(false, &["check", "--catalog", &site.catalog()]);
    assert!(!check.status.success());
    assert!(
        text(&check)
            .contains("grants.toml:2:10: key `plugins.p.run_as`: uid or gid 0 is the host's root"),
        "{}",
        text(&check)
    );
}

/// The system's Python and Node.js, readable by any user (a pyenv shim under `/root` is not).
const SYSTEM_PYTHON: &str = "/usr/bin/python3";
const SYSTEM_NODE: &str = "/usr/bin/node";

/// Starts a Python "plugin" (`node`: a Node.js one) whose start-up code (a `sitecustomize` on
/// its `PYTHONPATH`; a module in its `NODE_OPTIONS=--require`), run when the host asks the
/// interpreter where it lives, before the plugin starts, tries to make a file only root may
/// change world-writable and to write a file outside its grants, with `namespaces`; asserts
/// that the marker was not written and returns the file's mode afterwards, or `None` where the
/// question does not arise (a non-root host's query runs as the host's user, whose own files
/// are its to change; no system interpreter).
async fn mode_after_startup_code(
    namespaces: tether_broker::confine::NamespacesMode,
    node: bool,
) -> Option<u32> {
    let root = tether_tests::host_user::Host::current().is_root();
    let interpreter = if node { SYSTEM_NODE } else { SYSTEM_PYTHON };
    if !Path::new(interpreter).exists() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let target = dir.path().join("roots-file");
    std::fs::write(&target, "x").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    // Outside anything the plugin is granted: written, it would have escaped.
    let marker = dir.path().join("marker");
    let site = dir.path().join("site");
    std::fs::create_dir(&site).unwrap();
    let (target_text, marker_text) = (target.display().to_string(), marker.display().to_string());
    let builder = if node {
        let hook = site.join("hook.js");
        std::fs::write(
            &hook,
            format!(
                "const fs = require('fs');\ntry {{ fs.chmodSync({target_text:?}, 0o666); }} catch (e) {{}}\ntry {{ fs.writeFileSync({marker_text:?}, 'escaped'); }} catch (e) {{}}\n"
            ),
        )
        .unwrap();
        let script = dir.path().join("plugin.js");
        std::fs::write(&script, "process.exit(0);\n").unwrap();
        tether_broker::PluginClient::builder(SYSTEM_NODE)
            .arg(&script)
            .env("NODE_OPTIONS", format!("--require {}", hook.display()))
    } else {
        std::fs::write(
            site.join("sitecustomize.py"),
            format!(
                "import os\ntry:\n    os.chmod({target_text:?}, 0o666)\nexcept OSError:\n    pass\ntry:\n    open({marker_text:?}, 'w').write('escaped')\nexcept OSError:\n    pass\n"
            ),
        )
        .unwrap();
        let script = dir.path().join("plugin.py");
        std::fs::write(&script, "import sys\nsys.exit(0)\n").unwrap();
        tether_broker::PluginClient::builder(SYSTEM_PYTHON)
            .arg(&script)
            .env("PYTHONPATH", &site)
    };
    let started = builder
        .namespaces(namespaces)
        .handshake(tether_broker::HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .start()
        .await;
    // The script exits without a handshake: what matters is what its start-up code changed.
    assert!(started.is_err());
    assert!(
        !marker.exists(),
        "the plugin's start-up code wrote outside its grants"
    );
    root.then(|| std::fs::metadata(&target).unwrap().permissions().mode() & 0o7777)
}

#[tokio::test]
async fn without_a_world_a_root_hosts_interpreter_query_does_not_run_the_plugins_code_as_root() {
    let mode = mode_after_startup_code(tether_broker::confine::NamespacesMode::Off, false).await;
    assert!(
        mode.is_none_or(|m| m == 0o600),
        "the plugin's start-up code changed a file of root's: {mode:?} (decimal)"
    );
}

#[tokio::test]
async fn in_a_world_a_root_hosts_interpreter_query_does_not_run_the_plugins_code_as_root() {
    let mode =
        mode_after_startup_code(tether_broker::confine::NamespacesMode::Preferred, false).await;
    assert!(
        mode.is_none_or(|m| m == 0o600),
        "the plugin's start-up code changed a file of root's: {mode:?} (decimal)"
    );
}

#[tokio::test]
async fn in_a_world_a_root_hosts_node_query_does_not_run_the_plugins_require_hook_as_root() {
    let mode =
        mode_after_startup_code(tether_broker::confine::NamespacesMode::Preferred, true).await;
    assert!(
        mode.is_none_or(|m| m == 0o600),
        "the plugin's --require hook changed a file of root's: {mode:?} (decimal)"
    );
}

/// The module lookup after a `ModuleNotFoundError` (`find_module.py`, run by the plugin's own
/// interpreter) runs the interpreter's start-up code too: as the query, never as a root host's
/// uid 0. The `sitecustomize` acts only when the missing module's name is on its command line,
/// which only the lookup's is; the `NotInstalled` answer proves the lookup ran.
#[tokio::test]
async fn in_a_world_a_root_hosts_module_lookup_does_not_run_the_plugins_code_as_root() {
    let root = tether_tests::host_user::Host::current().is_root();
    if !Path::new(SYSTEM_PYTHON).exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let target = dir.path().join("roots-file");
    std::fs::write(&target, "x").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    let marker = dir.path().join("marker");
    let site = dir.path().join("site");
    std::fs::create_dir(&site).unwrap();
    let (target_text, marker_text) = (target.display().to_string(), marker.display().to_string());
    std::fs::write(
        site.join("sitecustomize.py"),
        format!(
            "import os, sys\nif 'tether_no_such_module' in sys.argv:\n    try:\n        os.chmod({target_text:?}, 0o666)\n    except OSError:\n        pass\n    try:\n        open({marker_text:?}, 'w').write('escaped')\n    except OSError:\n        pass\n"
        ),
    )
    .unwrap();
    let script = dir.path().join("plugin.py");
    std::fs::write(&script, "import tether_no_such_module\n").unwrap();
    let err = tether_broker::PluginClient::builder(SYSTEM_PYTHON)
        .arg(&script)
        .env("PYTHONPATH", &site)
        .handshake(tether_broker::HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .start()
        .await
        .expect_err("the plugin's import fails");
    assert!(
        matches!(err.kind(), StartErrorKind::NotInstalled { .. }),
        "the module lookup did not run: {err}"
    );
    assert!(
        !marker.exists(),
        "the lookup's start-up code wrote outside the plugin's grants"
    );
    if root {
        let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o7777;
        assert_eq!(
            mode, 0o600,
            "the lookup's start-up code changed a file of root's"
        );
    }
}
