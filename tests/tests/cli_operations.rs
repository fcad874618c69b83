//! The `tether` command as operators meet it (issue 16): missing programs name every place
//! searched, plugin output at `-v` without transport noise, `inspect` describing services,
//! `run` against a plugin that is no executor, colour only on terminals, and closed pipes.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::io::Read as _;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tether_tests::bins;
use tether_tests::output::{stderr, stdout};
use tether_tests::peers::repo_root;

/// Exit statuses documented in `cli/src/main.rs`.
const EXIT_START: i32 = 3;
const EXIT_INPUT: i32 = 4;
const EXIT_BROKEN_PIPE: i32 = 141;

const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");

fn tether(work: &Path, args: &[&str]) -> Output {
    Command::new(bins::TETHER.path())
        .args(args)
        .current_dir(work)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .output()
        .unwrap()
}

fn kv_proto() -> String {
    repo_root()
        .join("examples/proto/kv.proto")
        .to_string_lossy()
        .into_owned()
}

fn demo_catalog() -> String {
    repo_root()
        .join("examples/agent/catalog")
        .to_string_lossy()
        .into_owned()
}

/// A catalog `work/catalog` with one KV-cookie plugin `kv` whose command is `bin/PROGRAM`.
fn kv_catalog(work: &Path, program: &str) -> PathBuf {
    let dir = work.join("catalog");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("kv.toml"),
        format!(
            "name = \"kv\"\ncommand = \"bin/{program}\"\n[handshake]\ncookie_key = \"BASIC_PLUGIN\"\ncookie_value = \"hello\"\napp_versions = [1]\n"
        ),
    )
    .unwrap();
    dir
}

