//! Escape attempts through what a confined plugin still shares with its host (issue 22): daemon
//! sockets, file metadata, a sibling plugin's socket, SysV IPC, inotify, the disk and the
//! process table. The probe plugins make them from inside their confinement; each returns
//! `"ok …"` when it worked, else the errno's name, so tests compare short strings.
//!
//! Unlike [`escape`](crate::escape), some of these attempts change something when they work
//! (a file's mode, a semaphore): they are only ever pointed at what a test made for them.

use std::ffi::CString;
use std::io::{self, Read as _, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::time::Duration;

use crate::escape::errno_name;

/// How long [`unix_talk`] waits for the daemon's greeting.
pub const TALK_TIMEOUT: Duration = Duration::from_secs(2);
/// What [`fill`] writes at most: 1 GiB, far above any disk cap a test sets.
pub const FILL_LIMIT: u64 = 1 << 30;
/// The size of each of [`fill`]'s writes.
const FILL_CHUNK: usize = 1 << 20;
/// The mode [`metadata`] tries to give a file: setuid, readable, writable and executable by all.
pub const HOSTILE_MODE: u32 = 0o4777;
/// The extended attribute [`metadata`] tries to set.
pub const HOSTILE_XATTR: &str = "user.tether-hostile";

fn last_errno() -> String {
    errno_name(io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

fn io_errno(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(errno) => errno_name(errno),
        None if e.kind() == io::ErrorKind::TimedOut || e.kind() == io::ErrorKind::WouldBlock => {
            "ETIMEDOUT".to_owned()
        }
        None => format!("error: {e}"),
    }
}

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap_or_default()
}

/// Connects to the unix socket `path` and reads one line from the daemon behind it within
/// [`TALK_TIMEOUT`]: `"ok LINE"`, `"connected, no answer: ERRNO"`, or the connect errno.
#[must_use]
pub fn unix_talk(path: &str) -> String {
    let mut stream = match std::os::unix::net::UnixStream::connect(path) {
        Ok(stream) => stream,
        Err(e) => return io_errno(&e),
    };
    let _ = stream.set_read_timeout(Some(TALK_TIMEOUT));
    let _ = stream.write_all(b"hello from a plugin\n");
    let mut answer = [0_u8; 256];
    match stream.read(&mut answer) {
        Ok(n) => format!(
            "ok {}",
            String::from_utf8_lossy(&answer[..n]).trim_end_matches('\n')
        ),
        Err(e) => format!("connected, no answer: {}", io_errno(&e)),
    }
}

/// Opens the FIFO `path` for writing without blocking and writes one line into it: `"ok"`, or
/// the errno's name (`ENXIO` means the open was permitted but no reader was there).
#[must_use]
pub fn fifo_write(path: &str) -> String {
    use std::os::unix::fs::OpenOptionsExt as _;
    let opened = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
    match opened {
        Ok(mut fifo) => match fifo.write_all(b"hello from a plugin\n") {
            Ok(()) => "ok".to_owned(),
            Err(e) => format!("opened, no write: {}", io_errno(&e)),
        },
        Err(e) => io_errno(&e),
    }
}

/// Tries to change the metadata of `path`, which the plugin was not granted: `chmod` to
/// [`HOSTILE_MODE`], `chown` to group `gid`, `utimensat` to the epoch and `setxattr`
/// [`HOSTILE_XATTR`]. One `NAME=OUTCOME` a call, space-separated.
#[must_use]
pub fn metadata(path: &Path, gid: u32) -> String {
    let c = c_path(path);
    let result = |r: libc::c_int| {
        if r == 0 {
            "ok".to_owned()
        } else {
            last_errno()
        }
    };
    // SAFETY (whole block): system calls on a NUL-terminated path with valid pointers to
    // locals.
    unsafe {
        let chmod = result(libc::chmod(c.as_ptr(), HOSTILE_MODE));
        let chown = result(libc::chown(c.as_ptr(), u32::MAX, gid));
        let epoch = [libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        }; 2];
        let utimensat = result(libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            epoch.as_ptr(),
            0,
        ));
        let name = CString::new(HOSTILE_XATTR).unwrap_or_default();
        let setxattr = result(libc::setxattr(
            c.as_ptr(),
            name.as_ptr(),
            b"x".as_ptr().cast(),
            1,
            0,
        ));
        format!("chmod={chmod} chown={chown} utimensat={utimensat} setxattr={setxattr}")
    }
}

