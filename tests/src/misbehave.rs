//! Pieces shared by the misbehaving plugins in `src/bin/`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// Where a plugin should create its unix socket: inside `PLUGIN_UNIX_SOCKET_DIR` (the host's
/// private per-launch directory) when set, else the temporary directory.
#[must_use]
pub fn socket_path() -> PathBuf {
    std::env::var_os(tether_proto::env::UNIX_SOCKET_DIR)
        .map_or_else(std::env::temp_dir, PathBuf::from)
        .join(format!("misbehave-{}.sock", std::process::id()))
}

/// Starts a `sleep` grandchild in the plugin's process group, so tests can check that the whole
/// group is stopped, not only the plugin.
///
/// # Panics
/// When `sleep` cannot be started (it is part of coreutils).
#[must_use]
pub fn spawn_sleeping_grandchild() -> Child {
    Command::new("sleep")
        .arg("3600")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("coreutils `sleep` is installed")
}

/// Blocks forever; only a signal ends the process.
pub fn park_forever() -> ! {
    loop {
        std::thread::park();
    }
}

/// Prints `line` plus a newline on stdout and flushes.
///
/// # Panics
/// When stdout is closed.
pub fn print_line(line: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").expect("stdout is open");
    out.flush().expect("stdout is open");
}
