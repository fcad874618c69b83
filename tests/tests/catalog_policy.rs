//! The catalog and the operator's policy as a hostile plugin author or a careless operator
//! would try them (issue 11): a second manifest claiming another plugin's name, symbolic links
//! in the secret source, and mistakes in the grants file. Each through the library and through
//! the real `tether` binary.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tether_host::{Catalog, DirSecretSource, Grants, Supervisor, UseError};
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
            .secrets(DirSecretSource::new(self.secrets()))
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
    let broker = site.supervisor(Grants::new().secret("probe-a", "alpha"));
    let err = broker.acquire("probe-a").await.unwrap_err();
    assert!(matches!(err, UseError::UnknownPlugin { .. }), "{err:?}");
    broker.shutdown().await;
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
