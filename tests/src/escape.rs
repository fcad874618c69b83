//! Escape attempts that the probe plugin makes from inside its confinement: against the host
//! (its parent process), against the operator's terminal, through system calls a plugin should
//! not have, and over the network. Each returns `"ok"` when the attempt succeeded, else the
//! errno's name (`"EPERM"`, …), so tests compare short strings.
//!
//! The attempts are made with raw system calls and harmless arguments wherever the call would
//! otherwise change something outside the plugin (a missing path, an invalid flag): the control
//! runs without the layer under test must not hurt the machine.

use std::ffi::CStr;
use std::io;
use std::time::Duration;

/// How long a network attempt may take before it counts as `ETIMEDOUT`.
pub const NETWORK_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);

/// The symbolic name of `errno` (`"E<number>"` for names not listed here).
#[must_use]
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EINVAL => "EINVAL",
        libc::ENOTTY => "ENOTTY",
        libc::ENOSYS => "ENOSYS",
        libc::ENODEV => "ENODEV",
        libc::ENOKEY => "ENOKEY",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::ENOEXEC => "ENOEXEC",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENOSPC => "ENOSPC",
        libc::EDQUOT => "EDQUOT",
        libc::EFBIG => "EFBIG",
        libc::EROFS => "EROFS",
        libc::EEXIST => "EEXIST",
        libc::ENOTSOCK => "ENOTSOCK",
        libc::ECONNRESET => "ECONNRESET",
        libc::EPIPE => "EPIPE",
        _ => return format!("E{errno}"),
    };
    name.to_owned()
}

