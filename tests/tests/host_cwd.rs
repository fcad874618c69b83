//! Issue 11, hole 1: a plugin never gets the host's working directory without being granted it.
//!
//! The host runs from an installation directory holding another plugin's secret
//! (`secrets/probe-b`) and the catalog (`catalog/`). A plugin that was granted nothing tries,
//! from inside its sandbox, to read that secret, to write into the host's directory and to
//! plant a manifest in the catalog: through the library (a `PluginClient` without
//! `current_dir`) and through the real `tether` binary (`call --catalog`, `inspect --catalog`,
//! `call --cmd`). Every attempt must fail, and the plugin's working directory is not the host's.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use tether_broker::{HandshakeConfig, PluginClient};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};
use tether_tests::bins;

const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");

/// Exit status of `tether call` when the plugin answers with a gRPC error.
const EXIT_CALL: i32 = 1;

/// The other plugin's secret, which must never reach the probe.
const SECRET: &str = "bravo-secret-value";

/// An installation directory the host runs from.
struct Site {
    root: tempfile::TempDir,
}

impl Site {
    /// `secrets/probe-b`, and `catalog/` with `probe-a` (plain) and `probe-c` (which attempts
    /// the escapes at start-up, for `inspect`, which makes no call). No grants file: nothing is
    /// granted.
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let site = Self { root };
        std::fs::create_dir_all(site.path().join("catalog/bin")).unwrap();
        std::fs::create_dir_all(site.path().join("secrets")).unwrap();
        std::fs::write(site.secret(), SECRET).unwrap();
        for name in ["probe-a", "probe-c"] {
            std::os::unix::fs::symlink(PROBE, site.path().join("catalog/bin").join(name)).unwrap();
        }
        site.manifest("probe-a", "");
        let on_start = site
            .escapes()
            .iter()
            .map(|p| format!("{p:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        site.manifest("probe-c", &format!("args = [\"--on-start\", {on_start}]\n"));
        site
    }

    fn manifest(&self, name: &str, extra: &str) {
        let text = format!(
            "name = \"{name}\"\ncommand = \"bin/{name}\"\n{extra}[handshake]\ncookie_key = \"BASIC_PLUGIN\"\ncookie_value = \"hello\"\n"
        );
        std::fs::write(self.path().join(format!("catalog/{name}.toml")), text).unwrap();
    }

    fn path(&self) -> &Path {
        self.root.path()
    }

    fn secret(&self) -> PathBuf {
        self.path().join("secrets/probe-b")
    }

    fn planted_manifest(&self) -> PathBuf {
        self.path().join("catalog/planted.toml")
    }

    fn stolen(&self) -> PathBuf {
        self.path().join("stolen")
    }

    /// The start-up escapes of `probe-c`: absolute and relative (to a working directory that
    /// would be the host's).
    fn escapes(&self) -> Vec<String> {
        vec![
            format!(
                "copy:{}={}",
                self.secret().display(),
                self.stolen().display()
            ),
            "copy:secrets/probe-b=stolen".to_owned(),
            format!(
                "write:{}=name = \"probe-a\"",
                self.planted_manifest().display()
            ),
            "write:catalog/planted.toml=name = \"probe-a\"".to_owned(),
        ]
    }

    /// Nothing the probe tried left a trace in the host's directory.
    fn assert_untouched(&self, how: &str) {
        assert!(!self.stolen().exists(), "{how}: the secret was copied out");
        assert!(
            !self.planted_manifest().exists(),
            "{how}: a manifest was planted in the catalog"
        );
        assert!(
            !self.path().join("planted").exists(),
            "{how}: the host's directory was written"
        );
    }
}

