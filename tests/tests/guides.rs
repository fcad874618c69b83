//! The guides in `docs/` work as written (the markers are explained in
//! `tether_tests::guides`): every code block is a file of a project a test builds, commands a
//! test runs (their `# prints` and `# fails:` comments checked), a verbatim excerpt of the
//! repository, a manifest or grants file the library parses, or output.
//!
//! - The Rust guides (`docs/plugin-rust.md`, `docs/host-rust.md`, `docs/runners.md`) are two
//!   crates next to a link to this checkout, `../tether`, exactly as their `Cargo.toml`s say;
//!   built in `target/guides/` with the workspace's lock file, offline, with line tables only
//!   (a `.cargo/config.toml` beside them, not in them).
//! - The TypeScript, Go and Python guides' plugins are built as their guides say and run under
//!   the host guide's programs, confined. The TypeScript project gets the checkout's
//!   `sdk-typescript` and its `node_modules` (hard-linked) instead of `npm install`; the Go module
//!   gets `tests/go`'s `go.mod`/`go.sum` under its own name, and its code is generated with
//!   Debian's `protoc-gen-go` as `tests/go/build.sh` does; the Python plugin runs from a
//!   virtualenv that sees this checkout's `sdk-python/src` (`sdk-python/tests/test_guide.py`
//!   runs the Python guide's own tests).
//! - `docs/cli.md`'s commands run from a directory that links this checkout's `target/` and
//!   `examples/`, with `cargo build` lines skipped (the test run built the workspace).

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use tether_broker::{Grants, Manifest};
use tether_tests::guides::{self, Kind, Shell};
use tether_tests::peers::{self, GoPlugin, repo_root};
use tether_tests::{gvisor, python, typescript};

/// This file, as run markers name it.
const THIS: &str = "tests/tests/guides.rs";

/// The guides whose `file:` blocks make a project, and the test that builds it.
const PROJECTS: &[(&str, &str)] = &[
    ("docs/plugin-rust.md", THIS),
    ("docs/host-rust.md", THIS),
    ("docs/runners.md", THIS),
    ("docs/plugin-typescript.md", THIS),
    ("docs/plugin-go.md", THIS),
    ("docs/plugin-python.md", "sdk-python/tests/test_guide.py"),
];

