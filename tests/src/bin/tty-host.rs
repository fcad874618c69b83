//! A host run from an interactive terminal, for the keystroke-injection test: its stdin,
//! stdout and stderr are a terminal that is also its controlling terminal (the test makes it
//! the leader of a session on a pseudo-terminal, as a login shell is).
//!
//! `tty-host PROBE_PLUGIN MARKER [sandbox-off]`:
//! 1. puts the terminal in non-canonical mode (echo on), so that any byte pushed into its input
//!    can be read at once;
//! 2. pushes `control\n` into its own terminal with `TIOCSTI` (the positive control: it shows
//!    that injection works on this terminal and this kernel);
//! 3. starts the probe plugin (confined as by default, or with `sandbox-off`) and asks it to
//!    push `echo MARKER\n` into the terminal (`Put "tiocsti:"`);
//! 4. reads everything waiting in the terminal's input and prints, on stdout:
//!    `plugin-result: ok` or `plugin-result: <the plugin's error>`, then
//!    `tty-input-hex: <hex of the bytes read>` (hex, so the marker cannot appear in the output
//!    by being printed here).

use std::process::ExitCode;

use tether_broker::{HandshakeConfig, PluginClient, SandboxMode};
use tether_examples::kv::PutRequest;
use tether_examples::kv::kv_client::KvClient;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(probe), Some(marker)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: tty-host PROBE_PLUGIN MARKER [sandbox-off]");
        return ExitCode::from(2);
    };
    let sandbox = if args.get(3).map(String::as_str) == Some("sandbox-off") {
        SandboxMode::Off
    } else {
        SandboxMode::Enforce
    };
    if let Err(e) = raw_input() {
        eprintln!("tty-host: cannot set up the terminal: {e}");
        return ExitCode::from(2);
    }
    if let Err(e) = tether_tests::escape::inject_into_terminal(b"control\n") {
        eprintln!("tty-host: the positive control failed: {e}");
        return ExitCode::from(3);
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let plugin = match PluginClient::builder(probe)
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .current_dir(dir.path())
        .sandbox(sandbox)
        .start()
        .await
    {
        Ok(plugin) => plugin,
        Err(e) => {
            eprintln!("tty-host: {e}");
            return ExitCode::from(4);
        }
    };
    let result = KvClient::new(plugin.channel())
        .put(PutRequest {
            key: "tiocsti:".into(),
            value: format!("echo {marker}\n").into_bytes(),
        })
        .await;
    let _ = plugin.shutdown().await;
    match result {
        Ok(_) => println!("plugin-result: ok"),
        Err(status) => println!("plugin-result: {}", status.message()),
    }
    let input = pending_input();
    let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
    println!("tty-input-hex: {hex}");
    ExitCode::SUCCESS
}

/// Non-canonical input that never waits (`VMIN = VTIME = 0`), echo left on.
fn raw_input() -> std::io::Result<()> {
    // SAFETY: tcgetattr/tcsetattr on stdin with a zeroed termios they fill in.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(0, &mut t) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        t.c_lflag &= !libc::ICANON;
        t.c_cc[libc::VMIN] = 0;
        t.c_cc[libc::VTIME] = 0;
        if libc::tcsetattr(0, libc::TCSANOW, &t) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Everything waiting in the terminal's input queue.
fn pending_input() -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = [0_u8; 256];
    loop {
        // SAFETY: read into a local buffer of the given size.
        let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        let Ok(n) = usize::try_from(n) else { break };
        if n == 0 {
            break;
        }
        all.extend_from_slice(&buf[..n]);
    }
    all
}