fn tether(cwd: &Path, args: &[&str]) -> Output {
    Command::new(bins::TETHER.path())
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// The KV contract's `.proto` (the probe plugin serves no reflection).
fn kv_proto() -> String {
    tether_tests::peers::repo_root()
        .join("examples/proto/kv.proto")
        .to_string_lossy()
        .into_owned()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `tether call … proto.KV/Get {"key": KEY}` from the site, as `target` (the launch flags).
fn call_get(site: &Site, target: &[&str], key: &str) -> Output {
    let request = serde_json::json!({ "key": key }).to_string();
    let proto = kv_proto();
    let mut args = vec!["call", "--proto", &proto];
    args.extend_from_slice(target);
    args.extend_from_slice(&["proto.KV/Get", &request]);
    tether(site.path(), &args)
}

/// `tether call … proto.KV/Put {"key": KEY, "value": "planted"}` from the site.
fn call_put(site: &Site, target: &[&str], key: &str) -> Output {
    let request = serde_json::json!({ "key": key, "value": "cGxhbnRlZA==" }).to_string();
    let proto = kv_proto();
    let mut args = vec!["call", "--proto", &proto];
    args.extend_from_slice(target);
    args.extend_from_slice(&["proto.KV/Put", &request]);
    tether(site.path(), &args)
}

/// Every escape through `tether call` with `target` fails, and the plugin does not run in the
/// host's directory.
fn assert_call_is_confined(site: &Site, target: &[&str]) {
    let how = target.join(" ");
    for key in [
        format!("read:{}", site.secret().display()),
        "read:secrets/probe-b".to_owned(),
        format!("list:{}", site.path().display()),
    ] {
        let out = call_get(site, target, &key);
        assert_eq!(
            out.status.code(),
            Some(EXIT_CALL),
            "{how}: {key} was answered: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        assert!(!text(&out.stdout).contains(SECRET));
    }
    for key in [
        format!("write:{}", site.planted_manifest().display()),
        format!("write:{}", site.path().join("planted").display()),
    ] {
        let out = call_put(site, target, &key);
        assert_eq!(out.status.code(), Some(EXIT_CALL), "{how}: {key} succeeded");
    }
    // Relative writes land in the plugin's own directory, if anywhere: never in the host's
    // (checked by `assert_untouched` below).
    for key in ["write:catalog/planted.toml", "write:planted"] {
        call_put(site, target, key);
    }
    let out = call_get(site, target, "cwd:");
    assert!(out.status.success(), "{how}: {}", text(&out.stderr));
    let cwd: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cwd = base64::engine::general_purpose::STANDARD
        .decode(cwd["value"].as_str().unwrap_or_default())
        .unwrap();
    assert_ne!(
        Path::new(&text(&cwd)),
        site.path().canonicalize().unwrap(),
        "{how}: the plugin runs in the host's directory"
    );
    site.assert_untouched(&how);
}

#[test]
fn tether_call_of_a_catalog_plugin_cannot_read_write_or_plant_in_the_hosts_directory() {
    let site = Site::new();
    assert_call_is_confined(&site, &["--catalog", "catalog", "probe-a"]);
}

#[test]
fn tether_call_of_a_command_cannot_read_write_or_plant_in_the_hosts_directory() {
    let site = Site::new();
    assert_call_is_confined(&site, &["--cmd", PROBE, "--cookie", "BASIC_PLUGIN=hello"]);
}

#[test]
fn tether_inspect_of_a_catalog_plugin_cannot_read_write_or_plant_in_the_hosts_directory() {
    let site = Site::new();
    let out = tether(site.path(), &["inspect", "--catalog", "catalog", "probe-c"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    site.assert_untouched("inspect --catalog");
}

/// The library: a `PluginClient` without `current_dir`, started by a host whose working
/// directory is the site. The only test in this file that changes the process's directory.
#[tokio::test]
async fn a_plugin_client_without_a_working_directory_cannot_reach_the_hosts() {
    let site = Site::new();
    std::env::set_current_dir(site.path()).unwrap();
    let plugin = PluginClient::builder(PROBE)
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .start()
        .await
        .unwrap();
    let mut kv = KvClient::new(plugin.channel());
    for key in [
        format!("read:{}", site.secret().display()),
        "read:secrets/probe-b".to_owned(),
        format!("list:{}", site.path().display()),
    ] {
        let got = kv.get(GetRequest { key: key.clone() }).await;
        assert!(got.is_err(), "{key} was answered: {got:?}");
    }
    for key in [
        format!("write:{}", site.planted_manifest().display()),
        format!("write:{}", site.path().join("planted").display()),
        "write:catalog/planted.toml".to_owned(),
    ] {
        let put = kv
            .put(PutRequest {
                key: key.clone(),
                value: b"planted".to_vec(),
            })
            .await;
        assert!(put.is_err(), "{key} succeeded");
    }
    let cwd = kv
        .get(GetRequest { key: "cwd:".into() })
        .await
        .unwrap()
        .into_inner()
        .value;
    assert_ne!(
        Path::new(&text(&cwd)),
        site.path().canonicalize().unwrap(),
        "the plugin runs in the host's directory"
    );
    site.assert_untouched("PluginClient");
    plugin.shutdown().await.unwrap();
}