/// The directory of the workspace's binaries (`--bin-dir` for [`kv_catalog`]).
fn bin_dir() -> String {
    Path::new(bins::KV_PLUGIN.path())
        .parent()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

// Item 4: a missing program.

#[test]
fn a_missing_catalog_program_names_the_catalogs_bin_and_the_bin_dir_fallback() {
    let work = tempfile::tempdir().unwrap();
    let catalog = kv_catalog(work.path(), "no-such-plugin");
    let catalog = catalog.to_str().unwrap();
    let elsewhere = work.path().join("elsewhere");
    let elsewhere = elsewhere.to_str().unwrap();
    let expected = [
        format!("{catalog}/bin/no-such-plugin (the catalog's bin/)"),
        format!("{elsewhere}/no-such-plugin (--bin-dir)"),
    ];
    std::fs::write(
        work.path().join("wf.toml"),
        "name = \"w\"\n[[steps]]\nname = \"s\"\nplugin = \"kv\"\n",
    )
    .unwrap();
    let commands: [&[&str]; 3] = [
        &["call", "--catalog", catalog, "kv", "proto.KV/Get", "{}"],
        &["run", "--catalog", catalog, "wf.toml"],
        &["check", "--catalog", catalog],
    ];
    for args in commands {
        let mut args = args.to_vec();
        args.extend(["--bin-dir", elsewhere]);
        let out = tether(work.path(), &args);
        let text = format!("{}{}", stdout(&out), stderr(&out));
        let code = if args[0] == "check" {
            EXIT_INPUT
        } else {
            EXIT_START
        };
        assert_eq!(out.status.code(), Some(code), "{args:?}: {text}");
        for place in &expected {
            assert!(text.contains(place.as_str()), "{args:?}: {text}");
        }
        assert!(
            text.contains("plugin `kv`") && text.contains("build or install it there"),
            "{text}"
        );
    }
}

#[test]
fn a_missing_bare_command_names_every_path_directory() {
    let work = tempfile::tempdir().unwrap();
    let (a, b) = (work.path().join("a"), work.path().join("b"));
    let out = Command::new(bins::TETHER.path())
        .args(["call", "--cmd", "no-such-plugin", "--cookie", "K=V"])
        .args(["proto.KV/Get", "{}"])
        .env("PATH", std::env::join_paths([&a, &b]).unwrap())
        .current_dir(work.path())
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(EXIT_START), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    for dir in [&a, &b] {
        let place = format!("{}/no-such-plugin (PATH)", dir.display());
        assert!(err.contains(&place), "{err}");
    }
}

// Item 5: plugin output at -v, without transport frames.

/// `tether VERBOSITY call` of the probe plugin, which prints `line` as a plain stderr line.
fn probe_says(work: &Path, verbosity: Option<&str>, line: &str) -> Output {
    let key = format!(r#"{{"key":"say:{line}"}}"#);
    let proto = kv_proto();
    let mut args: Vec<&str> = verbosity.into_iter().collect();
    args.extend([
        "call",
        "--cmd",
        PROBE,
        "--cookie",
        "BASIC_PLUGIN=hello",
        "--proto",
        &proto,
        "proto.KV/Put",
        &key,
    ]);
    tether(work, &args)
}

#[test]
fn one_v_shows_a_plugins_plain_stderr_lines_and_none_hides_them() {
    let work = tempfile::tempdir().unwrap();
    let line = "a plain line from the plugin";
    let quiet = probe_says(work.path(), None, line);
    assert!(quiet.status.success(), "{}", stderr(&quiet));
    assert!(!stderr(&quiet).contains(line), "{}", stderr(&quiet));
    let verbose = probe_says(work.path(), Some("-v"), line);
    assert!(verbose.status.success(), "{}", stderr(&verbose));
    assert!(stderr(&verbose).contains(line), "{}", stderr(&verbose));
}

#[test]
fn two_v_show_debug_lines_but_no_tls_http2_or_grpc_frames() {
    let work = tempfile::tempdir().unwrap();
    let line = "the plugin speaks";
    let out = probe_says(work.path(), Some("-vv"), line);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains(line), "{err}");
    assert!(err.contains("DEBUG"), "{err}");
    for noisy in ["h2::", "rustls::", "hyper", "tonic::", "tower::"] {
        assert!(!err.contains(noisy), "{noisy}: {err}");
    }
}

#[test]
fn help_says_how_to_see_a_plugins_output() {
    let work = tempfile::tempdir().unwrap();
    let out = tether(work.path(), &["--help"]);
    let help = stdout(&out);
    assert!(help.contains("everything it prints with -v"), "{help}");
    assert!(help.contains("RUST_LOG"), "{help}");
}

#[test]
fn help_lists_each_exit_status_once() {
    let work = tempfile::tempdir().unwrap();
    let help = stdout(&tether(work.path(), &["--help"]));
    let table = &help[help.find("Exit status:").expect("an exit status table")..];
    let codes: Vec<&str> = table
        .lines()
        .skip(1)
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(codes, ["0", "1", "2", "3", "4", "141"], "{table}");
}

// Item 6: describe.

#[test]
fn inspect_describes_methods_and_fields_and_marks_listed_services_that_are_not_served() {
    let work = tempfile::tempdir().unwrap();
    let catalog = demo_catalog();
    let out = tether(
        work.path(),
        &["inspect", "--catalog", &catalog, "word-count"],
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.contains(
            "\nservice tether.agent.v1.Executor\n  rpc Execute(tether.agent.v1.ExecuteRequest) returns (tether.agent.v1.ExecuteResponse)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "tether.agent.v1.ExecuteRequest { string step = 1; string params_json = 2; string input_json = 3; }"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "\nservice tether.agent.v1.Host (listed by reflection, but answers Unimplemented)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("returns (stream tether.agent.v1.ArtifactChunk)"),
        "{text}"
    );
    assert!(
        text.ends_with("shutdown: exited gracefully (exit status: 0)\n"),
        "{text}"
    );
}

#[test]
fn call_of_a_service_the_plugin_does_not_list_names_the_services_it_has() {
    let work = tempfile::tempdir().unwrap();
    let out = tether(
        work.path(),
        &[
            "call",
            "--cmd",
            bins::KV_PLUGIN.path(),
            "--cookie",
            "BASIC_PLUGIN=hello",
            "proto.Nope/Get",
            "{}",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(EXIT_INPUT), "{err}");
    assert!(
        err.starts_with(
            "tether: error: the plugin's server reflection does not list service \"proto.Nope\"; it has: grpc.health.v1.Health, "
        ),
        "{err}"
    );
    assert!(err.contains(", proto.KV (if the plugin serves"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

// Item 7: `tether run` against a plugin of another protocol.

#[test]
fn run_with_a_plugin_that_is_no_executor_names_the_plugin_the_step_and_what_to_serve() {
    let work = tempfile::tempdir().unwrap();
    let catalog = kv_catalog(work.path(), "kv-plugin");
    std::fs::write(
        work.path().join("wf.toml"),
        "name = \"w\"\n[[steps]]\nname = \"store\"\nplugin = \"kv\"\n",
    )
    .unwrap();
    let out = tether(
        work.path(),
        &[
            "run",
            "--catalog",
            catalog.to_str().unwrap(),
            "--bin-dir",
            &bin_dir(),
            "wf.toml",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(EXIT_START), "{err}");
    assert!(
        err.contains(
            "step `store`: plugin `kv` does not implement tether.agent.v1.Executor (it answered Execute with Unimplemented)"
        ),
        "{err}"
    );
    assert!(
        err.contains("must serve tether.agent.v1.Executor/Execute"),
        "{err}"
    );
}

// Item 10: terminals and pipes.

/// A pseudo-terminal: (controller, terminal).
fn pty() -> (std::fs::File, OwnedFd) {
    let (mut controller, mut terminal) = (0, 0);
    // SAFETY: openpty writes two descriptors into the given ints; the name, termios and size
    // pointers may be null.
    let rc = unsafe {
        libc::openpty(
            &mut controller,
            &mut terminal,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened by openpty and are owned by nobody else.
    unsafe {
        (
            std::fs::File::from_raw_fd(controller),
            OwnedFd::from_raw_fd(terminal),
        )
    }
}

/// `tether -v inspect` of the KV plugin with stderr on a terminal; what the terminal showed.
fn stderr_on_a_terminal(no_color: Option<&str>) -> String {
    let work = tempfile::tempdir().unwrap();
    let (mut controller, terminal) = pty();
    let mut command = Command::new(bins::TETHER.path());
    command
        .args(["-v", "inspect", "--cmd", bins::KV_PLUGIN.path()])
        .args(["--cookie", "BASIC_PLUGIN=hello"])
        .current_dir(work.path())
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .stderr(Stdio::from(terminal));
    if let Some(value) = no_color {
        command.env("NO_COLOR", value);
    }
    let mut child = command.spawn().unwrap();
    // The child holds the terminal now; ours went with `command`.
    drop(command);
    assert!(child.wait().unwrap().success());
    let mut shown = Vec::new();
    // Reading past the last byte of a terminal nobody holds fails with EIO: that is the end.
    let _ = controller.read_to_end(&mut shown);
    String::from_utf8_lossy(&shown).into_owned()
}

#[test]
fn logs_are_coloured_on_a_terminal_unless_no_color_is_set() {
    let coloured = stderr_on_a_terminal(None);
    assert!(coloured.contains("plugin started"), "{coloured}");
    assert!(coloured.contains('\u{1b}'), "{coloured:?}");
    for value in ["1", "true"] {
        let plain = stderr_on_a_terminal(Some(value));
        assert!(plain.contains("plugin started"), "{plain}");
        assert!(!plain.contains('\u{1b}'), "NO_COLOR={value}: {plain:?}");
    }
    // An empty NO_COLOR is unset (https://no-color.org).
    assert!(stderr_on_a_terminal(Some("")).contains('\u{1b}'));
}

#[test]
fn logs_have_no_colour_when_stderr_is_not_a_terminal() {
    let work = tempfile::tempdir().unwrap();
    let out = probe_says(work.path(), Some("-v"), "hello");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("plugin started"), "{err}");
    assert!(!err.contains('\u{1b}'), "{err:?}");
}

/// Live processes whose command line starts with `program`.
fn running(program: &Path) -> Vec<String> {
    let want = program.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let dir = entry.path();
        let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(dir.join("stat"))
            .ok()
            .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
            .unwrap_or(true);
        if !zombie && cmdline.starts_with(want.as_bytes()) {
            found.push(String::from_utf8_lossy(&cmdline).replace('\0', " "));
        }
    }
    found
}

#[test]
fn output_into_a_closed_pipe_ends_quietly_with_status_141_and_the_plugin_shut_down() {
    let work = tempfile::tempdir().unwrap();
    // A program path of this test's own, to find the plugin's process by.
    let plugin = work.path().join("kv-for-a-closed-pipe");
    std::os::unix::fs::symlink(bins::KV_PLUGIN.path(), &plugin).unwrap();
    let plugin_arg = plugin.to_str().unwrap();
    let catalog = demo_catalog();
    let commands: [&[&str]; 5] = [
        &["list", "--catalog", &catalog],
        &["check", "--catalog", &catalog],
        &[
            "inspect",
            "--cmd",
            plugin_arg,
            "--cookie",
            "BASIC_PLUGIN=hello",
        ],
        &[
            "call",
            "--cmd",
            plugin_arg,
            "--cookie",
            "BASIC_PLUGIN=hello",
            "proto.KV/Put",
            r#"{"key":"k"}"#,
        ],
        &["run", "--catalog", &catalog],
    ];
    for args in commands {
        // The reader is gone before tether writes anything, as `| head -1` is by the second line.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(bins::TETHER.path())
            .args(args)
            .current_dir(work.path())
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(EXIT_BROKEN_PIPE), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!err.contains("tether: error"), "{args:?}: {err}");
        assert!(running(&plugin).is_empty(), "{:?}", running(&plugin));
    }
}
