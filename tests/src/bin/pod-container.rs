//! The stand-in kubelet's container runtime (`tether_tests::kubelet`): runs one container of a
//! simulated Pod as a local process in namespaces of its own, the way a container runtime
//! would, so a plugin under the Pod runner sees what it would see in a Pod — and no more:
//!
//! - its own network namespace (loopback only, brought up): the Pod's network; its ports are
//!   reached through `pod-container dial`, as a kubelet's port-forward enters the Pod's netns;
//! - its own mount namespace with a root built from nothing: the host's `/usr`, `/lib*`,
//!   `/bin`, `/etc` read-only (the "base image"), the image's files and the Pod's volumes bound
//!   at their paths, `/proc` of its own PID namespace, four devices; the root read-only when
//!   the container asks for `readOnlyRootFilesystem`;
//! - the user the container asks for (`runAsUser`), mapped to the caller in a user namespace
//!   of its own: no capabilities after `exec`, also when the tests run as root.
//!
//! ```text
//! pod-container run --root DIR --uid N --gid N [--read-only-root] [--workdir DIR]
//!                   [--bind HOST:CONTAINER[:ro]]... [--env NAME=VALUE]... -- COMMAND [ARG...]
//! pod-container dial PID PORT      stdin/stdout <-> 127.0.0.1:PORT in PID's network namespace
//! ```
//! `run` exits with the container's status (128 + signal when killed); 125 when the runtime
//! failed (reason on stderr), 127 when the command cannot be executed.

use std::ffi::{CString, OsString};
use std::io::{self, Read as _, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const RUNTIME_FAILED: u8 = 125;

/// The base image: host directories every container sees read-only.
const BASE: &[&str] = &["/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc"];

/// Devices every container gets.
const DEVICES: &[&str] = &["null", "zero", "urandom", "random", "full"];

#[derive(Debug, Default)]
struct Spec {
    root: PathBuf,
    uid: u32,
    gid: u32,
    read_only_root: bool,
    workdir: Option<PathBuf>,
    binds: Vec<(PathBuf, PathBuf, bool)>,
    env: Vec<(OsString, OsString)>,
    command: Vec<OsString>,
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let result = match args.first().and_then(|a| a.to_str()) {
        Some("run") => parse(&args[1..]).and_then(run),
        Some("dial") => dial(&args[1..]),
        _ => Err("usage: pod-container run … -- COMMAND | pod-container dial PID PORT".into()),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            eprintln!("pod-container: {message}");
            ExitCode::from(RUNTIME_FAILED)
        }
    }
}

fn parse(args: &[OsString]) -> Result<Spec, String> {
    let mut spec = Spec::default();
    let mut it = args.iter();
    let text = |v: Option<&OsString>, flag: &str| -> Result<String, String> {
        v.and_then(|v| v.to_str())
            .map(str::to_owned)
            .ok_or_else(|| format!("{flag} needs a value"))
    };
    while let Some(arg) = it.next() {
        match arg.to_str() {
            Some("--root") => spec.root = text(it.next(), "--root")?.into(),
            Some("--uid") => {
                spec.uid = text(it.next(), "--uid")?
                    .parse()
                    .map_err(|e| format!("--uid: {e}"))?
            }
            Some("--gid") => {
                spec.gid = text(it.next(), "--gid")?
                    .parse()
                    .map_err(|e| format!("--gid: {e}"))?
            }
            Some("--read-only-root") => spec.read_only_root = true,
            Some("--workdir") => spec.workdir = Some(text(it.next(), "--workdir")?.into()),
            Some("--bind") => {
                let bind = text(it.next(), "--bind")?;
                let mut parts = bind.split(':');
                let (Some(host), Some(inside)) = (parts.next(), parts.next()) else {
                    return Err(format!("--bind {bind}: want HOST:CONTAINER[:ro]"));
                };
                let ro = parts.next() == Some("ro");
                spec.binds.push((host.into(), inside.into(), ro));
            }
            Some("--env") => {
                let pair = it.next().ok_or("--env needs NAME=VALUE")?.as_bytes();
                let eq = pair
                    .iter()
                    .position(|&b| b == b'=')
                    .ok_or("--env needs NAME=VALUE")?;
                spec.env.push((
                    OsString::from(std::ffi::OsStr::from_bytes(&pair[..eq])),
                    OsString::from(std::ffi::OsStr::from_bytes(&pair[eq + 1..])),
                ));
            }
            Some("--") => {
                spec.command = it.by_ref().cloned().collect();
                break;
            }
            _ => return Err(format!("unknown argument {arg:?}")),
        }
    }
    if spec.command.is_empty() || spec.root.as_os_str().is_empty() {
        return Err("run needs --root and a command".into());
    }
    Ok(spec)
}

