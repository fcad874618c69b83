//! A tether-sdk plugin that reports what it can reach, for the confinement tests. Serves the KV
//! contract (cookie `BASIC_PLUGIN=hello`) with probe commands as keys, like
//! `tests/go/probeplugin`:
//!
//! - `Get "read:PATH"`: the file's contents; `PermissionDenied`, `NotFound` or `Internal`;
//! - `Get "list:DIR"`: the directory's entry names, one per line;
//! - `Get "env:NAME"`: the variable's value, `NotFound` when unset;
//! - `Get "envall:"`: every `NAME=VALUE`, one per line;
//! - `Get "secret:NAME"` / `Get "config:NAME"`: read with `tether_sdk::secrets` / `config`;
//! - `Get "pid:"`: its process id;
//! - `Get "connect:ADDR"`: `connected` when a TCP connection to `ADDR` succeeds within
//!   [`CONNECT_TIMEOUT`], `Unavailable` with the error otherwise;
//! - `Get "ids:"`: its real user and group ids, `UID GID`;
//! - `Get "attack:NAME"`: an attack on the host (its parent), `ok` or the errno's name (see
//!   `tether_tests::escape::host_attack`);
//! - `Get "attack-pid:PID:NAME"`: the same attacks (and `sigkill`) on the process `PID`, as
//!   the plugin names it (`tether_tests::escape::process_attack`);
//! - `Get "syscall:NAME"`: a system call a plugin should not have, tried harmlessly, `ok` or
//!   the errno's name (`tether_tests::escape::syscall`);
//! - `Get "tcp-connect:HOST:PORT"`, `Get "tcp-listen:HOST:PORT"`, `Get "unix-connect:PATH"`:
//!   `ok` or the errno's name;
//! - `Get "abstract-listen:NAME"` (kept open until the plugin ends), `Get "abstract-connect:NAME"`:
//!   an abstract unix socket, `ok` or the errno's name;
//! - `Get "unix-talk:PATH"`: connects to a daemon's unix socket and reads its greeting (`ok
//!   GREETING` or the errno's name; `tether_tests::shared_world::unix_talk`);
//! - `Get "fifo-write:PATH"`: opens a FIFO for writing (not blocking) and writes a line into it
//!   (`ok` or the errno's name; `tether_tests::shared_world::fifo_write`);
//! - `Get "metadata:GID:PATH"`: tries `chmod` 04777, `chown` to group `GID`, `utimensat` and
//!   `setxattr` on `PATH` (`chmod=ok chown=EPERM …`);
//! - `Get "loosen:DIR"`: tries to leave a set-uid file, a device node, a file of another owner
//!   and a file capability in `DIR` (`chmod-suid=EPERM …`; `tether_tests::loosening::attempt`);
//! - `Get "sockets:"`: every unix socket path in `/proc/net/unix` and `/proc/<pid>/net/unix`;
//! - `Get "steal:KEY"`: a plaintext gRPC `proto.KV/Get KEY` on each of those that looks like a
//!   plugin's, outside its own private directory, `PATH OUTCOME` a line;
//! - `Get "ps:"`: every process it can see, `PID PPID CMDLINE` a line, its own first;
//! - `Get "sysv-list:"`: the SysV IPC objects it can list;
//! - `Get "sysv:ATTACK:KEY:VALUE"`: `shm-read`, `shm-write`, `msg-receive`, `sem-set` on the
//!   object with that key (`tether_tests::shared_world::sysv`);
//! - `Get "inotify-watch:DIR"`: adds `DIR` to its inotify watches (`ok` or the errno's name);
//!   `Get "inotify-events:"`: what those watches saw so far, `DIR/NAME MASK` a line;
//! - `Get "fill:PATH"`: writes up to 1 GiB into `PATH` (a leading `$TMPDIR` is its `TMPDIR`),
//!   then removes it: `ENOSPC BYTES` or `ok BYTES`;
//! - `Put "udp-send:HOST:PORT"`: sends the value as one datagram (`ok` or the errno's name,
//!   as an `Internal` status);
//! - `Put "tiocsti:"`: pushes the value into the controlling terminal's input, byte by byte,
//!   with `TIOCSTI` (a `PermissionDenied` status names the step and errno that stopped it);
//! - `Get "cwd:"`: its working directory;
//! - `Put "write:PATH"`: writes the value to `PATH`;
//! - `Put "balloon:"`: allocates and touches the value (decimal) MiB of memory;
//! - `Put "say:TEXT"`: prints `TEXT` to stderr as a plain line (no log level);
//! - `Put "crash:"`: exits with status 3 after printing `crashing on purpose` to stderr;
//! - `Put "child:"`: starts a `sleep` grandchild in its process group;
//! - `Put "escape:"`: starts a `sleep` grandchild in a process group of its own (which the
//!   plugin's group kill does not reach);
//! - `Put "setsid:"`: starts a `sleep` grandchild that calls `setsid()` before exec: a session
//!   and process group of its own, which no process-group kill reaches;
//! - `Put "forkbomb:"`: starts a fork bomb bounded at the value (decimal) levels of doubling —
//!   about `2^(levels+2)` processes in its process group, each sleeping — and returns.
//!
//! Started as `probe-plugin --on-start KEY=VALUE…`, it first performs each `Put`-style probe
//! (`write:PATH=TEXT`, `copy:FROM=TO`) before serving, as a plugin that misbehaves without
//! being called would (`tether inspect` makes no call); each outcome goes to stderr.

