//! The catalog and the operator's policy as a hostile plugin author or a careless operator
//! would try them (issue 11): a second manifest claiming another plugin's name, symbolic links
//! in the secret source, and mistakes in the grants file. Each through the library and through
//! the real `tether` binary.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tether_broker::error::UseErrorKind;
use tether_broker::{Catalog, DirValueSource, Grants, Supervisor};
use tether_examples::kv::GetRequest;
use tether_examples::kv::kv_client::KvClient;
use tether_tests::bins;

const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");

/// Exit status of `tether` for bad input (a catalog with problems, an unusable plugin).
const EXIT_INPUT: i32 = 4;
/// Exit status of `tether` when the plugin could not be started.
const EXIT_START: i32 = 3;

/// An installation: `catalog/` (binaries linked in `catalog/bin/`), `secrets/`,
/// `grants.toml`.
struct Site {
    root: tempfile::TempDir,
}

impl Site {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        for dir in ["catalog/bin", "secrets", "state"] {
            std::fs::create_dir_all(root.path().join(dir)).unwrap();
        }
        Self { root }
    }

    fn path(&self) -> &Path {
        self.root.path()
    }

    fn catalog(&self) -> PathBuf {
        self.path().join("catalog")
    }

    fn secrets(&self) -> PathBuf {
        self.path().join("secrets")
    }

    /// Writes `catalog/FILE.toml` for plugin `name` running the probe as `bin/BIN`, requesting
    /// `secrets`; `head` goes first (comments, blank lines).
    fn manifest(&self, file: &str, head: &str, name: &str, bin: &str, secrets: &[&str]) {
        let link = self.catalog().join("bin").join(bin);
        if !link.exists() {
            std::os::unix::fs::symlink(PROBE, link).unwrap();
        }
        let secrets: Vec<String> = secrets.iter().map(|s| format!("{s:?}")).collect();
        let text = format!(
            "{head}name = \"{name}\"\ncommand = \"bin/{bin}\"\nsecrets = [{}]\n[handshake]\ncookie_key = \"BASIC_PLUGIN\"\ncookie_value = \"hello\"\n",
            secrets.join(", ")
        );
        std::fs::write(self.catalog().join(format!("{file}.toml")), text).unwrap();
    }

    fn grants(&self, text: &str) {
        std::fs::write(self.path().join("grants.toml"), text).unwrap();
    }

    fn tether(&self, args: &[&str]) -> Output {
        Command::new(bins::TETHER.path())
            .args(args)
            .current_dir(self.path())
            .output()
            .unwrap()
    }

    /// `tether call --catalog catalog PLUGIN proto.KV/Get {"key": KEY}`.
    fn call_get(&self, plugin: &str, key: &str) -> Output {
        let proto = tether_tests::peers::repo_root().join("examples/proto/kv.proto");
        let request = serde_json::json!({ "key": key }).to_string();
        self.tether(&[
            "call",
            "--proto",
            proto.to_str().unwrap(),
            "--catalog",
            "catalog",
            plugin,
            "proto.KV/Get",
            &request,
        ])
    }

    fn supervisor(&self, grants: Grants) -> Supervisor {
        let catalog = Catalog::load_dir(&self.catalog()).unwrap();
        Supervisor::builder(catalog, self.path().join("state"))
            .grants(grants)
            .secrets(DirValueSource::new(self.secrets()))
            .build()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

// Hole 5: a second manifest hijacks a name.

const ALPHA: &str = "alpha-secret-value";

/// `probe-a.toml` is the operator's; `0-addon.toml` (sorting first) claims the same name to
/// run its own binary and receive probe-a's secret.
fn hijack_site() -> Site {
    let site = Site::new();
    std::fs::write(site.secrets().join("alpha"), ALPHA).unwrap();
    site.manifest("probe-a", "", "probe-a", "probe-a", &["alpha"]);
    site.manifest("0-addon", "# an add-on\n\n", "probe-a", "addon", &["alpha"]);
    site.grants("[plugins.probe-a]\nsecrets = [\"alpha\"]\n");
    site
}

#[tokio::test]
async fn a_name_claimed_by_two_manifests_starts_neither_through_the_library() {
    let site = hijack_site();
    let catalog = Catalog::load_dir(&site.catalog()).unwrap();
    assert!(catalog.get("probe-a").is_none(), "a claimant was loaded");
    let located: Vec<String> = catalog.errors().iter().map(ToString::to_string).collect();
    assert_eq!(located.len(), 2, "{located:?}");
    assert!(
        located
            .iter()
            .any(|e| e.contains("0-addon.toml:3:8: key `name`")),
        "{located:?}"
    );
    assert!(
        located
            .iter()
            .any(|e| e.contains("probe-a.toml:1:8: key `name`")),
        "{located:?}"
    );
    let supervisor = site.supervisor(Grants::new().secret("probe-a", "alpha"));
    let err = supervisor.acquire("probe-a").await.unwrap_err();
    assert!(matches!(err.kind(), UseErrorKind::UnknownPlugin), "{err:?}");
    supervisor.shutdown().await;
}

#[test]
fn a_name_claimed_by_two_manifests_is_two_problems_for_tether_check_and_tether_call_starts_neither()
{
    let site = hijack_site();
    let check = site.tether(&["check", "--catalog", "catalog"]);
    let out = text(&check.stdout);
    assert_eq!(check.status.code(), Some(EXIT_INPUT), "{out}");
    let problems: Vec<&str> = out.lines().filter(|l| l.starts_with("problem:")).collect();
    assert_eq!(problems.len(), 2, "{out}");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("0-addon.toml:3:8: key `name`")),
        "{out}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("probe-a.toml:1:8: key `name`")),
        "{out}"
    );

    let call = site.call_get("probe-a", "secret:alpha");
    assert_eq!(
        call.status.code(),
        Some(EXIT_INPUT),
        "{}{}",
        text(&call.stdout),
        text(&call.stderr)
    );
    assert!(!text(&call.stdout).contains("YWxwaGEtc2VjcmV0LXZhbHVl"));
    let err = text(&call.stderr);
    assert!(
        err.contains("0-addon.toml") && err.contains("probe-a.toml"),
        "the error names both claimants: {err}"
    );
}

