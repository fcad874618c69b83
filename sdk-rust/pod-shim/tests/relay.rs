//! The shim around a real process: a Python program standing in for a plugin (it prints a
//! go-plugin handshake for a unix socket and echoes on it), as in a Pod.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

const SHIM: &str = env!("CARGO_BIN_EXE_tether-pod-shim");

/// A plugin on a unix socket in its temporary directory: prints a stray line, then the
/// handshake; echoes what each connection sends; ends on SIGTERM with status 143.
const ECHO_PLUGIN: &str = r#"
import os, signal, socket, sys, tempfile, threading
signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
path = os.path.join(tempfile.mkdtemp(), "plugin.sock")
server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen()
print("starting", flush=True)
print(f"1|1|unix|{path}|grpc|CERT|true", flush=True)
def echo(conn):
    while data := conn.recv(4096):
        conn.sendall(data)
    conn.close()
while True:
    conn, _ = server.accept()
    threading.Thread(target=echo, args=(conn,), daemon=True).start()
"#;

fn shim(args: &[&str]) -> Child {
    Command::new(SHIM)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the shim starts")
}

fn python() -> Option<&'static str> {
    let found = Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var("TETHER_REQUIRE_PEERS").as_deref() != Ok("1"),
            "python3 is required for the shim's relay test (TETHER_REQUIRE_PEERS=1)"
        );
        eprintln!("skipping: no python3");
    }
    found.then_some("python3")
}

#[test]
fn a_plugin_on_a_unix_socket_is_reached_through_the_shims_tcp_port_and_stopped_by_its_signal() {
    let Some(python) = python() else { return };
    let mut child = shim(&[
        "run",
        "--listen",
        "127.0.0.1:0",
        "--",
        python,
        "-c",
        ECHO_PLUGIN,
    ]);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "starting\n", "stray output passes through");
    line.clear();
    stdout.read_line(&mut line).unwrap();
    let fields: Vec<&str> = line.trim_end().split('|').collect();
    assert_eq!(fields[..3], ["1", "1", "tcp"], "{line}");
    assert_eq!(
        fields[4..],
        ["grpc", "CERT", "true"],
        "every other field kept: {line}"
    );
    let address = fields[3];
    assert!(
        address.starts_with("127.0.0.1:") && address != "127.0.0.1:0",
        "{line}"
    );

    for round in 0..2 {
        let mut conn = TcpStream::connect(address).unwrap();
        let message = format!("hello {round}");
        conn.write_all(message.as_bytes()).unwrap();
        conn.shutdown(std::net::Shutdown::Write).unwrap();
        let mut echoed = String::new();
        conn.read_to_string(&mut echoed).unwrap();
        assert_eq!(echoed, message);
    }

    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143), "the plugin's own exit status");
}

#[test]
fn a_plugin_that_exits_before_its_handshake_gives_its_status_and_the_shim_never_listens() {
    let mut child = shim(&[
        "run",
        "--listen",
        "127.0.0.1:0",
        "--",
        "/bin/sh",
        "-c",
        "echo no handshake; exit 3",
    ]);
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(out, "no handshake\n");
    assert_eq!(child.wait().unwrap().code(), Some(3));
}

#[test]
fn a_plugin_that_announces_another_machine_is_not_relayed_and_the_reason_is_said() {
    let mut child = shim(&[
        "run",
        "--listen",
        "127.0.0.1:0",
        "--",
        "/bin/sh",
        "-c",
        "echo '1|1|tcp|192.0.2.1:1234|grpc|'",
    ]);
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(
        out, "1|1|tcp|192.0.2.1:1234|grpc|\n",
        "printed unchanged for the host to judge"
    );
    assert!(err.contains("192.0.2.1:1234"), "{err}");
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn a_command_that_cannot_start_exits_127_and_bad_arguments_2() {
    let status = Command::new(SHIM)
        .args([
            "run",
            "--listen",
            "127.0.0.1:0",
            "--",
            "/nonexistent/plugin",
        ])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(127));
    let status = Command::new(SHIM)
        .args(["run", "--", "x"])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2));
}

#[test]
fn install_copies_the_shim_read_and_execute_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new(SHIM)
        .arg("install")
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    let installed = dir.path().join("tether-pod-shim");
    let mode = std::fs::metadata(&installed).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o555);
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(SHIM).unwrap()
    );
}
