//! `tether run`, `list` and `check` with the agent demo shipped in `examples/agent`: lazy
//! starts, the notifier's secret, the checksum step's granted call to another plugin, broken
//! manifests and workflows.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest as _, Sha256};
use tether_tests::bins;
use tether_tests::output::{stderr, stdout};
use tether_tests::peers::repo_root;
use tether_tests::procs;

/// Exit statuses documented in `cli/src/main.rs`.
const EXIT_STEP_FAILED: i32 = 1;
const EXIT_INPUT: i32 = 4;

/// `tether ARGS` in `work`, with the demo's catalog as the default catalog (what `cargo run`
/// gives a source checkout through `.cargo/config.toml`); the demo's steps are `agent-demo`,
/// found beside `tether`.
fn tether(work: &Path, args: &[&str]) -> Output {
    bins::AGENT_DEMO.path();
    Command::new(bins::TETHER.path())
        .args(args)
        .env("TETHER_CATALOG", demo().join("catalog"))
        .current_dir(work)
        .output()
        .unwrap()
}

fn demo() -> PathBuf {
    repo_root().join("examples/agent")
}

fn secret() -> Vec<u8> {
    std::fs::read(demo().join("secrets/webhook-token")).unwrap()
}

/// The number after `label` in `text` (e.g. `"plugins: "` → 4).
fn number_after(text: &str, label: &str) -> usize {
    let rest = &text[text
        .find(label)
        .unwrap_or_else(|| panic!("no {label:?} in {text}"))
        + label.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number after {label:?} in {text}"))
}

#[test]
fn the_agent_demo_binary_runs_the_workflow_and_prints_the_summary() {
    let work = tempfile::tempdir().unwrap();
    let out = Command::new(bins::AGENT_DEMO.path())
        .current_dir(work.path())
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    assert!(text.contains("steps run: 10 (10 steps x 1 runs)"), "{text}");
    // `hash` runs no step: the first step's call through the host started it.
    assert!(
        text.contains(
            "plugins: 6 started of 7 in catalog (checksum, hash, json-transform, notifier, template, word-count)"
        ),
        "{text}"
    );
    let progress = stderr(&out);
    assert!(
        progress.contains("[1/10] fetch-changes (checksum): changelog.md: ")
            && progress.contains("(confirmed by plugin `hash` through the host)"),
        "{progress}"
    );
    assert!(
        progress.contains("[10/10] announce (notifier)"),
        "{progress}"
    );
}

#[test]
fn the_checksum_steps_call_to_the_hash_plugin_is_refused_without_its_grant_naming_what_to_add() {
    let work = tempfile::tempdir().unwrap();
    let grants = work.path().join("grants.toml");
    let policy = std::fs::read_to_string(demo().join("grants.toml")).unwrap();
    let without = policy.replace("[plugins.checksum]\ncalls = [\"hash\"]\n", "");
    assert_ne!(without, policy, "the demo grants checksum its call to hash");
    std::fs::write(&grants, without).unwrap();
    let out = tether(work.path(), &["run", "--grants", grants.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(EXIT_STEP_FAILED),
        "{}",
        stdout(&out)
    );
    let err = stderr(&out);
    let refusal = format!(
        "plugin `checksum` may not call plugin `hash`: not granted; add `[plugins.checksum]` with `calls = [\"hash\"]` to {}",
        grants.display()
    );
    assert!(
        err.contains("step `fetch-changes` (plugin `checksum`) failed") && err.contains(&refusal),
        "{err}"
    );
}

#[test]
fn the_shipped_demo_completes_and_starts_fewer_plugins_than_the_catalog_has() {
    let work = tempfile::tempdir().unwrap();
    let state = work.path().join("state");
    let out = tether(
        work.path(),
        &["run", "--state-dir", state.to_str().unwrap()],
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    let workflow = std::fs::read_to_string(demo().join("workflow.toml")).unwrap();
    let steps = workflow.matches("[[steps]]").count();
    assert_eq!(number_after(&text, "steps run: "), steps, "{text}");
    let started = number_after(&text, "plugins: ");
    let in_catalog = number_after(&text, "started of ");
    let manifests = std::fs::read_dir(demo().join("catalog"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "toml")
        })
        .count();
    assert_eq!(in_catalog, manifests, "{text}");
    assert!(started >= 1 && started < in_catalog, "{text}");
    assert!(text.contains("per step: p50 "), "{text}");
    assert!(text.contains("steps/s"), "{text}");
    // The checksum step called back: it fetched the change log and reported progress.
    let artifact = std::fs::read(demo().join("artifacts/changelog.md")).unwrap();
    assert!(number_after(&text, "callbacks: ") >= 1, "{text}");
    assert!(
        text.contains(&format!("1 artifact fetches ({} bytes)", artifact.len())),
        "{text}"
    );
    // Every plugin was stopped at the end.
    assert!(procs::in_dir(&state).is_empty());
}

#[test]
fn the_notifier_signs_with_its_granted_secret_and_never_writes_it() {
    let work = tempfile::tempdir().unwrap();
    let state = work.path().join("state");
    let out = tether(
        work.path(),
        &["run", "--state-dir", state.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let outbox = std::fs::read_to_string(state.join("notifier/outbox.jsonl")).unwrap();
    let line: serde_json::Value = serde_json::from_str(outbox.lines().next().unwrap()).unwrap();
    let message = line["message"].as_str().unwrap();
    let expected = tether_examples::agent::notifier::signature(&secret(), message);
    assert_eq!(line["signature"], expected.as_str());
    let secret_text = String::from_utf8(secret()).unwrap();
    for text in [outbox, stdout(&out), stderr(&out)] {
        assert!(!text.contains(&secret_text), "the secret leaked: {text}");
    }
}

/// A one-step workflow where the `hash` plugin fingerprints the notifier's secret.
fn hash_the_secret_workflow(dir: &Path) -> PathBuf {
    let file = dir.join("steal.toml");
    std::fs::write(
        &file,
        "name = \"steal\"\n[[steps]]\nname = \"fingerprint\"\nplugin = \"hash\"\nparams = { secret = \"webhook-token\" }\n",
    )
    .unwrap();
    file
}

#[test]
fn no_other_plugin_can_read_the_notifiers_secret() {
    let work = tempfile::tempdir().unwrap();
    let workflow = hash_the_secret_workflow(work.path());
    let out = tether(work.path(), &["run", workflow.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(EXIT_STEP_FAILED),
        "{}",
        stdout(&out)
    );
    let err = stderr(&out);
    assert!(
        err.contains("step `fingerprint` (plugin `hash`) failed") && err.contains("webhook-token"),
        "{err}"
    );
}

#[test]
fn the_same_plugin_reads_the_secret_once_the_grants_file_grants_it() {
    // The control for the test above: the failure is the policy, not the plugin.
    let work = tempfile::tempdir().unwrap();
    let workflow = hash_the_secret_workflow(work.path());
    let grants = work.path().join("grants.toml");
    std::fs::write(&grants, "[plugins.hash]\nsecrets = [\"webhook-token\"]\n").unwrap();
    let catalog = work.path().join("catalog");
    std::fs::create_dir(&catalog).unwrap();
    let manifest = std::fs::read_to_string(demo().join("catalog/hash.toml")).unwrap();
    std::fs::write(
        catalog.join("hash.toml"),
        manifest.replace(
            "idle_timeout",
            "secrets = [\"webhook-token\"]\nidle_timeout",
        ),
    )
    .unwrap();
    let secrets = demo().join("secrets");
    let out = tether(
        work.path(),
        &[
            "-v",
            "run",
            "--catalog",
            catalog.to_str().unwrap(),
            "--grants",
            grants.to_str().unwrap(),
            "--secrets",
            secrets.to_str().unwrap(),
            workflow.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let digest: String = Sha256::digest(secret())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert!(stderr(&out).contains(&digest[..12]), "{}", stderr(&out));
}

/// A copy of the demo catalog plus a manifest with a typo on line 3.
fn catalog_with_a_broken_manifest(dir: &Path) -> PathBuf {
    let catalog = dir.join("catalog");
    std::fs::create_dir(&catalog).unwrap();
    for entry in std::fs::read_dir(demo().join("catalog")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "toml") {
            // Relative sandbox allowances are relative to the manifest: keep them pointing at
            // the checkout.
            let sdk = repo_root().join("sdk-python/src");
            let text = std::fs::read_to_string(&path)
                .unwrap()
                .replace("../../../sdk-python/src", sdk.to_str().unwrap());
            std::fs::write(catalog.join(path.file_name().unwrap()), text).unwrap();
        }
    }
    std::os::unix::fs::symlink(demo().join("catalog/bin"), catalog.join("bin")).unwrap();
    std::fs::write(
        catalog.join("broken.toml"),
        "name = \"broken\"\ncommand = \"bin/broken\"\ncolour = \"red\"\n[handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\n",
    )
    .unwrap();
    std::fs::copy(demo().join("grants.toml"), dir.join("grants.toml")).unwrap();
    catalog
}

#[test]
fn list_reports_a_broken_manifest_with_file_and_line_and_fails() {
    let work = tempfile::tempdir().unwrap();
    let catalog = catalog_with_a_broken_manifest(work.path());
    let out = tether(
        work.path(),
        &["list", "--catalog", catalog.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(EXIT_INPUT));
    assert!(stderr(&out).contains("broken.toml:3:"), "{}", stderr(&out));
    // The good plugins are still listed.
    assert!(stdout(&out).contains("notifier"), "{}", stdout(&out));
}

#[test]
fn check_lists_every_problem_of_a_catalog_and_fails() {
    let work = tempfile::tempdir().unwrap();
    let catalog = catalog_with_a_broken_manifest(work.path());
    // Also: a plugin that asks for a secret nobody granted, and one whose binary is missing.
    std::fs::write(
        catalog.join("greedy.toml"),
        "name = \"greedy\"\ncommand = \"bin/tether\"\nsecrets = [\"webhook-token\"]\n[handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\n",
    )
    .unwrap();
    std::fs::write(
        catalog.join("gone.toml"),
        "name = \"gone\"\ncommand = \"bin/no-such-plugin\"\n[handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\n",
    )
    .unwrap();
    // And sandbox allowances: a directory that does not exist, and an unset variable.
    std::fs::write(
        catalog.join("narrow.toml"),
        "name = \"narrow\"\ncommand = \"bin/tether\"\nsandbox_allow_read = [\"no-such-dir\"]\n[handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\n",
    )
    .unwrap();
    std::fs::write(
        catalog.join("unset.toml"),
        "name = \"unset\"\ncommand = \"bin/tether\"\n\nsandbox_allow_exec = [\"${TETHER_TEST_SURELY_UNSET}\"]\n[handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\n",
    )
    .unwrap();
    let secrets = demo().join("secrets");
    let out = tether(
        work.path(),
        &[
            "check",
            "--catalog",
            catalog.to_str().unwrap(),
            "--secrets",
            secrets.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(EXIT_INPUT), "{}", stdout(&out));
    let text = stdout(&out);
    let problems: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("problem: "))
        .collect();
    // Five, plus `narrow`'s allowance, which the (absent) grants do not allow either.
    assert_eq!(problems.len(), 6, "{text}");
    assert!(
        problems.iter().any(
            |p| p.contains("plugin `narrow` requests `sandbox_allow_read")
                && p.contains("add `sandbox_allow_read = [")
        ),
        "{text}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("plugin `narrow`: sandbox_allow_read names")
                && p.contains("no-such-dir, which is not a directory")),
        "{text}"
    );
    assert!(
        problems.iter().any(|p| p.contains("unset.toml:4:")
            && p.contains("`TETHER_TEST_SURELY_UNSET`, which is not set")),
        "{text}"
    );
    assert!(
        problems.iter().any(|p| p.contains("broken.toml:3:")),
        "{text}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("plugin `greedy` requests `secrets = [\"webhook-token\"]`")),
        "{text}"
    );
    assert!(
        problems.iter().any(|p| p
            .contains("plugin `gone`: its program is in none of the places searched: ")
            && p.contains("/bin/no-such-plugin (the catalog's bin/)")),
        "{text}"
    );
    assert!(text.contains("ok       notifier"), "{text}");
}

#[test]
fn check_passes_on_the_shipped_catalog() {
    let work = tempfile::tempdir().unwrap();
    let out = tether(work.path(), &["check"]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("no problems"), "{}", stdout(&out));
}

#[test]
fn a_bad_workflow_gives_one_clear_error_line_and_a_non_zero_exit() {
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("bad.toml");
    std::fs::write(
        &file,
        "name = \"bad\"\n[[steps]]\nname = \"one\"\nplugin = \"no-such-plugin\"\n",
    )
    .unwrap();
    let missing = work.path().join("missing.toml");
    for (workflow, needle) in [(&file, "bad.toml:4: "), (&missing, "missing.toml:1: ")] {
        let out = tether(work.path(), &["run", workflow.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(EXIT_INPUT));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("tether: error: ") && err.contains(needle),
            "{err}"
        );
    }
}

#[test]
fn call_reaches_a_catalog_plugin_by_name() {
    let work = tempfile::tempdir().unwrap();
    let catalog = demo().join("catalog");
    let out = tether(
        work.path(),
        &[
            "call",
            "--catalog",
            catalog.to_str().unwrap(),
            "word-count",
            "tether.agent.v1.Executor/Execute",
            r#"{"step":"x","paramsJson":"{\"text\":\"one two three\"}"}"#,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let response: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(response["phase"], "PHASE_SUCCEEDED");
    let outputs: serde_json::Value =
        serde_json::from_str(response["outputsJson"].as_str().unwrap()).unwrap();
    assert_eq!(outputs["words"], 3);
}

#[test]
fn the_python_executor_of_the_catalog_runs_a_step_over_automtls_and_calls_back() {
    if tether_tests::python::python_or_skip(
        "the_python_executor_of_the_catalog_runs_a_step_over_automtls_and_calls_back",
    )
    .is_none()
    {
        return;
    }
    // The shipped catalog, confined: its manifest allows Python's installation
    // (`${PYENV_ROOT:-/usr}`) and the SDK's sources.
    let work = tempfile::tempdir().unwrap();
    let workflow = work.path().join("stats.toml");
    std::fs::write(
        &workflow,
        "name = \"stats\"\n[[steps]]\nname = \"count\"\nplugin = \"word-count\"\nparams = { text = \"b a b c b a\" }\n[[steps]]\nname = \"stats\"\nplugin = \"word-stats\"\nparams = { top = 2 }\n[[steps]]\nname = \"keep\"\nplugin = \"json-transform\"\nparams = { pick = [\"top\"] }\n",
    )
    .unwrap();
    let catalog = demo().join("catalog");
    let catalog = catalog.to_str().unwrap();
    let out = tether(work.path(), &["run", workflow.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("plugins: 3 started"), "{text}");
    // The Python step called back through its SDK's GRPCBroker: one progress report and one
    // log line, counted by the host.
    assert!(
        text.contains("callbacks: 1 progress reports, 1 log lines, 0 artifact fetches"),
        "{text}"
    );
    let output = text
        .lines()
        .find_map(|l| l.strip_prefix("output: "))
        .unwrap();
    let output: serde_json::Value = serde_json::from_str(output).unwrap();
    assert_eq!(
        output,
        serde_json::json!({"top": [{"word": "b", "count": 3}, {"word": "a", "count": 2}]})
    );
    let inspect = tether(
        work.path(),
        &["inspect", "--catalog", catalog, "word-stats"],
    );
    let text = stdout(&inspect);
    assert!(inspect.status.success(), "{}", stderr(&inspect));
    assert!(text.contains("tls: mutual"), "{text}");
    assert!(text.contains("tether.agent.v1.Executor"), "{text}");
}

/// `len` bytes no other run has: the test's temporary directory name mixed through an LCG.
fn unique_bytes(seed_from: &Path, len: usize) -> Vec<u8> {
    let mut state = seed_from
        .to_string_lossy()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
        ^ u64::from(std::process::id());
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 56) as u8
        })
        .collect()
}

#[test]
fn the_checksum_step_returns_the_digest_of_the_bytes_the_host_served_and_reports_progress() {
    let work = tempfile::tempdir().unwrap();
    let artifacts = work.path().join("artifacts");
    std::fs::create_dir(&artifacts).unwrap();
    // Several 64 KiB chunks, so the plugin reports progress more than once.
    let bytes = unique_bytes(work.path(), 200_000);
    std::fs::write(artifacts.join("blob.bin"), &bytes).unwrap();
    let workflow = work.path().join("fetch.toml");
    std::fs::write(
        &workflow,
        "name = \"fetch\"\n[[steps]]\nname = \"sum\"\nplugin = \"checksum\"\nparams = { artifact = \"blob.bin\" }\n[[steps]]\nname = \"keep\"\nplugin = \"json-transform\"\nparams = { pick = [\"artifact\", \"bytes\", \"sha256\"] }\n",
    )
    .unwrap();
    let out = tether(
        work.path(),
        &[
            "run",
            "--artifacts",
            artifacts.to_str().unwrap(),
            workflow.to_str().unwrap(),
        ],
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    let output = text
        .lines()
        .find_map(|l| l.strip_prefix("output: "))
        .unwrap();
    let output: serde_json::Value = serde_json::from_str(output).unwrap();
    let digest: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        output,
        serde_json::json!({"artifact": "blob.bin", "bytes": bytes.len(), "sha256": digest})
    );
    let chunks = bytes.len().div_ceil(64 * 1024);
    assert_eq!(number_after(&text, "callbacks: "), chunks, "{text}");
    assert!(
        text.contains(" 1 log lines, 1 artifact fetches (200000 bytes), 0 refused"),
        "{text}"
    );
}

#[test]
fn a_step_asking_for_an_artifact_its_params_do_not_name_fails_with_a_clear_error() {
    let work = tempfile::tempdir().unwrap();
    // The first plugin's output names an artifact; only the workflow's params may grant one.
    let workflow = work.path().join("sneak.toml");
    std::fs::write(
        &workflow,
        "name = \"sneak\"\n[[steps]]\nname = \"name-it\"\nplugin = \"json-transform\"\nparams = { set = { artifact = \"changelog.md\" } }\n[[steps]]\nname = \"sum\"\nplugin = \"checksum\"\n",
    )
    .unwrap();
    let out = tether(work.path(), &["run", workflow.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(EXIT_STEP_FAILED), "{err}");
    assert!(
        err.contains("the host refused artifact `changelog.md`")
            && err.contains("step `sum` (plugin `checksum`) may not fetch artifact `changelog.md`")
            && err.contains("PermissionDenied"),
        "{err}"
    );
    assert!(!stdout(&out).contains("output: "), "{}", stdout(&out));
}

#[test]
fn a_plugins_log_callback_becomes_a_host_log_event_with_the_plugins_name() {
    let work = tempfile::tempdir().unwrap();
    let workflow = work.path().join("one.toml");
    std::fs::write(
        &workflow,
        "name = \"one\"\n[[steps]]\nname = \"sum\"\nplugin = \"checksum\"\nparams = { artifact = \"changelog.md\" }\n",
    )
    .unwrap();
    let out = tether(
        work.path(),
        &[
            "--log-format",
            "json",
            "-v",
            "run",
            workflow.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let events: Vec<serde_json::Value> = stderr(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &serde_json::Value| e["target"] == "tether::agent")
        .collect();
    let logged: Vec<_> = events.iter().filter(|e| e["level"] == "INFO").collect();
    assert_eq!(logged.len(), 1, "{events:?}");
    let fields = &logged[0]["fields"];
    assert_eq!(fields["plugin"], "checksum");
    assert_eq!(fields["step"], "sum");
    let artifact = std::fs::read(demo().join("artifacts/changelog.md")).unwrap();
    assert!(
        fields["message"].as_str().unwrap().starts_with(&format!(
            "fetched artifact changelog.md: {} bytes",
            artifact.len()
        )),
        "{fields}"
    );
}