use std::io;
use std::process::ExitCode;

use secrecy::ExposeSecret as _;
use tether_examples::kv::kv_server::{Kv, KvServer};
use tether_examples::kv::{Empty, GetRequest, GetResponse, PutRequest};
use tether_tests::escape;
use tether_tests::shared_world::{self, Watcher};
use tonic::{Request, Response, Status};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--on-start") {
        args[1..].iter().for_each(|probe| on_start(probe));
    }
    tether_sdk::Plugin::new(tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").app_version(1))
        .add_service(KvServer::new(Probe))
        .run()
}

struct Probe;

/// How long `connect:` tries.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
/// One `--on-start` probe: `write:PATH=TEXT` or `copy:FROM=TO`.
fn on_start(probe: &str) {
    let outcome = match probe.split_once(':') {
        Some(("write", rest)) => {
            let (path, text) = rest.split_once('=').unwrap_or((rest, ""));
            std::fs::write(path, text)
        }
        Some(("copy", rest)) => {
            let (from, to) = rest.split_once('=').unwrap_or((rest, ""));
            std::fs::read(from).and_then(|bytes| std::fs::write(to, bytes))
        }
        _ => Err(io::Error::other("unknown on-start probe")),
    };
    eprintln!("on-start {probe}: {outcome:?}");
}

/// The inotify instance of `inotify-watch:`, made at the first watch.
static WATCHER: std::sync::Mutex<Option<Watcher>> = std::sync::Mutex::new(None);

fn watch(dir: &str) -> String {
    let Ok(mut watcher) = WATCHER.lock() else {
        return "poisoned".to_owned();
    };
    if watcher.is_none() {
        match Watcher::new() {
            Ok(new) => *watcher = Some(new),
            Err(errno) => return format!("inotify_init1 {errno}"),
        }
    }
    watcher.as_mut().map_or_else(String::new, |w| w.watch(dir))
}

/// `steal:KEY`: a plaintext `Get KEY` on every plugin socket it can find (a path through a
/// `tether-` directory or named `plugin…`, as go-plugin names them) outside its own private
/// directory. Other sockets are left alone: the machine's daemons are not the target here.
async fn steal(key: &str) -> String {
    let own = std::env::var(tether_proto::env::UNIX_SOCKET_DIR).unwrap_or_default();
    let mut lines = Vec::new();
    for socket in shared_world::socket_paths() {
        let plugin_like = socket.contains("/tether-") || socket.contains("/plugin");
        if !plugin_like || (!own.is_empty() && socket.starts_with(&own)) {
            continue;
        }
        lines.push(format!(
            "{socket} {}",
            shared_world::grpc_get(&socket, key).await
        ));
    }
    lines.join("\n")
}