/// Every pathname unix socket the plugin can find in `/proc/net/unix` and in
/// `/proc/<pid>/net/unix` of every process it can list (other network namespaces included).
#[must_use]
pub fn socket_paths() -> Vec<String> {
    let mut tables = vec!["/proc/net/unix".to_owned()];
    tables.extend(
        pids()
            .into_iter()
            .map(|pid| format!("/proc/{pid}/net/unix")),
    );
    let mut paths: Vec<String> = tables
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                // Num RefCount Protocol Flags Type St Inode Path; abstract names start with '@'.
                .filter_map(|line| line.split_whitespace().nth(7).map(str::to_owned))
                .filter(|path| path.starts_with('/'))
                .collect::<Vec<_>>()
        })
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// The numeric entries of `/proc` the plugin can list.
fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// Every process the plugin can see: `PID PPID CMDLINE` a line (`?` for a parent it cannot
/// read, `<ERRNO>` for a command line it cannot read), its own first.
#[must_use]
pub fn processes() -> String {
    let me = std::process::id();
    let mut pids = pids();
    pids.sort_by_key(|pid| (*pid != me, *pid));
    pids.iter()
        .map(|pid| {
            let ppid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let rest = stat.get(stat.rfind(')')? + 1..)?.to_owned();
                    rest.split_whitespace().nth(1).map(str::to_owned)
                })
                .unwrap_or_else(|| "?".to_owned());
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).map_or_else(
                |e| format!("<{}>", io_errno(&e)),
                |b| {
                    String::from_utf8_lossy(&b)
                        .replace('\0', " ")
                        .trim()
                        .to_owned()
                },
            );
            format!("{pid} {ppid} {cmdline}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The SysV IPC objects the plugin can list: `/proc/sysvipc/{shm,msg,sem}`, their header lines
/// dropped, each line prefixed with its kind; a file it cannot read as `KIND <ERRNO>`.
#[must_use]
pub fn sysv_list() -> String {
    ["shm", "msg", "sem"]
        .iter()
        .flat_map(
            |kind| match std::fs::read_to_string(format!("/proc/sysvipc/{kind}")) {
                Ok(text) => text
                    .lines()
                    .skip(1)
                    .map(|line| format!("{kind} {}", line.trim()))
                    .collect(),
                Err(e) => vec![format!("{kind} <{}>", io_errno(&e))],
            },
        )
        .collect::<Vec<_>>()
        .join("\n")
}

/// Attacks the SysV IPC object with key `key`: `shm-read` (attach read-only, the first 64
/// bytes up to a NUL), `shm-write` (attach, write `value` at the start), `msg-receive` (take
/// the first message, without waiting), `sem-set` (set semaphore 0 to `value` as a number).
/// `"ok …"` or the errno's name of the first call that failed.
#[must_use]
pub fn sysv(attack: &str, key: i32, value: &[u8]) -> String {
    // SAFETY (whole match): SysV IPC calls with valid pointers to locals; a segment is
    // detached before returning and only `value.len()` bytes (at most its size) are written.
    unsafe {
        match attack {
            "shm-read" | "shm-write" => {
                let id = libc::shmget(key, 0, 0);
                if id < 0 {
                    return last_errno();
                }
                let flags = if attack == "shm-read" {
                    libc::SHM_RDONLY
                } else {
                    0
                };
                let at = libc::shmat(id, std::ptr::null(), flags);
                if at as isize == -1 {
                    return format!("shmat {}", last_errno());
                }
                let mut stat: libc::shmid_ds = std::mem::zeroed();
                libc::shmctl(id, libc::IPC_STAT, &mut stat);
                let size = stat.shm_segsz.min(64);
                let outcome = if attack == "shm-read" {
                    let bytes = std::slice::from_raw_parts(at.cast::<u8>(), size);
                    let end = bytes.iter().position(|b| *b == 0).unwrap_or(size);
                    format!("ok {}", String::from_utf8_lossy(&bytes[..end]))
                } else {
                    let n = value.len().min(size);
                    std::ptr::copy_nonoverlapping(value.as_ptr(), at.cast::<u8>(), n);
                    "ok".to_owned()
                };
                libc::shmdt(at);
                outcome
            }
            "msg-receive" => {
                let id = libc::msgget(key, 0);
                if id < 0 {
                    return last_errno();
                }
                #[repr(C)]
                struct Message {
                    mtype: libc::c_long,
                    text: [u8; 128],
                }
                let mut message = Message {
                    mtype: 0,
                    text: [0; 128],
                };
                let n = libc::msgrcv(
                    id,
                    std::ptr::from_mut(&mut message).cast(),
                    message.text.len(),
                    0,
                    libc::IPC_NOWAIT | libc::MSG_NOERROR,
                );
                if n < 0 {
                    return format!("msgrcv {}", last_errno());
                }
                format!(
                    "ok {}",
                    String::from_utf8_lossy(&message.text[..n.unsigned_abs()])
                )
            }
            "sem-set" => {
                let id = libc::semget(key, 0, 0);
                if id < 0 {
                    return last_errno();
                }
                let number: libc::c_int = String::from_utf8_lossy(value).parse().unwrap_or(0);
                if libc::semctl(id, 0, libc::SETVAL, number) < 0 {
                    return format!("semctl {}", last_errno());
                }
                "ok".to_owned()
            }
            _ => format!("unknown SysV attack {attack:?}"),
        }
    }
}

/// Writes zeros to `path` until a write fails or [`FILL_LIMIT`] bytes are written, then
/// removes the file: `"ERRNO BYTES"` (`ENOSPC 16777216`) or `"ok BYTES"`.
#[must_use]
pub fn fill(path: &Path) -> String {
    let mut file = match std::fs::File::create(path) {
        Ok(file) => file,
        Err(e) => return format!("{} 0", io_errno(&e)),
    };
    let chunk = vec![0_u8; FILL_CHUNK];
    let mut written = 0_u64;
    let mut outcome = "ok".to_owned();
    while written < FILL_LIMIT {
        match file.write(&chunk) {
            Ok(0) => {
                outcome = "EIO".to_owned();
                break;
            }
            Ok(n) => written += n as u64,
            Err(e) => {
                outcome = io_errno(&e);
                break;
            }
        }
    }
    drop(file);
    let _ = std::fs::remove_file(path);
    format!("{outcome} {written}")
}

/// An inotify instance and the directories it watches, to report what happens in them.
#[derive(Debug)]
pub struct Watcher {
    fd: std::os::fd::OwnedFd,
    watches: Vec<(i32, String)>,
}

impl Watcher {
    /// A new, non-blocking inotify instance.
    ///
    /// # Errors
    /// The errno's name when the plugin may not make one.
    pub fn new() -> Result<Self, String> {
        use std::os::fd::FromRawFd as _;
        // SAFETY: inotify_init1 has no pointer arguments; the descriptor is owned below.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(last_errno());
        }
        Ok(Self {
            // SAFETY: a descriptor just returned by the kernel, owned only here.
            fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) },
            watches: Vec::new(),
        })
    }

    /// Watches `dir` for every event: `"ok"` or the errno's name.
    pub fn watch(&mut self, dir: &str) -> String {
        use std::os::fd::AsRawFd as _;
        let c = c_path(Path::new(dir));
        // SAFETY: a NUL-terminated path on a descriptor owned by self.
        let wd = unsafe {
            libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), libc::IN_ALL_EVENTS)
        };
        if wd < 0 {
            return last_errno();
        }
        self.watches.push((wd, dir.to_owned()));
        "ok".to_owned()
    }

    /// The events seen since the last call, `DIR/NAME MASK` a line (mask in hex).
    pub fn events(&mut self) -> Vec<String> {
        use std::os::fd::AsRawFd as _;
        let mut seen = Vec::new();
        let mut buf = vec![0_u8; 64 * 1024];
        loop {
            // SAFETY: reads into a buffer of its length from a descriptor owned by self.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            let Ok(n) = usize::try_from(n) else {
                break; // EAGAIN: nothing more queued.
            };
            let header = std::mem::size_of::<libc::inotify_event>();
            let mut at = 0;
            while at + header <= n {
                // SAFETY: the kernel wrote a whole event header at `at` (read_unaligned: the
                // buffer has no alignment guarantee).
                let event: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
                let len = event.len as usize;
                let name_bytes = &buf[at + header..(at + header + len).min(n)];
                let end = name_bytes.iter().position(|b| *b == 0).unwrap_or(len);
                let name = String::from_utf8_lossy(&name_bytes[..end]);
                let dir = self
                    .watches
                    .iter()
                    .find(|(wd, _)| *wd == event.wd)
                    .map_or("?", |(_, dir)| dir.as_str());
                seen.push(format!("{dir}/{name} {:#x}", event.mask));
                at += header + len;
            }
        }
        seen
    }
}

/// Calls `proto.KV/Get` with `key`, in plaintext gRPC, on the unix socket `socket` (another
/// plugin's): `"ok VALUE"` or why it failed.
pub async fn grpc_get(socket: &str, key: &str) -> String {
    use tether_examples::kv::GetRequest;
    use tether_examples::kv::kv_client::KvClient;
    let socket = socket.to_owned();
    let connector = tower::service_fn(move |_: tonic::transport::Uri| {
        let socket = socket.clone();
        async move {
            tokio::net::UnixStream::connect(socket)
                .await
                .map(hyper_util::rt::TokioIo::new)
        }
    });
    let channel = match tonic::transport::Endpoint::from_static("http://plugin")
        .connect_timeout(TALK_TIMEOUT)
        .timeout(TALK_TIMEOUT)
        .connect_with_connector(connector)
        .await
    {
        Ok(channel) => channel,
        Err(e) => return format!("connect: {e:?}"),
    };
    match KvClient::new(channel)
        .get(GetRequest { key: key.into() })
        .await
    {
        Ok(response) => format!(
            "ok {}",
            String::from_utf8_lossy(&response.into_inner().value)
        ),
        Err(status) => format!("{:?}: {}", status.code(), status.message()),
    }
}