/// `"ok"` for a non-negative system-call result, else the name of the current errno.
fn outcome(ret: libc::c_long) -> String {
    if ret >= 0 {
        "ok".to_owned()
    } else {
        errno_name(io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

fn io_outcome<T>(result: io::Result<T>) -> String {
    match result {
        Ok(_) => "ok".to_owned(),
        Err(e) if e.kind() == io::ErrorKind::TimedOut => "ETIMEDOUT".to_owned(),
        Err(e) => e
            .raw_os_error()
            .map_or_else(|| format!("error: {e}"), errno_name),
    }
}

/// The attacks on the host ([`host_attack`]) in the order a test should make them: the last
/// one, `prlimit`, kills the host if it succeeds.
pub const HOST_ATTACKS: &[&str] = &[
    "kill0",
    "ptrace-seize",
    "ptrace-attach",
    "process-vm-readv",
    "kcmp",
    "pidfd-getfd",
    "setpriority",
    "sched-setaffinity",
    "prlimit",
];

/// Makes the attack `name` (one of [`HOST_ATTACKS`]) on the plugin's parent, the host (see
/// [`process_attack`]).
#[must_use]
pub fn host_attack(name: &str) -> String {
    // SAFETY: getppid has no preconditions.
    process_attack(name, unsafe { libc::getppid() })
}

/// Makes the attack `name` (one of [`HOST_ATTACKS`], or `sigkill`) on the process `target`: the
/// host, or a sibling plugin found in the process table.
///
/// - `kill0`: `kill(target, 0)`, whether it may signal the target at all;
/// - `sigkill`: `kill(target, SIGKILL)` (not in [`HOST_ATTACKS`]: a host it works on dies);
/// - `ptrace-seize` / `ptrace-attach`: `PTRACE_SEIZE` / `PTRACE_ATTACH` the target (detached again
///   at once when it works);
/// - `process-vm-readv`: read the target's memory (`EFAULT` means the read was allowed but the
///   address was not mapped);
/// - `kcmp`: compare the target's address space with the plugin's;
/// - `pidfd-getfd`: take a copy of the target's descriptor 0 through a pidfd;
/// - `setpriority`: renice the target to 19;
/// - `sched-setaffinity`: pin the target to the first CPU;
/// - `prlimit`: set the target's `RLIMIT_AS` to 16 MiB (it dies at its next allocation).
#[must_use]
pub fn process_attack(name: &str, target: libc::pid_t) -> String {
    // SAFETY (whole match): raw system calls on the target's pid with valid pointers to locals.
    unsafe {
        match name {
            "kill0" => outcome(libc::kill(target, 0).into()),
            "sigkill" => outcome(libc::kill(target, libc::SIGKILL).into()),
            "ptrace-seize" => {
                let r = libc::ptrace(libc::PTRACE_SEIZE, target, 0, 0);
                if r == 0 {
                    // Stop it only to detach cleanly.
                    libc::ptrace(libc::PTRACE_INTERRUPT, target, 0, 0);
                    let mut status = 0;
                    libc::waitpid(target, &mut status, libc::__WALL);
                    libc::ptrace(libc::PTRACE_DETACH, target, 0, 0);
                }
                outcome(r)
            }
            "ptrace-attach" => {
                let r = libc::ptrace(libc::PTRACE_ATTACH, target, 0, 0);
                if r == 0 {
                    let mut status = 0;
                    libc::waitpid(target, &mut status, libc::__WALL);
                    libc::ptrace(libc::PTRACE_DETACH, target, 0, 0);
                }
                outcome(r)
            }
            "process-vm-readv" => {
                let mut buf = [0_u8; 8];
                let local = libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: buf.len(),
                };
                let remote = libc::iovec {
                    iov_base: 0x1000 as *mut libc::c_void,
                    iov_len: buf.len(),
                };
                outcome(libc::process_vm_readv(target, &local, 1, &remote, 1, 0) as libc::c_long)
            }
            "kcmp" => outcome(libc::syscall(
                libc::SYS_kcmp,
                target,
                libc::getpid(),
                1_i32, // KCMP_VM
                0_u64,
                0_u64,
            )),
            "pidfd-getfd" => {
                let pidfd = libc::syscall(libc::SYS_pidfd_open, target, 0_u32);
                if pidfd < 0 {
                    return format!("pidfd_open: {}", outcome(pidfd));
                }
                let r = libc::syscall(libc::SYS_pidfd_getfd, pidfd, 0_i32, 0_u32);
                let result = outcome(r);
                if r >= 0 {
                    libc::close(r as i32);
                }
                libc::close(pidfd as i32);
                result
            }
            "setpriority" => {
                outcome(libc::setpriority(libc::PRIO_PROCESS, target.unsigned_abs(), 19).into())
            }
            "sched-setaffinity" => {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(0, &mut set);
                outcome(
                    libc::sched_setaffinity(target, std::mem::size_of::<libc::cpu_set_t>(), &set)
                        .into(),
                )
            }
            "prlimit" => {
                let limit = libc::rlimit {
                    rlim_cur: 16 << 20,
                    rlim_max: 16 << 20,
                };
                outcome(libc::prlimit(target, libc::RLIMIT_AS, &limit, std::ptr::null_mut()).into())
            }
            _ => format!("unknown attack {name:?}"),
        }
    }
}

/// Pushes `bytes` into the controlling terminal's input queue, one `TIOCSTI` each, as a
/// plugin injecting a command into the operator's shell would.
///
/// # Errors
/// Which step failed, with the errno's name (never the bytes).
pub fn inject_into_terminal(bytes: &[u8]) -> Result<(), String> {
    let tty = c"/dev/tty";
    // SAFETY: open of a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe {
        libc::open(
            tty.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(format!("open /dev/tty: {}", outcome(-1)));
    }
    let mut result = Ok(());
    for (i, byte) in bytes.iter().enumerate() {
        // SAFETY: TIOCSTI reads one byte through the pointer.
        let r = unsafe { libc::ioctl(fd, libc::TIOCSTI, std::ptr::from_ref(byte)) };
        if r < 0 {
            result = Err(format!("ioctl TIOCSTI (byte {i}): {}", outcome(-1)));
            break;
        }
    }
    // SAFETY: closes the descriptor opened above.
    unsafe { libc::close(fd) };
    result
}

/// The system calls [`syscall`] tries, each with harmless arguments.
pub const SYSCALLS: &[&str] = &[
    "keyctl",
    "bpf",
    "perf_event_open",
    "umount2",
    "mount",
    "pivot_root",
    "open_tree",
    "fsopen",
    "move_mount",
    "swapoff",
    "reboot",
    "settimeofday",
    "adjtimex",
    "syslog",
    "finit_module",
    "delete_module",
    "quotactl",
    "open_by_handle_at",
    "name_to_handle_at",
    "setns",
    "unshare-ns",
    "unshare-files",
    "clone-ns",
    "clone3",
    "personality-no-aslr",
    "personality-query",
    "ioctl-tiocsti",
    "ioctl-tioclinux",
    "ptrace-self",
    "process_vm_readv-self",
    "kcmp-self",
    "pidfd_getfd-self",
    "prlimit-own-pid",
    "prlimit-zero",
    "setpriority-own-pid",
    "setpriority-zero",
    "io_uring_setup",
    "x32-getpid",
];

/// Tries the system call `name` (one of [`SYSCALLS`]) on the plugin itself, with arguments
/// that change nothing outside it (a missing path, an invalid flag, the current value).
#[must_use]
#[allow(clippy::too_many_lines)] // One arm per call: a table.
pub fn syscall(name: &str) -> String {
    const MISSING: &CStr = c"/nonexistent-tether-probe";
    let missing = MISSING.as_ptr();
    // SAFETY (whole match): raw system calls with valid pointers to locals or NUL-terminated
    // strings, on the plugin's own pid or missing paths.
    unsafe {
        let me = libc::getpid();
        match name {
            // KEYCTL_GET_KEYRING_ID of the process keyring, without creating it.
            "keyctl" => outcome(libc::syscall(libc::SYS_keyctl, 0_i32, -2_i32, 0_i32)),
            // BPF_MAP_CREATE with an empty attribute: EINVAL when allowed.
            "bpf" => outcome(libc::syscall(
                libc::SYS_bpf,
                0_i32,
                std::ptr::null::<u8>(),
                0_u32,
            )),
            "perf_event_open" => outcome(libc::syscall(
                libc::SYS_perf_event_open,
                std::ptr::null::<u8>(),
                0_i32,
                -1_i32,
                -1_i32,
                0_u64,
            )),
            "umount2" => outcome(libc::umount2(missing, 0).into()),
            "mount" => outcome(
                libc::mount(
                    c"none".as_ptr(),
                    missing,
                    c"tmpfs".as_ptr(),
                    0,
                    std::ptr::null(),
                )
                .into(),
            ),
            "pivot_root" => outcome(libc::syscall(libc::SYS_pivot_root, missing, missing)),
            "open_tree" => outcome(libc::syscall(
                libc::SYS_open_tree,
                libc::AT_FDCWD,
                missing,
                0_u32,
            )),
            "fsopen" => outcome(libc::syscall(
                libc::SYS_fsopen,
                c"tether-no-such-fs".as_ptr(),
                0_u32,
            )),
            "move_mount" => outcome(libc::syscall(
                libc::SYS_move_mount,
                -1_i32,
                c"".as_ptr(),
                -1_i32,
                c"".as_ptr(),
                0_u32,
            )),
            "swapoff" => outcome(libc::swapoff(missing).into()),
            // A wrong magic number: EINVAL when allowed.
            "reboot" => outcome(libc::syscall(libc::SYS_reboot, 0_i32, 0_i32, 0_i32, 0_u64)),
            // Both pointers NULL: changes nothing.
            "settimeofday" => outcome(libc::syscall(
                libc::SYS_settimeofday,
                std::ptr::null::<u8>(),
                std::ptr::null::<u8>(),
            )),
            // modes = 0: reads the clock state only.
            "adjtimex" => {
                let mut tx: libc::timex = std::mem::zeroed();
                outcome(libc::adjtimex(&mut tx).into())
            }
            // SYSLOG_ACTION_SIZE_BUFFER: reads the ring buffer's size.
            "syslog" => outcome(libc::syscall(
                libc::SYS_syslog,
                10_i32,
                std::ptr::null::<u8>(),
                0_i32,
            )),
            "finit_module" => outcome(libc::syscall(
                libc::SYS_finit_module,
                -1_i32,
                c"".as_ptr(),
                0_i32,
            )),
            "delete_module" => outcome(libc::syscall(
                libc::SYS_delete_module,
                c"tether_no_such_module".as_ptr(),
                libc::O_NONBLOCK,
            )),
            // An invalid command on no device: EINVAL or EFAULT when allowed.
            "quotactl" => outcome(libc::syscall(
                libc::SYS_quotactl,
                0_i32,
                std::ptr::null::<u8>(),
                0_i32,
                std::ptr::null::<u8>(),
            )),
            "open_by_handle_at" => outcome(libc::syscall(
                libc::SYS_open_by_handle_at,
                -1_i32,
                std::ptr::null::<u8>(),
                0_i32,
            )),
            "name_to_handle_at" => {
                // A handle buffer too small on purpose: EOVERFLOW when allowed.
                let mut handle = [0_u32; 2];
                let mut mount_id = 0_i32;
                outcome(libc::syscall(
                    libc::SYS_name_to_handle_at,
                    libc::AT_FDCWD,
                    c"/".as_ptr(),
                    handle.as_mut_ptr(),
                    &mut mount_id,
                    0_i32,
                ))
            }
            "setns" => outcome(libc::setns(-1, libc::CLONE_NEWNET).into()),
            // A UTS namespace of its own changes nothing outside the plugin.
            "unshare-ns" => outcome(libc::unshare(libc::CLONE_NEWUTS).into()),
            // No namespace flag: allowed in every mode.
            "unshare-files" => outcome(libc::unshare(libc::CLONE_FILES).into()),
            "clone-ns" => {
                let flags = libc::CLONE_NEWUTS as libc::c_ulong | libc::SIGCHLD as libc::c_ulong;
                let pid = libc::syscall(libc::SYS_clone, flags, 0_usize, 0_usize, 0_usize, 0_usize);
                if pid == 0 {
                    libc::_exit(0);
                }
                if pid > 0 {
                    let mut status = 0;
                    libc::waitpid(pid as libc::pid_t, &mut status, 0);
                }
                outcome(pid)
            }
            // A NULL argument of size 0: EINVAL when allowed (glibc falls back to clone on
            // ENOSYS only).
            "clone3" => outcome(libc::syscall(
                libc::SYS_clone3,
                std::ptr::null::<u8>(),
                0_usize,
            )),
            "personality-no-aslr" => {
                let r = libc::personality(0x0040000); // ADDR_NO_RANDOMIZE
                if r >= 0 {
                    libc::personality(r as libc::c_ulong);
                }
                outcome(r.into())
            }
            "personality-query" => outcome(libc::personality(0xffff_ffff).into()),
            "ioctl-tiocsti" | "ioctl-tioclinux" => {
                let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
                if fd < 0 {
                    return format!("open /dev/null: {}", outcome(-1));
                }
                let request = if name == "ioctl-tiocsti" {
                    libc::TIOCSTI
                } else {
                    libc::TIOCLINUX
                };
                let byte = 0_u8;
                let r = libc::ioctl(fd, request, &byte);
                let result = outcome(r.into());
                libc::close(fd);
                result
            }
            // PTRACE_GETREGSET on itself (not traced): ESRCH when allowed.
            "ptrace-self" => outcome(libc::ptrace(libc::PTRACE_GETREGSET, me, 0, 0)),
            "process_vm_readv-self" => {
                let source = [7_u8; 8];
                let mut buf = [0_u8; 8];
                let local = libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: buf.len(),
                };
                let remote = libc::iovec {
                    iov_base: source.as_ptr().cast_mut().cast(),
                    iov_len: source.len(),
                };
                outcome(libc::process_vm_readv(me, &local, 1, &remote, 1, 0) as libc::c_long)
            }
            "kcmp-self" => outcome(libc::syscall(libc::SYS_kcmp, me, me, 1_i32, 0_u64, 0_u64)),
            "pidfd_getfd-self" => {
                let pidfd = libc::syscall(libc::SYS_pidfd_open, me, 0_u32);
                if pidfd < 0 {
                    return format!("pidfd_open: {}", outcome(pidfd));
                }
                let r = libc::syscall(libc::SYS_pidfd_getfd, pidfd, 0_i32, 0_u32);
                let result = outcome(r);
                if r >= 0 {
                    libc::close(r as i32);
                }
                libc::close(pidfd as i32);
                result
            }
            "prlimit-own-pid" | "prlimit-zero" => {
                let pid = if name == "prlimit-zero" { 0 } else { me };
                let mut old: libc::rlimit = std::mem::zeroed();
                outcome(libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old).into())
            }
            "setpriority-own-pid" | "setpriority-zero" => {
                let who = if name == "setpriority-zero" { 0 } else { me };
                // Sets the current value: changes nothing.
                *libc::__errno_location() = 0;
                let current = libc::getpriority(libc::PRIO_PROCESS, 0);
                outcome(libc::setpriority(libc::PRIO_PROCESS, who.unsigned_abs(), current).into())
            }
            // No parameters: EFAULT when allowed.
            "io_uring_setup" => outcome(libc::syscall(
                libc::SYS_io_uring_setup,
                1_u32,
                std::ptr::null::<u8>(),
            )),
            // getpid through the x32 ABI (`__X32_SYSCALL_BIT`): ENOSYS on a kernel without x32.
            "x32-getpid" => outcome(libc::syscall(0x4000_0000 | libc::SYS_getpid)),
            _ => format!("unknown system call {name:?}"),
        }
    }
}

