//! The keeper, pid 1 of every world: the program (`broker/keeper/main.rs`, built by
//! `broker/build.rs` and embedded here), the sealed memfd it runs from, and the host's end of
//! its control socket.
//!
//! The keeper reaps the world's orphans (it ignores `SIGCHLD`), holds the world alive while the
//! host holds its control socket and ends it when the host closes it or dies, and makes TCP
//! sockets in the world's network namespace on request (for dialling a plugin that serves on
//! its own loopback). Protocol, on a `SOCK_SEQPACKET` pair: the keeper sends `R` when it runs;
//! the host sends `4` or `6`, the keeper answers `0` with a socket (`SCM_RIGHTS`) or an errno.

use std::io;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// The keeper program for this target; empty when `build.rs` could not build one.
static PROGRAM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/keeper"));

/// The keeper's descriptor for its control socket (`broker/keeper/main.rs`).
pub(crate) const KEEPER_CONTROL_FD: i32 = 3;

/// The keeper program in a sealed memfd, made once per host process: `execveat(fd, "",
/// AT_EMPTY_PATH)` runs it without any file on disk.
pub(crate) fn program() -> Result<BorrowedFd<'static>, String> {
    static MEMFD: OnceLock<Result<OwnedFd, String>> = OnceLock::new();
    MEMFD
        .get_or_init(|| {
            if PROGRAM.is_empty() {
                return Err(
                    "this build of tether has no keeper program for its architecture".to_owned(),
                );
            }
            sealed_memfd(PROGRAM)
                .map_err(|e| format!("cannot hold the keeper program in a memfd: {e}"))
        })
        .as_ref()
        .map(OwnedFd::as_fd)
        .map_err(Clone::clone)
}