#[test]
fn every_code_block_of_the_guides_is_a_file_a_command_an_excerpt_a_parsed_file_or_output() {
    let root = repo_root();
    let mut problems = Vec::new();
    let mut counted = 0;
    for guide in guides::all() {
        let name = Path::new(&guide)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        for block in guides::blocks(&guide) {
            counted += 1;
            let at = block.location();
            match &block.kind {
                Kind::Unmarked if block.lang != "text" => problems.push(format!(
                    "{at}: a `{}` block without a marker: mark it (file, run, excerpt, parse, \
                     not-run with the reason) or make it `text` if it is output",
                    block.lang
                )),
                Kind::File(_) => match PROJECTS.iter().find(|(g, _)| *g == guide) {
                    None => problems.push(format!(
                        "{at}: a file block in a guide no test builds (PROJECTS in {THIS})"
                    )),
                    Some((_, test)) if !names(&root.join(test), &name) => problems.push(format!(
                        "{at}: {test} builds this guide's project but never names it"
                    )),
                    Some(_) => {}
                },
                Kind::Run(test) if !names(&root.join(test), &name) => problems.push(format!(
                    "{at}: `run: {test}`, but that file does not exist or never names {name}"
                )),
                Kind::Parse(what) if what != "manifest" && what != "grants" => {
                    problems.push(format!("{at}: `parse: {what}`: manifest or grants"));
                }
                Kind::NotRun(why) if why.trim().is_empty() => {
                    problems.push(format!("{at}: `not-run` says no reason"));
                }
                _ => {}
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(counted > 40, "only {counted} code blocks in the guides");
}

/// Whether the file `test` exists and names `guide` (a file name such as `plugin-go.md`).
fn names(test: &Path, guide: &str) -> bool {
    std::fs::read_to_string(test).is_ok_and(|text| text.contains(guide))
}

#[test]
fn every_excerpt_in_the_guides_is_verbatim_in_the_file_it_names() {
    let mut excerpts = 0;
    for guide in guides::all() {
        for block in guides::blocks(&guide) {
            let Kind::Excerpt(path) = &block.kind else {
                continue;
            };
            excerpts += 1;
            let source = std::fs::read_to_string(repo_root().join(path))
                .unwrap_or_else(|e| panic!("{}: {path}: {e}", block.location()));
            assert!(
                source.contains(&block.text),
                "{}: this excerpt is not in {path} any more:\n{}",
                block.location(),
                block.text
            );
        }
    }
    assert!(excerpts >= 3, "{excerpts} excerpts");
}

#[test]
fn the_manifest_and_grants_references_in_the_guides_parse_with_the_library() {
    let mut parsed = Vec::new();
    for guide in guides::all() {
        for block in guides::blocks(&guide) {
            let Kind::Parse(what) = &block.kind else {
                continue;
            };
            let file = PathBuf::from(block.location());
            let result = match what.as_str() {
                "manifest" => Manifest::parse(&block.text, &file).map(|_| ()),
                _ => Grants::parse(&block.text, &file).map(|_| ()),
            };
            if let Err(e) = result {
                panic!("{}: the {what} does not parse: {e}", block.location());
            }
            parsed.push(what.clone());
        }
    }
    parsed.sort();
    // docs/host-rust.md's and docs/kubernetes.md's; the Python and TypeScript guides' `calls`.
    assert_eq!(
        parsed,
        [
            "grants", "grants", "grants", "grants", "manifest", "manifest"
        ]
    );
}

// --- Rust: the plugin guide's crate and the host guide's crate ----------------------------------

/// `target/guides/rust/`: `greeter-plugin/` and `greeter-host/` as the guides write them, and
/// `tether`, a link to this checkout. Written and built (`cargo build` in each) once per run.
fn rust_guides() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = repo_root().canonicalize().unwrap();
        let dir = guides::target_dir().join("rust");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let plugin = guides::blocks("docs/plugin-rust.md");
        let plugin_files = guides::files(&plugin, "");
        let paths: Vec<&str> = plugin_files.iter().map(|(p, _)| *p).collect();
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
        guides::write(&dir.join("greeter-plugin"), &plugin_files);
        let mut host = guides::blocks("docs/host-rust.md");
        host.extend(guides::blocks("docs/runners.md"));
        guides::write(
            &dir.join("greeter-host"),
            &guides::files(&host, "greeter-host"),
        );
        std::os::unix::fs::symlink(&root, dir.join("tether")).unwrap();
        // Settings of this checkout's builds, beside the crates (cargo reads a parent
        // directory's config): offline, with line tables only, and one target directory.
        let config = "[net]\noffline = true\n\n[profile.dev]\ndebug = \"line-tables-only\"\n\n\
                      [profile.dev.package.\"*\"]\ndebug = false\n";
        guides::write(&dir, &[(".cargo/config.toml", config)]);
        let target = guides::target_dir().join("cargo");
        std::fs::create_dir_all(&target).unwrap();
        for krate in ["greeter-plugin", "greeter-host"] {
            std::fs::copy(root.join("Cargo.lock"), dir.join(krate).join("Cargo.lock")).unwrap();
            std::os::unix::fs::symlink(&target, dir.join(krate).join("target")).unwrap();
            cargo(&dir.join(krate), &["build"]);
        }
        dir
    })
}