// Hole 6: a symbolic link in the secret source delivers any host file.

const HOST_FILE: &str = "host-file-that-is-nobodys-secret";

/// `secrets/bravo -> <outside>/host-file` (granted to `probe-b`), and `secrets/alpha` in a
/// real Kubernetes secret-volume layout (granted to `probe-a`); the outside directory is kept
/// alive by the returned guard.
fn link_site() -> (Site, tempfile::TempDir) {
    let site = Site::new();
    let outside = tempfile::tempdir().unwrap();
    let host_file = outside.path().join("host-file");
    std::fs::write(&host_file, HOST_FILE).unwrap();
    std::os::unix::fs::symlink(&host_file, site.secrets().join("bravo")).unwrap();
    let stamp = "..2026_12_01_10_00_00.123456789";
    std::fs::create_dir(site.secrets().join(stamp)).unwrap();
    std::fs::write(site.secrets().join(stamp).join("alpha"), ALPHA).unwrap();
    std::os::unix::fs::symlink(stamp, site.secrets().join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/alpha", site.secrets().join("alpha")).unwrap();
    site.manifest("probe-a", "", "probe-a", "probe-a", &["alpha"]);
    site.manifest("probe-b", "", "probe-b", "probe-b", &["bravo"]);
    site.grants(
        "[plugins.probe-a]\nsecrets = [\"alpha\"]\n\n[plugins.probe-b]\nsecrets = [\"bravo\"]\n",
    );
    (site, outside)
}

#[test]
fn a_secret_linked_out_of_the_source_is_not_delivered_by_tether_call_and_tether_check_reports_it() {
    let (site, _outside) = link_site();
    // The CLI names the source as it found it (`DIR/../secrets`, relative here).
    let link = "secrets/bravo";

    let call = site.call_get("probe-b", "secret:bravo");
    let (out, err) = (text(&call.stdout), text(&call.stderr));
    assert_eq!(call.status.code(), Some(EXIT_START), "{out}{err}");
    assert!(
        !out.contains("aG9zdC1maWxl"),
        "the host file was delivered: {out}"
    );
    assert!(
        err.contains(link) && err.contains("host-file"),
        "the error names the link and its target: {err}"
    );

    let check = site.tether(&["check", "--catalog", "catalog"]);
    let out = text(&check.stdout);
    assert_eq!(check.status.code(), Some(EXIT_INPUT), "{out}");
    let problems: Vec<&str> = out.lines().filter(|l| l.starts_with("problem:")).collect();
    assert_eq!(problems.len(), 1, "{out}");
    assert!(problems[0].contains(link), "{out}");
}

#[test]
fn a_secret_in_a_kubernetes_volume_layout_is_delivered_by_tether_call() {
    let (site, _outside) = link_site();
    let call = site.call_get("probe-a", "secret:alpha");
    assert!(call.status.success(), "{}", text(&call.stderr));
    let value = serde_json::from_slice::<serde_json::Value>(&call.stdout).unwrap();
    assert_eq!(value["value"], "YWxwaGEtc2VjcmV0LXZhbHVl", "{value}");
}

#[tokio::test]
async fn a_secret_linked_out_of_the_source_does_not_start_the_plugin_through_the_library() {
    let (site, _outside) = link_site();
    let supervisor = site.supervisor(
        Grants::new()
            .secret("probe-a", "alpha")
            .secret("probe-b", "bravo"),
    );
    let err = supervisor.acquire("probe-b").await.unwrap_err();
    assert!(matches!(err.kind(), UseErrorKind::Source { .. }), "{err:?}");
    let message = format!("{err}: {}", std::error::Error::source(&err).unwrap());
    assert!(
        message.contains("bravo") && message.contains("host-file"),
        "{message}"
    );
    drop(supervisor.acquire("probe-a").await.unwrap());
    supervisor.shutdown().await;
}

// Also found: grants-file errors were located by a text search and asked to fix the manifest.

#[test]
fn a_bad_grants_file_is_located_at_its_own_line_and_key_and_tether_asks_to_fix_the_grants_file() {
    let site = Site::new();
    std::fs::write(site.secrets().join("alpha"), ALPHA).unwrap();
    site.manifest("probe-a", "", "probe-a", "probe-a", &["alpha"]);
    site.grants(
        "# grants: `k v` is not a name\n[plugins.probe-a]\nsecrets = [\"alpha\"]\n\n[plugins.b]\nsecrets = [\"k v\"]\n",
    );
    for args in [
        &["check", "--catalog", "catalog"][..],
        &["list", "--catalog", "catalog"][..],
    ] {
        let out = site.tether(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(EXIT_INPUT), "{err}");
        assert!(
            err.contains("grants.toml:6:12: key `plugins.b.secrets`: `k v` is not a valid name"),
            "{args:?}: {err}"
        );
        assert!(err.contains("fix the grants file"), "{args:?}: {err}");
        assert!(!err.contains("fix the manifest"), "{args:?}: {err}");
    }
}

// Issue 25 item 5: a grants table for a plugin the catalog does not have.

/// Everything a `tracing` subscriber writes, kept.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_supervisor_warns_once_of_grants_for_a_plugin_not_in_the_catalog_with_its_place_and_likely_typo()
 {
    let site = Site::new();
    site.manifest("notifier", "", "notifier", "probe", &[]);
    site.grants("[plugins.notifier]\nsecrets = []\n\n[plugins.notifer]\nnetwork = \"host\"\n");
    let file = site.path().join("grants.toml");
    let grants = Grants::load(&file).unwrap();
    let captured = Captured::default();
    let subscriber = {
        let captured = captured.clone();
        tracing_subscriber::fmt()
            .with_writer(move || captured.clone())
            .with_ansi(false)
            .without_time()
            .finish()
    };
    let supervisor = tracing::subscriber::with_default(subscriber, || site.supervisor(grants));
    let logged = text(&captured.0.lock().unwrap());
    let warnings: Vec<&str> = logged.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warnings.len(), 1, "{logged}");
    let says = format!(
        "{}:4:10: grants for plugin `notifer`, which is not in the catalog; did you mean `notifier`?",
        file.display()
    );
    assert!(warnings[0].contains(&says), "no {says:?} in: {logged}");
    assert!(warnings[0].contains("plugin=notifer"), "{logged}");
    supervisor.shutdown().await;
}