fn os(what: &str) -> impl Fn(io::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

fn check(result: libc::c_int, what: &str) -> Result<(), String> {
    if result == 0 {
        Ok(())
    } else {
        Err(format!("{what}: {}", io::Error::last_os_error()))
    }
}

fn c_path(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes()).map_err(|e| format!("{}: {e}", path.display()))
}

fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<(), String> {
    let source = source.map(c_path).transpose()?;
    let target_c = c_path(target)?;
    let fstype = fstype.map(|f| CString::new(f).expect("no NUL in a file system type"));
    let data = data.map(|d| CString::new(d).expect("no NUL in mount data"));
    // SAFETY: every pointer is a NUL-terminated string alive for the call, or null.
    let r = unsafe {
        libc::mount(
            source.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            target_c.as_ptr(),
            fstype.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            flags,
            data.as_ref()
                .map_or(std::ptr::null(), |s| s.as_ptr().cast()),
        )
    };
    check(r, &format!("mount on {}", target.display()))
}

/// Binds `host` at `inside` (below the new root), read-only when asked.
fn bind(host: &Path, inside: &Path, read_only: bool) -> Result<(), String> {
    if host.is_dir() {
        std::fs::create_dir_all(inside).map_err(os("mkdir"))?;
    } else {
        std::fs::create_dir_all(inside.parent().unwrap_or(Path::new("/"))).map_err(os("mkdir"))?;
        std::fs::File::create(inside).map_err(os("mount point"))?;
    }
    mount(Some(host), inside, None, libc::MS_BIND | libc::MS_REC, None)?;
    if read_only {
        mount(
            None,
            inside,
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_REC,
            None,
        )?;
    }
    Ok(())
}

fn run(spec: Spec) -> Result<u8, String> {
    // The container ends with the stand-in kubelet that started it, even if that is killed.
    // SAFETY: prctl with these arguments has no memory preconditions.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    // SAFETY: geteuid/getegid have no preconditions.
    let (outer_uid, outer_gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // SAFETY: unshare has no memory preconditions; this process is single-threaded.
    check(
        unsafe {
            libc::unshare(
                libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWNET | libc::CLONE_NEWPID,
            )
        },
        "unshare",
    )?;
    // The container's user is the caller outside: it has every capability in these namespaces
    // until it executes the command as a non-root user, which drops them.
    std::fs::write("/proc/self/setgroups", "deny").map_err(os("setgroups"))?;
    std::fs::write("/proc/self/uid_map", format!("{} {outer_uid} 1", spec.uid))
        .map_err(os("uid_map"))?;
    std::fs::write("/proc/self/gid_map", format!("{} {outer_gid} 1", spec.gid))
        .map_err(os("gid_map"))?;
    // SAFETY: single-threaded; the child only makes system calls and execs.
    match unsafe { libc::fork() } {
        -1 => Err(format!("fork: {}", io::Error::last_os_error())),
        0 => {
            let message = container(&spec);
            eprintln!("pod-container: {message}");
            // SAFETY: _exit ends this child without running the parent's destructors.
            unsafe {
                libc::_exit(if message.starts_with("exec") {
                    127
                } else {
                    RUNTIME_FAILED.into()
                })
            }
        }
        pid => wait_forwarding(pid),
    }
}

/// Waits for the container's first process, passing on the signals a kubelet stops it with.
fn wait_forwarding(pid: libc::pid_t) -> Result<u8, String> {
    static CHILD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
    extern "C" fn forward(signal: libc::c_int) {
        let pid = CHILD.load(std::sync::atomic::Ordering::SeqCst);
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, signal) };
    }
    CHILD.store(pid, std::sync::atomic::Ordering::SeqCst);
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: `forward` only calls async-signal-safe functions.
        unsafe { libc::signal(signal, forward as *const () as libc::sighandler_t) };
    }
    let mut status = 0;
    loop {
        // SAFETY: status is a valid out pointer.
        if unsafe { libc::waitpid(pid, &mut status, 0) } == pid {
            break;
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return Err(format!("waitpid: {}", io::Error::last_os_error()));
        }
    }
    Ok(if libc::WIFEXITED(status) {
        u8::try_from(libc::WEXITSTATUS(status)).unwrap_or(1)
    } else {
        u8::try_from(128 + libc::WTERMSIG(status)).unwrap_or(255)
    })
}