/// Runs cargo in `dir`, which must succeed.
fn cargo(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .args(args)
        .current_dir(dir)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo {args:?} in {} failed:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Where the guides' Rust programs are (`greeter-host`, `greeter-catalog`, `greeter-plugin`, …).
fn guide_programs() -> PathBuf {
    rust_guides().join("greeter-host/target/debug")
}

/// This checkout's programs (`tether`, `kv-plugin`, …), built by the test run.
fn workspace_programs() -> PathBuf {
    repo_root().join("target/debug")
}

#[test]
fn the_rust_plugin_guides_crate_passes_its_tests_and_the_host_guides_programs_greet_through_it() {
    let dir = rust_guides();
    let plugin_dir = dir.join("greeter-plugin");
    let out = cargo(&plugin_dir, &["test", "--quiet"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("2 passed"), "{stdout}");

    let plugin = guides::blocks("docs/plugin-rust.md");
    let runs = guides::runs(&plugin, THIS);
    assert_eq!(runs.len(), 1);
    let shell = Shell::new(&plugin_dir).path(workspace_programs());
    shell.run(runs[0]);

    // The host guide: one launch with a callback on a broker id, then a catalog under grants.
    let host = guides::blocks("docs/host-rust.md");
    let runs = guides::runs(&host, THIS);
    assert_eq!(runs.len(), 2);
    let shell = Shell::new(dir.join("greeter-host")).path(workspace_programs());
    for block in runs {
        shell.run(block);
    }
}

#[test]
fn the_runners_guides_program_greets_through_the_rust_plugin_under_gvisor() {
    let host = guides::blocks("docs/runners.md");
    let runs = guides::runs(&host, THIS);
    assert_eq!(runs.len(), 1);
    let dir = rust_guides(); // builds greeter-gvisor too
    assert!(guide_programs().join("greeter-gvisor").is_file());
    let Some(_) = gvisor::runsc_or_skip(
        "the_runners_guides_program_greets_through_the_rust_plugin_under_gvisor",
    ) else {
        return;
    };
    Shell::new(dir.join("greeter-host"))
        .path(guide_programs())
        .run(runs[0]);
}

// --- The other languages' plugins under the host guide's programs --------------------------------

#[test]
fn the_typescript_guides_plugin_builds_passes_its_tests_and_greets_under_the_guide_hosts() {
    let Some(node) = typescript::node_or_skip(
        "the_typescript_guides_plugin_builds_passes_its_tests_and_greets_under_the_guide_hosts",
    ) else {
        return;
    };
    let blocks = guides::blocks("docs/plugin-typescript.md");
    let scratch = guides::scratch("typescript");
    let dir = scratch.path();
    guides::write(dir, &guides::files(&blocks, ""));
    // What `npm install` of the packed SDK makes: its dependencies, deduplicated, and the
    // package itself (hard links: the confined plugin reads them inside its project).
    link_tree(&node.sdk.join("node_modules"), &dir.join("node_modules"));
    let package = dir.join("node_modules/tether-plugin");
    for part in ["package.json", "dist/src", "proto"] {
        link_tree(&node.sdk.join(part), &package.join(part));
    }
    let runs = guides::runs(&blocks, THIS);
    assert_eq!(runs.len(), 3);
    let unit_tests = node_test_names(&blocks, "src/greeter.test.ts");
    assert_eq!(
        unit_tests.len(),
        4,
        "the guide's unit tests (three under the test kit's fake host, one launched)"
    );
    let shell = Shell::new(dir)
        .path(workspace_programs())
        .path(guide_programs());
    // The first block builds and runs the unit tests: each must have run (and passed: a
    // failure fails the block), not merely been compiled.
    let tested = shell.run(runs[0]);
    let stdout = String::from_utf8_lossy(&tested.stdout);
    for name in &unit_tests {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(name.as_str()) && !l.contains("not ok")),
            "`npm test` did not run the unit test {name:?}:\n{stdout}"
        );
    }
    for block in &runs[1..] {
        shell.run(block);
    }
}

/// The names of the `test("NAME", …)` calls in a guide's file block `path`.
fn node_test_names(blocks: &[guides::Block], path: &str) -> Vec<String> {
    let (_, text) = guides::files(blocks, "")
        .into_iter()
        .find(|(p, _)| *p == path)
        .unwrap_or_else(|| panic!("the guide has no file block {path}"));
    text.lines()
        .filter_map(|line| line.trim_start().strip_prefix("test(\""))
        .filter_map(|rest| rest.split_once('"').map(|(name, _)| name.to_owned()))
        .collect()
}

