//! README "Writing a plugin in Rust" is copy-paste complete: its files (each code block after
//! a `<!-- readme-plugin: PATH -->` marker) become a scratch crate, with the `tether-*`
//! dependencies pointed at this workspace, whose own tests then pass — the in-process test
//! with `tether-sdk-test` and a real host launching the built plugin with a granted secret and
//! a host-service callback.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use tether_tests::peers::repo_root;

/// The marker before each file's code block.
const MARKER: &str = "<!-- readme-plugin: ";

/// The README's files, as (path, content).
fn readme_files(readme: &str) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        let Some(path) = line
            .strip_prefix(MARKER)
            .and_then(|r| r.strip_suffix(" -->"))
        else {
            continue;
        };
        let fence = lines.next().unwrap_or_default();
        assert!(
            fence.starts_with("```"),
            "{path}: no code block after the marker"
        );
        let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        files.push((path.to_owned(), body.join("\n") + "\n"));
    }
    files
}

/// The README's `Cargo.toml` with the `tether-*` crates taken from this workspace, the
/// workspace's lock file's versions and its dev profile (so the build cache is shared).
fn local_manifest(manifest: &str, root: &Path) -> String {
    let crates = [
        ("tether-sdk", "sdk-rust"),
        ("tether-build", "sdk-rust/build-helper"),
        ("tether-sdk-test", "sdk-rust/test-kit"),
        ("tether-broker", "broker"),
    ];
    let mut out = String::new();
    for line in manifest.lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        match crates.iter().find(|(c, _)| *c == name) {
            Some((c, dir)) => out.push_str(&format!(
                "{c} = {{ path = {:?} }}\n",
                root.join(dir).display().to_string()
            )),
            None => out.push_str(&format!("{line}\n")),
        }
    }
    out.push_str(
        "\n[workspace]\n\n[profile.dev]\ndebug = \"line-tables-only\"\n\n[profile.dev.package.\"*\"]\ndebug = false\n",
    );
    out
}

#[test]
fn the_readmes_rust_plugin_builds_and_its_tests_pass_with_a_callback_and_a_granted_secret() {
    let root = repo_root().canonicalize().unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let files = readme_files(&readme);
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "Cargo.toml",
            "proto/greeter.proto",
            "build.rs",
            "src/lib.rs",
            "src/main.rs",
            "tests/greeter.rs"
        ]
    );
    let scratch = tempfile::tempdir().unwrap();
    let mut lines = 0;
    for (path, content) in &files {
        let target = scratch.path().join(path);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        let content = if path == "Cargo.toml" {
            local_manifest(content, &root)
        } else {
            content.clone()
        };
        lines += files
            .iter()
            .find(|(p, _)| p == path)
            .map_or(0, |(_, c)| c.lines().count());
        std::fs::write(target, content).unwrap();
    }
    std::fs::copy(root.join("Cargo.lock"), scratch.path().join("Cargo.lock")).unwrap();

    let began = Instant::now();
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .args(["test", "--offline", "--quiet"])
        .current_dir(scratch.path())
        // Its own target directory: with the workspace's, the different feature sets of its
        // dependencies rebuild them under new hashes anyway (and fill the disk twice).
        .env("CARGO_TARGET_DIR", root.join("target/readme-plugin"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cargo test of the README's plugin failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("2 passed"), "{stdout}\n{stderr}");
    eprintln!(
        "README plugin: {lines} lines in {} files, built and tested in {:.0?}",
        files.len(),
        began.elapsed()
    );
}