fn fs_error(op: &str, path: &str, e: &io::Error) -> Status {
    let message = format!("{op} {path}: {e}");
    match e.kind() {
        io::ErrorKind::PermissionDenied => Status::permission_denied(message),
        io::ErrorKind::NotFound => Status::not_found(message),
        _ => Status::internal(message),
    }
}

fn ok(value: impl Into<Vec<u8>>) -> Result<Response<GetResponse>, Status> {
    Ok(Response::new(GetResponse {
        value: value.into(),
    }))
}

#[tonic::async_trait]
impl Kv for Probe {
    async fn get(&self, request: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        let key = request.into_inner().key;
        let (cmd, arg) = key.split_once(':').unwrap_or((key.as_str(), ""));
        match cmd {
            "read" => std::fs::read(arg).map_or_else(|e| Err(fs_error("read", arg, &e)), ok),
            "list" => {
                let entries = std::fs::read_dir(arg).map_err(|e| fs_error("list", arg, &e))?;
                let names: Vec<String> = entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                ok(names.join("\n"))
            }
            "env" => match std::env::var_os(arg) {
                Some(v) => ok(v.into_encoded_bytes()),
                None => Err(Status::not_found(format!("{arg} is not set"))),
            },
            "envall" => {
                let all: Vec<String> = std::env::vars_os()
                    .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
                    .collect();
                ok(all.join("\n"))
            }
            "secret" => match tether_sdk::secrets::read(arg) {
                Ok(v) => ok(v.expose_secret().to_vec()),
                Err(e) => Err(Status::failed_precondition(e.to_string())),
            },
            "config" => match tether_sdk::config::read(arg) {
                Ok(v) => ok(v),
                Err(e) => Err(Status::failed_precondition(e.to_string())),
            },
            "pid" => ok(std::process::id().to_string()),
            "connect" => {
                let addr: std::net::SocketAddr = arg
                    .parse()
                    .map_err(|e| Status::invalid_argument(format!("connect {arg}: {e}")))?;
                std::net::TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
                    .map_err(|e| Status::unavailable(format!("connect {arg}: {e}")))?;
                ok("connected")
            }
            // SAFETY: getuid and getgid have no preconditions.
            "ids" => ok(format!("{} {}", unsafe { libc::getuid() }, unsafe {
                libc::getgid()
            })),
            "attack" => ok(escape::host_attack(arg)),
            "attack-pid" => {
                let (pid, attack) = arg.split_once(':').unwrap_or((arg, ""));
                let pid = pid
                    .parse()
                    .map_err(|e| Status::invalid_argument(format!("attack-pid {pid:?}: {e}")))?;
                ok(escape::process_attack(attack, pid))
            }
            "syscall" => ok(escape::syscall(arg)),
            "tcp-connect" => ok(escape::tcp_connect(arg)),
            "tcp-listen" => ok(escape::tcp_listen(arg)),
            "unix-connect" => ok(escape::unix_connect(arg)),
            "abstract-listen" => ok(escape::abstract_listen(arg)),
            "abstract-connect" => ok(escape::abstract_connect(arg)),
            "unix-talk" => ok(shared_world::unix_talk(arg)),
            "fifo-write" => ok(shared_world::fifo_write(arg)),
            "metadata" => {
                let (gid, path) = arg.split_once(':').unwrap_or(("0", arg));
                ok(shared_world::metadata(
                    std::path::Path::new(path),
                    gid.parse().unwrap_or(0),
                ))
            }
            "loosen" => ok(tether_tests::loosening::attempt(std::path::Path::new(arg))),
            "sockets" => ok(shared_world::socket_paths().join("\n")),
            "steal" => ok(steal(arg).await),
            "ps" => ok(shared_world::processes()),
            "sysv-list" => ok(shared_world::sysv_list()),
            "sysv" => {
                let mut parts = arg.splitn(3, ':');
                let (attack, key, value) = (
                    parts.next().unwrap_or_default(),
                    parts.next().and_then(|k| k.parse().ok()).unwrap_or(0),
                    parts.next().unwrap_or_default(),
                );
                ok(shared_world::sysv(attack, key, value.as_bytes()))
            }
            "inotify-watch" => ok(watch(arg)),
            "inotify-events" => ok(WATCHER
                .lock()
                .map(|mut w| w.as_mut().map(Watcher::events).unwrap_or_default())
                .unwrap_or_default()
                .join("\n")),
            "fill" => {
                let path = match arg.strip_prefix("$TMPDIR") {
                    Some(rest) => format!("{}{rest}", std::env::temp_dir().display()),
                    None => arg.to_owned(),
                };
                ok(shared_world::fill(std::path::Path::new(&path)))
            }
            "cwd" => std::env::current_dir().map_or_else(
                |e| Err(fs_error("cwd", "", &e)),
                |d| ok(d.into_os_string().into_encoded_bytes()),
            ),
            _ => Err(Status::invalid_argument(format!("unknown probe {key:?}"))),
        }
    }