/// Hard-links the file or tree `from` to `to` (`cp -al`).
fn link_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    let out = Command::new("cp")
        .arg("-al")
        .arg(from)
        .arg(to)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cp -al {} {}: {}",
        from.display(),
        to.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_go_guides_plugin_passes_its_tests_and_greets_under_the_guide_host() {
    let Some(_) = peers::go_or_skip(
        GoPlugin::V18,
        "the_go_guides_plugin_passes_its_tests_and_greets_under_the_guide_host",
    ) else {
        return;
    };
    let root = repo_root();
    let blocks = guides::blocks("docs/plugin-go.md");
    let scratch = guides::scratch("go");
    let dir = scratch.path();
    guides::write(dir, &guides::files(&blocks, ""));
    // `go mod init` + `go get`: tests/go's module (go-plugin v1.8.0), under the guide's name.
    let go_mod = std::fs::read_to_string(root.join("tests/go/go.mod")).unwrap();
    let go_mod = go_mod.replacen(
        "module tether.test/interop",
        "module example.com/greeter-plugin",
        1,
    );
    guides::write(dir, &[("go.mod", &go_mod)]);
    std::fs::copy(root.join("tests/go/go.sum"), dir.join("go.sum")).unwrap();
    // The guide's protoc command, with the generator tests/go/build.sh uses.
    std::fs::create_dir_all(dir.join("greeter")).unwrap();
    let out = Command::new("protoc")
        .args([
            "--plugin=protoc-gen-go=/usr/bin/protoc-gen-go",
            "-I",
            "proto",
            "--go_out=plugins=grpc,paths=source_relative,Mgreeter.proto=example.com/greeter-plugin/greeter:greeter",
            "greeter.proto",
        ])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "protoc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = guides::runs(&blocks, THIS);
    assert_eq!(runs.len(), 2);
    // As tests/go/build.sh builds: module mode, the module cache it filled, no toolchain switch.
    let shell = Shell::new(dir)
        .path(guide_programs())
        .env("GOFLAGS", "-mod=readonly -buildvcs=false")
        .env("GOPROXY", "off")
        .env("GOTOOLCHAIN", "local")
        .env("GOWORK", "off")
        .env("CGO_ENABLED", "0");
    for block in runs {
        shell.run(block);
    }
}

/// The Go guide's plugin words a secret it did not receive as the tether SDKs do, word for word
/// (`proto/testdata/not-available.json`): its format strings, filled as Go's `%q` and `%s` fill
/// them for a plain name, are the shared messages.
#[test]
fn the_go_guides_plugin_words_a_secret_it_did_not_receive_as_the_sdks_do() {
    let blocks = guides::blocks("docs/plugin-go.md");
    let main = &blocks
        .iter()
        .find(|b| matches!(&b.kind, Kind::File(path) if path == "main.go"))
        .unwrap()
        .text;
    let between = |from: &str, to: &str| {
        let start = main
            .find(from)
            .unwrap_or_else(|| panic!("no {from:?} in main.go"))
            + from.len();
        main[start..][..main[start..].find(to).unwrap()].to_owned()
    };
    let format = between(
        "return fmt.Errorf(\"secret %q is not available",
        "\", name, why",
    );
    let none = between("return nil, notAvailable(name, \"", "\")");
    let others = between("why := fmt.Sprintf(\"", "\", name)");
    let fixture: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("proto/testdata/not-available.json")).unwrap(),
    )
    .unwrap();
    let mut checked = 0;
    for case in fixture["cases"].as_array().unwrap() {
        if case["kind"] != "secret" {
            continue;
        }
        let quoted = format!("\"{}\"", case["name"].as_str().unwrap());
        let why = if case["delivered"] == "none" {
            &none
        } else {
            &others
        };
        let message = format!("secret %q is not available{format}")
            .replace("%s", &why.replace("%q", &quoted))
            .replace("%q", &quoted);
        assert_eq!(message, case["message"].as_str().unwrap());
        checked += 1;
    }
    assert_eq!(checked, 2);
}

#[test]
fn the_python_guides_plugin_greets_confined_from_a_virtualenv_under_the_guide_hosts() {
    let Some(peer) = python::python_or_skip(
        "the_python_guides_plugin_greets_confined_from_a_virtualenv_under_the_guide_hosts",
    ) else {
        return;
    };
    let blocks = guides::blocks("docs/plugin-python.md");
    let scratch = guides::scratch("python");
    let dir = scratch.path();
    guides::write(dir, &guides::files(&blocks, ""));
    // `pip install ./sdk-python` into a virtualenv: the checkout's SDK on its path.
    let venv = dir.join("venv");
    let out = Command::new(&peer.interpreter)
        .args(["-m", "venv", "--system-site-packages"])
        .arg(&venv)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "venv: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let site = Command::new(venv.join("bin/python3"))
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ])
        .output()
        .unwrap();
    let site = PathBuf::from(String::from_utf8_lossy(&site.stdout).trim());
    let sdk = repo_root().join("sdk-python/src").canonicalize().unwrap();
    guides::write(
        &site,
        &[("tether-plugin.pth", &format!("{}\n", sdk.display()))],
    );
    let shell = Shell::new(dir)
        .path(workspace_programs())
        .path(guide_programs())
        .path(venv.join("bin"));
    // The guide's generate command (its pytest run is sdk-python/tests/test_guide.py's).
    let generate = blocks
        .iter()
        .find(|b| b.text.contains("grpc_tools.protoc"))
        .unwrap();
    shell.run(generate);
    let runs = guides::runs(&blocks, THIS);
    assert_eq!(runs.len(), 2);
    for block in runs {
        shell.run(block);
    }
    // The catalog links the script where it lives, not a copy: an edit is what runs next.
    let script = dir.join("greeter_plugin.py");
    let source = std::fs::read_to_string(&script).unwrap();
    let edited = source.replace(
        "f\"{salutation}, {title} {request.name}\"",
        "f\"{salutation}; {title} {request.name}\"",
    );
    assert_ne!(
        edited, source,
        "the guide's greeting changed: follow it here"
    );
    std::fs::write(&script, edited).unwrap();
    let again = guides::parse(
        "docs/plugin-python.md (edited)",
        "<!-- run: x -->\n```sh\ngreeter-catalog site greeter Grace   # prints Welcome; Dr. Grace\n```\n",
    );
    shell.run(&again[0]);
}