fn sealed_memfd(bytes: &[u8]) -> io::Result<OwnedFd> {
    use std::io::Write as _;
    // SAFETY: a NUL-terminated name; the flags make a close-on-exec, sealable memfd.
    let fd = unsafe {
        libc::memfd_create(
            c"tether-keeper".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if fd == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just made, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: fcntl on a descriptor this function owns.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(OwnedFd::from(file))
}

/// A pair of connected `SOCK_SEQPACKET` sockets, both close-on-exec: the host's end and the
/// keeper's.
pub(crate) fn control_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors.
    let ret = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if ret == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just made and are owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The host's end of a keeper's control socket. Closing it ([`Self::close`], or dropping the
/// last handle) ends the keeper, and with it the world.
///
/// Handles outlive their world (a dialler kept in a broker the host application still holds),
/// so the descriptor is behind a lock and closed when the world ends, whoever still holds a
/// handle: a dead world holds none of the host's descriptors. The lock also keeps each request
/// and its answer together when several threads dial at once.
#[derive(Debug)]
pub(crate) struct Control(Mutex<Option<OwnedFd>>);

impl Control {
    pub(crate) fn new(fd: OwnedFd) -> Self {
        Self(Mutex::new(Some(fd)))
    }

    /// Closes the host's end: the keeper ends; later requests fail.
    pub(crate) fn close(&self) {
        drop(self.lock().take());
    }

    fn lock(&self) -> MutexGuard<'_, Option<OwnedFd>> {
        // A descriptor or none: a thread that panicked holding it left it consistent.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `f` on the open descriptor, holding the lock.
    fn with<T>(&self, f: impl FnOnce(BorrowedFd<'_>) -> io::Result<T>) -> io::Result<T> {
        match self.lock().as_ref() {
            Some(fd) => f(fd.as_fd()),
            None => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the plugin's world has ended",
            )),
        }
    }

    /// The world's scratch tmpfs, which its maker sends (status `S`) before it becomes the
    /// keeper; waits at most `timeout`.
    pub(crate) fn receive_scratch(&self, timeout: Duration) -> io::Result<OwnedFd> {
        self.with(|fd| {
            wait(fd, timeout)?;
            receive_fd(fd, b'S')
        })
    }

    /// Waits at most `timeout` for the keeper's `R`: `Ok(true)` when it runs, `Ok(false)` when
    /// its end closed first (the world's maker gave up before exec).
    pub(crate) fn ready(&self, timeout: Duration) -> io::Result<bool> {
        self.with(|fd| {
            wait(fd, timeout)?;
            let mut byte = [0_u8; 1];
            // SAFETY: a one-byte buffer.
            let n = unsafe { libc::recv(fd.as_raw_fd(), byte.as_mut_ptr().cast(), 1, 0) };
            match n {
                1 if byte[0] == b'R' => Ok(true),
                1 => Err(io::Error::other(
                    "the world's keeper said something unexpected",
                )),
                0 => Ok(false),
                _ => Err(io::Error::last_os_error()),
            }
        })
    }

    /// A TCP socket (`SOCK_STREAM`, close-on-exec) made in the world's network namespace, of the
    /// IPv6 family when `v6`.
    pub(crate) fn tcp_socket(&self, v6: bool) -> io::Result<OwnedFd> {
        self.with(|fd| {
            let request = [if v6 { b'6' } else { b'4' }];
            // SAFETY: a one-byte buffer; MSG_NOSIGNAL: a keeper gone is an error, not a signal.
            let sent = unsafe {
                libc::send(
                    fd.as_raw_fd(),
                    request.as_ptr().cast(),
                    1,
                    libc::MSG_NOSIGNAL,
                )
            };
            if sent != 1 {
                return Err(io::Error::last_os_error());
            }
            receive_fd(fd, 0)
        })
    }
}

/// Waits at most `timeout` until something can be read on `fd`.
fn wait(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<()> {
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd.
    match unsafe { libc::poll(&mut poll, 1, millis) } {
        -1 => Err(io::Error::last_os_error()),
        0 => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the world's keeper did not answer in time",
        )),
        _ => Ok(()),
    }
}

/// Receives an answer: its status byte and, when that is `ok`, the one descriptor sent with it;
/// any other status is an errno.
fn receive_fd(socket: BorrowedFd<'_>, ok: u8) -> io::Result<OwnedFd> {
    let mut status = [0_u8; 1];
    let mut iov = libc::iovec {
        iov_base: status.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // Room for one descriptor's control message, aligned as cmsghdr requires.
    let mut control = [0_u64; 4];
    // SAFETY: msghdr is plain data; every pointer set below points at a live local.
    let mut msg = unsafe { std::mem::zeroed::<libc::msghdr>() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: recvmsg writes into the buffers msg points at; CMSG_CLOEXEC marks what arrives.
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the world's keeper has ended",
        ));
    }
    // SAFETY: msg was filled in by recvmsg; CMSG_FIRSTHDR/CMSG_DATA stay inside `control`.
    let fd = unsafe {
        let header = libc::CMSG_FIRSTHDR(&msg);
        if header.is_null()
            || (*header).cmsg_level != libc::SOL_SOCKET
            || (*header).cmsg_type != libc::SCM_RIGHTS
        {
            None
        } else {
            Some(std::ptr::read_unaligned(
                libc::CMSG_DATA(header).cast::<i32>(),
            ))
        }
    };
    match (status[0], fd) {
        // SAFETY: the descriptor just received is owned by nothing else.
        (status, Some(fd)) if status == ok => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
        (errno, received) => {
            if let Some(fd) = received {
                // SAFETY: received above, not used elsewhere.
                drop(unsafe { OwnedFd::from_raw_fd(fd) });
            }
            Err(io::Error::from_raw_os_error(i32::from(errno).max(1)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt as _;

    /// Runs the keeper as a plain child (no world) with `end` as its control socket, from its
    /// memfd as a world's maker runs it.
    fn run_keeper(end: OwnedFd) -> std::process::Child {
        let program = program().unwrap().as_raw_fd();
        let end = end.as_raw_fd();
        let mut command = std::process::Command::new("/nonexistent");
        // SAFETY: dup2 and execveat are async-signal-safe; the descriptors are open in the
        // child and the strings live in this (forked) process.
        unsafe {
            command.pre_exec(move || {
                // Both out of the way first (either may be 3), then the control end in place
                // (dup2 onto another number clears close-on-exec).
                let program = libc::fcntl(program, libc::F_DUPFD_CLOEXEC, 10);
                let end = libc::fcntl(end, libc::F_DUPFD_CLOEXEC, 10);
                if program == -1 || end == -1 || libc::dup2(end, KEEPER_CONTROL_FD) == -1 {
                    return Err(io::Error::last_os_error());
                }
                let argv = [c"tether-keeper".as_ptr(), std::ptr::null()];
                let envp = [std::ptr::null::<libc::c_char>()];
                libc::syscall(
                    libc::SYS_execveat,
                    program,
                    c"".as_ptr(),
                    argv.as_ptr(),
                    envp.as_ptr(),
                    libc::AT_EMPTY_PATH,
                );
                Err(io::Error::last_os_error())
            });
        }
        command.spawn().unwrap()
    }

    #[test]
    fn the_embedded_keeper_runs_makes_sockets_on_request_and_ends_when_the_host_lets_go() {
        let (host, keeper) = control_pair().unwrap();
        let mut child = run_keeper(keeper);
        let control = Control::new(host);
        assert!(control.ready(Duration::from_secs(10)).unwrap());
        for v6 in [false, true] {
            let socket = control.tcp_socket(v6).unwrap();
            // A fresh socket of the right family.
            let mut domain = 0_i32;
            let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
            // SAFETY: getsockopt into a local int of the length given.
            let ret = unsafe {
                libc::getsockopt(
                    socket.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_DOMAIN,
                    (&raw mut domain).cast(),
                    &mut len,
                )
            };
            assert_eq!(ret, 0);
            assert_eq!(domain, if v6 { libc::AF_INET6 } else { libc::AF_INET });
        }
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap()
                .trim()
                .to_owned()
        };
        assert_eq!(field("CapEff:"), "0000000000000000");
        assert_eq!(field("CapPrm:"), "0000000000000000");
        // Closed while a handle lives on (as a dialler kept by the host would): the keeper
        // ends, and the handle makes no more sockets.
        control.close();
        assert!(child.wait().unwrap().success());
        let err = control.tcp_socket(false).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotConnected, "{err}");
    }
}
