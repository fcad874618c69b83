//! `run`: the plugin as the shim's child — its stdout read line by line (the handshake
//! re-announced, everything else passed on), its stderr inherited, the container's stop signals
//! passed to it, and its exit status made the shim's.

use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt as _;
use std::process::{ExitCode, ExitStatus, Stdio};

use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpListener;
use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal};

use crate::SHIM_FAILED;
use crate::announce::{Announcer, Line, announce};
use crate::relay;

/// The exit status when the plugin's command cannot be started.
const NOT_STARTED: u8 = 127;

/// The signals a container runtime stops a container with, passed on to the plugin.
const FORWARDED: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// Runs `command` and relays `listen` to the socket it announces; returns its exit status.
pub(crate) fn run(listen: SocketAddr, command: &[&str]) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return failed(&format!("cannot start its runtime: {e}")),
    };
    runtime.block_on(supervise(listen, command))
}

async fn supervise(listen: SocketAddr, command: &[&str]) -> ExitCode {
    let mut child = match Command::new(command[0])
        .args(&command[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            eprintln!("tether-pod-shim: cannot start {}: {e}", command[0]);
            return ExitCode::from(NOT_STARTED);
        }
    };
    if let Err(e) = forward_signals(&child) {
        kill(&child, libc::SIGKILL);
        return failed(&format!("cannot forward signals to the plugin: {e}"));
    }
    let Some(stdout) = child.stdout.take() else {
        kill(&child, libc::SIGKILL);
        return failed("the plugin's stdout was not captured");
    };
    if let Err(message) = pass_stdout(stdout, listen).await {
        kill(&child, libc::SIGKILL);
        let _ = child.wait().await;
        return failed(&message);
    }
    match child.wait().await {
        Ok(status) => exit_code(status),
        Err(e) => failed(&format!("waiting for the plugin failed: {e}")),
    }
}

/// Copies the plugin's stdout to the shim's until it closes, starting the relay at the
/// handshake. Errs (with the reason) when the shim cannot listen.
async fn pass_stdout(
    stdout: tokio::process::ChildStdout,
    listen: SocketAddr,
) -> Result<(), String> {
    let mut lines = BufReader::new(stdout);
    let mut out = tokio::io::stdout();
    let mut announcer = Announcer::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        match lines.read_until(b'\n', &mut line).await {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(format!("reading the plugin's stdout failed: {e}")),
        }
        let printed = match announcer.line(&line) {
            Line::PassThrough => out.write_all(&line).await,
            Line::Unrelayable(reason) => {
                eprintln!("tether-pod-shim: {reason}");
                out.write_all(&line).await
            }
            Line::Handshake(handshake) => {
                let listener = TcpListener::bind(listen)
                    .await
                    .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
                let bound = listener
                    .local_addr()
                    .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
                let line = announce(&handshake, bound);
                tokio::spawn(relay::serve(listener, handshake.address));
                out.write_all(line.as_bytes()).await
            }
        };
        // Flushed per line: the host reads the handshake from the container's log stream.
        if let Err(e) = printed.and(out.flush().await) {
            return Err(format!("writing to stdout failed: {e}"));
        }
    }
}

fn forward_signals(child: &Child) -> std::io::Result<()> {
    let pid = child.id();
    for number in FORWARDED {
        let mut stream = signal(SignalKind::from_raw(number))?;
        tokio::spawn(async move {
            while stream.recv().await.is_some() {
                if let Some(pid) = pid.and_then(|p| libc::pid_t::try_from(p).ok()) {
                    // SAFETY: kill has no memory preconditions; the child is not yet reaped
                    // while this task runs (the runtime ends when the shim returns).
                    unsafe { libc::kill(pid, number) };
                }
            }
        });
    }
    Ok(())
}

fn kill(child: &Child, signal: libc::c_int) {
    if let Some(pid) = child.id().and_then(|p| libc::pid_t::try_from(p).ok()) {
        // SAFETY: as in forward_signals.
        unsafe { libc::kill(pid, signal) };
    }
}

fn exit_code(status: ExitStatus) -> ExitCode {
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        (None, Some(signal)) => ExitCode::from(u8::try_from(128 + signal).unwrap_or(255)),
        (None, None) => ExitCode::from(1),
    }
}

fn failed(message: &str) -> ExitCode {
    eprintln!("tether-pod-shim: {message}");
    ExitCode::from(SHIM_FAILED)
}