// Issue 25 item 3: a fixed environment value a plugin needs (as a Vault plugin needs
// `VAULT_PLUGIN_AUTOMTLS_ENABLED`) is written in its manifest and takes effect only when the
// grants file names that very value: a variable such as `LD_PRELOAD` or `NODE_OPTIONS` changes
// what the plugin runs.

/// A site whose `probe-e` asks for `env = { PROBE_MODE = "fast" }`, with `grants`.
fn env_site(grants: &str) -> Site {
    let site = Site::new();
    site.manifest(
        "probe-e",
        "env = { PROBE_MODE = \"fast\" }\n",
        "probe-e",
        "probe-e",
        &[],
    );
    site.grants(grants);
    site
}

#[test]
fn a_manifests_env_value_reaches_the_plugin_only_when_the_grants_file_names_that_value() {
    let granted = env_site("[plugins.probe-e]\nenv = { PROBE_MODE = \"fast\" }\n");
    let call = granted.call_get("probe-e", "env:PROBE_MODE");
    assert!(call.status.success(), "{}", text(&call.stderr));
    let value = serde_json::from_slice::<serde_json::Value>(&call.stdout).unwrap();
    assert_eq!(value["value"], "ZmFzdA==", "`fast`, base64: {value}");

    let add = "add `env = { PROBE_MODE = \"fast\" }` under `[plugins.probe-e]`";
    // A table that has `env` already gets the entry set in it: a second `env` key would make
    // the grants file invalid TOML.
    let set = "set `PROBE_MODE = \"fast\"` in the `env` table at ";
    for (grants, advice) in [
        ("[plugins.probe-e]\n", add),
        ("[plugins.probe-e]\nenv = { PROBE_MODE = \"slow\" }\n", set),
        ("[plugins.probe-e]\nenv_allow = [\"PROBE_MODE\"]\n", add),
    ] {
        let site = env_site(grants);
        let call = site.call_get("probe-e", "env:PROBE_MODE");
        let (out, err) = (text(&call.stdout), text(&call.stderr));
        assert_eq!(call.status.code(), Some(EXIT_START), "{grants}: {out}{err}");
        assert!(
            !out.contains("ZmFzdA"),
            "{grants}: the value reached it: {out}"
        );
        assert!(
            err.contains("requests `env = { PROBE_MODE = \"fast\" }` in ")
                && err.contains("probe-e.toml:1"),
            "{grants}: {err}"
        );
        assert!(err.contains(advice), "{grants}: {err}");
        if advice == set {
            assert!(err.contains("grants.toml:2"), "{grants}: {err}");
        }
        let check = site.tether(&["check", "--catalog", "catalog"]);
        let out = text(&check.stdout);
        assert_eq!(check.status.code(), Some(EXIT_INPUT), "{grants}: {out}");
        assert!(out.contains("PROBE_MODE"), "{grants}: {out}");
    }
}

#[tokio::test]
async fn a_manifests_env_value_is_refused_by_the_library_without_its_grant_and_given_with_it() {
    let site = env_site("");
    let supervisor = site.supervisor(Grants::new().env("probe-e", "PROBE_MODE", "slow"));
    let err = supervisor.acquire("probe-e").await.unwrap_err();
    let refused = match err.kind() {
        UseErrorKind::NotGranted(refused) => refused,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        refused.request,
        tether_broker::catalog::Request::Env(Box::new(("PROBE_MODE".into(), "fast".into())))
    );
    supervisor.shutdown().await;

    let supervisor = site.supervisor(Grants::new().env("probe-e", "PROBE_MODE", "fast"));
    let lease = supervisor.acquire("probe-e").await.unwrap();
    let value = KvClient::new(lease.channel())
        .get(GetRequest {
            key: "env:PROBE_MODE".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .value;
    assert_eq!(value, b"fast");
    drop(lease);
    supervisor.shutdown().await;
}