// --- The CLI guide ---------------------------------------------------------------------------------

#[test]
fn the_cli_guides_commands_run_as_written_from_a_checkout() {
    let test = "the_cli_guides_commands_run_as_written_from_a_checkout";
    let Some(_) = peers::go_or_skip(GoPlugin::V18, test) else {
        return;
    };
    let Some(_) = python::python_or_skip(test) else {
        return; // `tether check` of the demo resolves its Python step's interpreter
    };
    let root = repo_root().canonicalize().unwrap();
    let blocks = guides::blocks("docs/cli.md");
    let runs = guides::runs(&blocks, THIS);
    assert_eq!(runs.len(), 2);
    // A checkout as the guide's reader has it, with its own working directory for kv_x.
    let scratch = guides::scratch("cli");
    for part in ["target", "examples"] {
        std::os::unix::fs::symlink(root.join(part), scratch.path().join(part)).unwrap();
    }
    let shell = Shell::new(scratch.path())
        .path(workspace_programs())
        .cargo_builds_done();
    for block in runs {
        shell.run(block);
    }
    assert!(scratch.path().join("kv_x").is_file());
}

// --- The examples' READMEs ------------------------------------------------------------------------

#[test]
fn the_kv_and_counter_examples_readmes_commands_run_as_written_from_a_checkout() {
    let test = "the_kv_and_counter_examples_readmes_commands_run_as_written_from_a_checkout";
    let Some(_) = peers::go_or_skip(GoPlugin::V18, test) else {
        return;
    };
    let Some(_) = python::python_or_skip(test) else {
        return;
    };
    let root = repo_root().canonicalize().unwrap();
    for readme in ["examples/kv/README.md", "examples/counter/README.md"] {
        let blocks = guides::blocks(readme);
        let runs = guides::runs(&blocks, THIS);
        assert_eq!(runs.len(), 2, "{readme}");
        let scratch = guides::scratch("examples");
        for part in ["target", "sdk-python"] {
            std::os::unix::fs::symlink(root.join(part), scratch.path().join(part)).unwrap();
        }
        // `mktemp -d` makes its directories in the scratch directory, removed with it.
        let shell = Shell::new(scratch.path())
            .env("TMPDIR", scratch.path())
            .cargo_builds_done();
        for block in runs {
            shell.run(block);
        }
    }
}

// --- Links ----------------------------------------------------------------------------------------

#[test]
fn every_relative_link_in_the_guides_reaches_a_file_and_heading_that_exist() {
    let root = repo_root();
    let mut problems = Vec::new();
    let mut links = 0;
    for guide in guides::all() {
        let text = std::fs::read_to_string(root.join(&guide)).unwrap();
        let dir = Path::new(&guide).parent().unwrap_or(Path::new(""));
        for (line, target) in guides::links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            links += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                PathBuf::from(&guide)
            } else {
                dir.join(path)
            };
            if !root.join(&file).exists() {
                problems.push(format!("{guide}:{line}: {target}: no {}", file.display()));
                continue;
            }
            if anchor.is_empty() {
                continue;
            }
            let linked = std::fs::read_to_string(root.join(&file)).unwrap_or_default();
            if !guides::anchors(&linked).iter().any(|a| a == anchor) {
                problems.push(format!("{guide}:{line}: {target}: no heading #{anchor}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(links > 40, "only {links} relative links");
}
