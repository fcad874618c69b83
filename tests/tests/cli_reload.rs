//! `tether run` reloads its catalog on `SIGHUP` (issue 24, item 4): a plugin whose manifest
//! changed is upgraded while the workflow goes on, one whose new version does not start keeps
//! running as it was, and each outcome is a line on stderr.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use tether_tests::bins;

const BROKEN: &str = env!("CARGO_BIN_EXE_exit-before-handshake");

/// How long `tether run` may take to print the line a test waits for.
const LINE_TIMEOUT: Duration = Duration::from_secs(60);

/// The `word-count` step's manifest: `command` with the given idle timeout (which makes two
/// manifests of one program differ).
fn word_count(command: &str, idle_timeout: &str) -> String {
    format!(
        "name = \"word-count\"\ncommand = \"{command}\"\nargs = [\"step\", \"word-count\"]\n\
         idle_timeout = \"{idle_timeout}\"\n[handshake]\ncookie_key = \"TETHER_AGENT_PLUGIN\"\n\
         cookie_value = \"executor\"\napp_versions = [1]\n"
    )
}

fn signal(child: &Child, signal: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_child(child);
    rustix::process::kill_process(pid, signal).unwrap();
}

#[test]
fn sighup_upgrades_a_changed_plugin_while_tether_run_goes_on_and_keeps_it_when_the_new_version_fails()
 {
    let work = tempfile::tempdir().unwrap();
    let catalog = work.path().join("catalog");
    std::fs::create_dir_all(catalog.join("bin")).unwrap();
    std::os::unix::fs::symlink(bins::AGENT_DEMO.path(), catalog.join("bin/agent-demo")).unwrap();
    std::os::unix::fs::symlink(BROKEN, catalog.join("bin/broken")).unwrap();
    let manifest = catalog.join("word-count.toml");
    std::fs::write(&manifest, word_count("bin/agent-demo", "60s")).unwrap();
    std::fs::write(
        work.path().join("workflow.toml"),
        "name = \"count\"\n[[steps]]\nname = \"count\"\nplugin = \"word-count\"\n\
         params = { text = \"one two three\" }\n",
    )
    .unwrap();
    // Runs until the test ends it: the steps go on through both reloads.
    let mut child = Command::new(bins::TETHER.path())
        .args(["run", "--repeat", "4000000000", "--catalog"])
        .arg(&catalog)
        .current_dir(work.path())
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, stderr) = mpsc::channel();
    let pipe = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let mut log = String::new();
    let mut wait_for = |what: &str| -> String {
        loop {
            let Ok(line) = stderr.recv_timeout(LINE_TIMEOUT) else {
                panic!("tether run printed no line with {what:?}:\n{log}");
            };
            log.push_str(&line);
            log.push('\n');
            if line.contains(what) {
                return line;
            }
        }
    };
    wait_for("count (word-count): 3 words");

    // A new version (another manifest): upgraded.
    std::fs::write(&manifest, word_count("bin/agent-demo", "61s")).unwrap();
    signal(&child, rustix::process::Signal::HUP);
    let upgraded = wait_for("plugin `word-count` upgraded");
    assert!(upgraded.contains("its new instance (pid "), "{upgraded}");
    let summary = wait_for("catalog reloaded");
    assert!(
        summary.contains("1 upgraded [\"word-count\"], 0 failed"),
        "{summary}"
    );

    // A version that exits before its handshake: not upgraded, the running one goes on.
    std::fs::write(&manifest, word_count("bin/broken", "62s")).unwrap();
    signal(&child, rustix::process::Signal::HUP);
    let failed = wait_for("plugin `word-count` was not upgraded");
    for cause in [
        "start (handshake) failed",
        "exit status: 3",
        "cannot open the plugin database",
        "The running version keeps serving",
    ] {
        assert!(failed.contains(cause), "{cause:?} not in: {failed}");
    }
    let summary = wait_for("catalog reloaded");
    assert!(
        summary.contains("0 upgraded [], 1 failed [\"word-count\"]"),
        "{summary}"
    );

    // No step failed: the run is still going.
    assert!(
        child.try_wait().unwrap().is_none(),
        "tether run ended:\n{log}"
    );
    signal(&child, rustix::process::Signal::TERM);
    child.wait().unwrap();
    while let Ok(line) = stderr.try_recv() {
        log.push_str(&line);
        log.push('\n');
    }
    assert!(!log.contains("error:"), "{log}");
}