/// Connects over TCP to `address` (`host:port`) within [`NETWORK_ATTEMPT_TIMEOUT`].
#[must_use]
pub fn tcp_connect(address: &str) -> String {
    let Ok(address) = address.parse::<std::net::SocketAddr>() else {
        return format!("not an address: {address:?}");
    };
    io_outcome(std::net::TcpStream::connect_timeout(
        &address,
        NETWORK_ATTEMPT_TIMEOUT,
    ))
}

/// Sends the datagram `payload` to `address` (`host:port`) over UDP.
#[must_use]
pub fn udp_send(address: &str, payload: &[u8]) -> String {
    let socket = match std::net::UdpSocket::bind("0.0.0.0:0") {
        Ok(socket) => socket,
        Err(e) => return format!("bind: {}", io_outcome::<()>(Err(e))),
    };
    io_outcome(socket.send_to(payload, address))
}

/// Binds a TCP listener on `address` (`host:port`; port 0 for any).
#[must_use]
pub fn tcp_listen(address: &str) -> String {
    io_outcome(std::net::TcpListener::bind(address))
}

/// Connects to the pathname unix socket `path`.
#[must_use]
pub fn unix_connect(path: &str) -> String {
    io_outcome(std::os::unix::net::UnixStream::connect(path))
}

/// Listens on the abstract unix socket `name` (a socket of the network namespace, not a file)
/// until the process ends.
#[must_use]
pub fn abstract_listen(name: &str) -> String {
    use std::os::linux::net::SocketAddrExt as _;
    let listener = std::os::unix::net::SocketAddr::from_abstract_name(name)
        .and_then(|address| std::os::unix::net::UnixListener::bind_addr(&address));
    // Kept open for the process's life, for another process to try.
    io_outcome(listener.map(std::mem::forget))
}

/// Connects to the abstract unix socket `name`.
#[must_use]
pub fn abstract_connect(name: &str) -> String {
    use std::os::linux::net::SocketAddrExt as _;
    io_outcome(
        std::os::unix::net::SocketAddr::from_abstract_name(name)
            .and_then(|address| std::os::unix::net::UnixStream::connect_addr(&address)),
    )
}