/// PID 1 of the container: builds its root and executes the command. Returns only on failure.
fn container(spec: &Spec) -> String {
    match build_root(spec) {
        Ok(()) => {}
        Err(message) => return message,
    }
    let mut command = Command::new(&spec.command[0]);
    command
        .args(&spec.command[1..])
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)));
    command.current_dir(spec.workdir.as_deref().unwrap_or(Path::new("/")));
    format!("exec {:?}: {}", spec.command[0], command.exec())
}

fn build_root(spec: &Spec) -> Result<(), String> {
    // SAFETY: prctl with these arguments has no memory preconditions.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    let root = &spec.root;
    mount(None, root, Some("tmpfs"), 0, Some("mode=0755")).or_else(|_| {
        mount(
            Some(Path::new("tmpfs")),
            root,
            Some("tmpfs"),
            0,
            Some("mode=0755"),
        )
    })?;
    for dir in BASE.iter().map(Path::new).filter(|d| d.exists()) {
        bind(dir, &root.join(dir.strip_prefix("/").unwrap_or(dir)), true)?;
    }
    for device in DEVICES {
        bind(
            &Path::new("/dev").join(device),
            &root.join("dev").join(device),
            false,
        )?;
    }
    for (host, inside, read_only) in &spec.binds {
        bind(
            host,
            &root.join(inside.strip_prefix("/").unwrap_or(inside)),
            *read_only,
        )?;
    }
    let proc_dir = root.join("proc");
    std::fs::create_dir_all(&proc_dir).map_err(os("mkdir /proc"))?;
    mount(
        Some(Path::new("proc")),
        &proc_dir,
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )?;
    let old = root.join(".old");
    std::fs::create_dir_all(&old).map_err(os("mkdir .old"))?;
    let (root_c, old_c) = (c_path(root)?, c_path(&old)?);
    // SAFETY: both are NUL-terminated paths alive for the call.
    check(
        unsafe { libc::syscall(libc::SYS_pivot_root, root_c.as_ptr(), old_c.as_ptr()) }
            as libc::c_int,
        "pivot_root",
    )?;
    std::env::set_current_dir("/").map_err(os("chdir /"))?;
    // SAFETY: a NUL-terminated literal.
    check(
        unsafe { libc::umount2(c"/.old".as_ptr(), libc::MNT_DETACH) },
        "umount the old root",
    )?;
    std::fs::remove_dir("/.old").map_err(os("rmdir /.old"))?;
    if spec.read_only_root {
        mount(
            None,
            Path::new("/"),
            None,
            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
            None,
        )?;
    }
    loopback_up()
}

fn loopback_up() -> Result<(), String> {
    // SAFETY: a plain socket used for one ioctl and closed.
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if socket < 0 {
            return Err(format!("socket: {}", io::Error::last_os_error()));
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo") {
            *slot = *byte as libc::c_char;
        }
        request.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        let result = libc::ioctl(socket, libc::SIOCSIFFLAGS, &request);
        libc::close(socket);
        check(result, "bringing up lo")
    }
}

/// `dial PID PORT`: joins PID's user and network namespaces, connects to its loopback PORT and
/// relays stdin/stdout — what a kubelet's port-forward does inside a Pod's network namespace.
fn dial(args: &[OsString]) -> Result<u8, String> {
    let [pid, port] = args else {
        return Err("usage: pod-container dial PID PORT".into());
    };
    let pid = pid.to_string_lossy();
    let port: u16 = port
        .to_string_lossy()
        .parse()
        .map_err(|e| format!("PORT: {e}"))?;
    for ns in ["user", "net"] {
        let path = format!("/proc/{pid}/ns/{ns}");
        let file = std::fs::File::open(&path).map_err(os(&path))?;
        // SAFETY: a valid namespace file descriptor; this process is single-threaded.
        let r = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&file), 0) };
        // Joining our own user namespace (a root caller whose target shares it) is EINVAL.
        if r != 0
            && !(ns == "user" && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL))
        {
            return Err(format!("setns {path}: {}", io::Error::last_os_error()));
        }
    }
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(os("connect"))?;
    let mut upstream = stream.try_clone().map_err(os("clone"))?;
    let copier = std::thread::spawn(move || {
        let _ = io::copy(&mut io::stdin().lock(), &mut upstream);
        let _ = upstream.shutdown(std::net::Shutdown::Write);
    });
    let mut downstream = stream;
    let mut buf = [0u8; 64 * 1024];
    let mut out = io::stdout().lock();
    loop {
        match downstream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if out.write_all(&buf[..n]).and_then(|()| out.flush()).is_err() {
                    break;
                }
            }
        }
    }
    drop(copier);
    Ok(0)
}