    async fn put(&self, request: Request<PutRequest>) -> Result<Response<Empty>, Status> {
        let PutRequest { key, value } = request.into_inner();
        let (cmd, arg) = key.split_once(':').unwrap_or((key.as_str(), ""));
        match cmd {
            "write" => std::fs::write(arg, &value).map_err(|e| fs_error("write", arg, &e))?,
            "balloon" => {
                let mib: usize = String::from_utf8_lossy(&value)
                    .parse()
                    .map_err(|_| Status::invalid_argument("balloon: value must be MiB"))?;
                let mut chunks = Vec::new();
                for _ in 0..mib {
                    // Touch every page so the memory is really used.
                    chunks.push(vec![1_u8; 1024 * 1024]);
                }
                std::hint::black_box(&chunks);
            }
            "say" => eprintln!("{arg}"),
            "udp-send" => match escape::udp_send(arg, &value).as_str() {
                "ok" => {}
                failed => return Err(Status::internal(failed.to_owned())),
            },
            "tiocsti" => escape::inject_into_terminal(&value).map_err(Status::permission_denied)?,
            "crash" => {
                eprintln!("crashing on purpose");
                std::process::exit(3);
            }
            "orphans" => {
                // A shell that starts short-lived children and exits at once: they are
                // orphaned (running or already exited) and must be reaped by someone else.
                let status = std::process::Command::new("/bin/sh")
                    .args([
                        "-c",
                        "for i in 1 2 3 4 5 6 7 8; do /bin/true & done; exit 0",
                    ])
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .status()
                    .map_err(|e| Status::internal(format!("orphans: {e}")))?;
                if !status.success() {
                    return Err(Status::internal(format!("orphans: {status}")));
                }
            }
            "child" => {
                let child = tether_tests::misbehave::spawn_sleeping_grandchild();
                std::mem::forget(child);
            }
            "escape" => {
                use std::os::unix::process::CommandExt as _;
                let child = std::process::Command::new("sleep")
                    .arg("3600")
                    .process_group(0)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .map_err(|e| Status::internal(format!("escape: {e}")))?;
                std::mem::forget(child);
            }
            "setsid" => {
                use std::os::unix::process::CommandExt as _;
                let mut command = std::process::Command::new("sleep");
                command
                    .arg("3600")
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null());
                // SAFETY: setsid is async-signal-safe and touches no memory.
                unsafe {
                    command.pre_exec(|| {
                        if libc::setsid() < 0 {
                            return Err(io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
                let child = command
                    .spawn()
                    .map_err(|e| Status::internal(format!("setsid: {e}")))?;
                std::mem::forget(child);
            }
            "forkbomb" => {
                let levels: u32 = String::from_utf8_lossy(&value)
                    .parse()
                    .map_err(|_| Status::invalid_argument("forkbomb: value must be levels"))?;
                // Each `bomb` forks two more until the level runs out; every shell also leaves
                // a `sleep`. Bounded so that the test cannot take the machine down.
                let script = "bomb() { if [ \"$1\" -gt 0 ]; then bomb $(($1 - 1)) & bomb $(($1 - 1)) & fi; sleep 3600; }; bomb \"$0\"";
                let child = std::process::Command::new("/bin/sh")
                    .args(["-c", script, &levels.to_string()])
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .map_err(|e| Status::internal(format!("forkbomb: {e}")))?;
                std::mem::forget(child);
            }
            _ => return Err(Status::invalid_argument(format!("unknown probe {key:?}"))),
        }
        Ok(Response::new(Empty {}))
    }
}
