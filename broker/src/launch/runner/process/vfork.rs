//! Starting a process without copying the host: `clone(CLONE_VM | CLONE_VFORK)`.
//!
//! `fork` copies the host's page tables and write-protects its memory for copy-on-write, and
//! the child's `exec` then throws the copy away — work that grows with the host's size and, on
//! a multi-threaded host, flushes the other CPUs' TLBs. `posix_spawn` avoids it by running the
//! child on the parent's memory until `exec`, with the parent thread suspended; but it has no
//! hook for tether's confinement, which must run between the two. This is the same technique
//! with that hook: the child runs on a stack of its own in the parent's memory, makes only
//! raw, async-signal-safe system calls on values the parent prepared (no allocation, no locks:
//! other host threads keep running and may hold them), applies the confinement and `exec`s.
//! Measured: launch 0.93× with the same confinement (bench/BENCHMARKS.md, Decisions).
//!
//! Signals: the parent blocks all of them around the `clone`, so none of the host's handlers
//! can run in the child on the host's memory; the child resets every handler the host
//! installed to the default before it unblocks them (the plugin starts with an empty signal
//! mask and `SIGPIPE` at its default, as with `std::process::Command`).

use std::ffi::{CString, OsStr, c_void};
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

/// The child's stack until `exec`: the confinement's system calls need little, and a guard
/// page below it turns an overflow into a fault instead of a write into the host's memory.
pub(crate) const CHILD_STACK_SIZE: usize = 128 * 1024;

/// What to execute: every string as the kernel takes it.
pub(crate) struct Exec<'a> {
    /// The file to execute (a path; it is not looked up in `PATH`).
    pub(crate) program: &'a Path,
    /// `argv`, `argv[0]` first.
    pub(crate) argv: Vec<&'a OsStr>,
    /// The complete environment.
    pub(crate) env: Vec<(&'a OsStr, &'a OsStr)>,
    /// The working directory.
    pub(crate) cwd: &'a Path,
}

/// A started child: its process id and the read ends of its stdout and stderr pipes (stdin is
/// `/dev/null`).
#[derive(Debug)]
pub(crate) struct Child {
    pub(crate) pid: u32,
    pub(crate) stdout: OwnedFd,
    pub(crate) stderr: OwnedFd,
}

/// One past the highest signal number on Linux (`_NSIG`).
const SIGNALS_END: libc::c_int = 65;

/// Everything the child reads, prepared by the parent.
struct Context<'a> {
    program: CString,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    cwd: CString,
    stdio: [RawFd; 3],
    pre_exec: &'a mut (dyn FnMut() -> io::Result<()> + Send + Sync),
    /// Set by the child when it gives up: the errno of what failed.
    error: i32,
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "an argument, variable or path contains a NUL byte",
        )
    })
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just created and are owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A stack mapping with a guard page at its low end, unmapped on drop.
struct Stack {
    base: *mut c_void,
    len: usize,
}

impl Stack {
    fn new() -> io::Result<Self> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = CHILD_STACK_SIZE + page;
        // SAFETY: a fresh anonymous mapping; no existing memory is touched.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Self { base, len };
        // SAFETY: the first page of the mapping just made.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } == -1 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The initial stack pointer (stacks grow down), 16-byte aligned.
    fn top(&self) -> *mut c_void {
        // SAFETY: one past the end of the mapping, which is page-aligned.
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; the child has exec'd or exited (CLONE_VFORK).
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// Starts `exec` with stdin from `/dev/null` and stdout and stderr piped, running `pre_exec`
/// in the child just before `exec`. Returns once the child has exec'd; an error of `pre_exec`
/// or of `exec` itself is returned as the errno it failed with (the child is reaped).
///
/// `pre_exec` runs on the host's memory in the child: it must only make raw, async-signal-safe
/// system calls (no allocation, no locks, no panics).
pub(crate) fn spawn(
    exec: &Exec<'_>,
    pre_exec: &mut (dyn FnMut() -> io::Result<()> + Send + Sync),
) -> io::Result<Child> {
    let argv = exec
        .argv
        .iter()
        .map(|arg| c_string(arg.as_bytes()))
        .collect::<io::Result<Vec<_>>>()?;
    let envp = exec
        .env
        .iter()
        .map(|(k, v)| c_string(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect::<io::Result<Vec<_>>>()?;
    let pointers = |strings: &[CString]| -> Vec<*const libc::c_char> {
        strings
            .iter()
            .map(|s| s.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    };
    // SAFETY: a NUL-terminated path; the flags make a close-on-exec descriptor.
    let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if null == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just opened, owned by nothing else.
    let null = unsafe { OwnedFd::from_raw_fd(null) };
    let (stdout_read, stdout_write) = pipe()?;
    let (stderr_read, stderr_write) = pipe()?;
    let mut context = Context {
        program: c_string(exec.program.as_os_str().as_bytes())?,
        argv: pointers(&argv),
        envp: pointers(&envp),
        cwd: c_string(exec.cwd.as_os_str().as_bytes())?,
        stdio: [
            null.as_raw_fd(),
            stdout_write.as_raw_fd(),
            stderr_write.as_raw_fd(),
        ],
        pre_exec,
        error: 0,
    };
    let stack = Stack::new()?;
    let pid = {
        let _blocked = BlockedSignals::new()?;
        // SAFETY: `child` gets a stack of its own and a pointer to `context`, which outlives
        // the child's use of it: with CLONE_VFORK this thread is suspended until the child
        // has exec'd or exited. Without CLONE_FILES, CLONE_FS and CLONE_SIGHAND the child has
        // its own descriptor table, working directory and signal handlers.
        unsafe {
            libc::clone(
                child,
                stack.top(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                std::ptr::from_mut(&mut context).cast(),
            )
        }
    };
    if pid == -1 {
        return Err(io::Error::last_os_error());
    }
    if context.error != 0 {
        // The child exited without exec: reap it.
        let mut status = 0;
        // SAFETY: pid is our child; status is a valid out-pointer.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Err(io::Error::from_raw_os_error(context.error));
    }
    Ok(Child {
        pid: pid.unsigned_abs(),
        stdout: stdout_read,
        stderr: stderr_read,
    })
}

/// Kills the child `pid` (just spawned, never waited for) and reaps it.
pub(crate) fn kill_and_reap(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: pid is an unreaped child of this process, so it names that process.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
}

/// All signals blocked on this thread while it lives; the previous mask restored on drop.
struct BlockedSignals(libc::sigset_t);

impl BlockedSignals {
    fn new() -> io::Result<Self> {
        // SAFETY: sigset_t is plain data; sigfillset and pthread_sigmask initialise the sets.
        unsafe {
            let mut all = std::mem::zeroed::<libc::sigset_t>();
            let mut old = std::mem::zeroed::<libc::sigset_t>();
            libc::sigfillset(&mut all);
            let e = libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            if e != 0 {
                return Err(io::Error::from_raw_os_error(e));
            }
            Ok(Self(old))
        }
    }
}

impl Drop for BlockedSignals {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// The child, until `exec`. Only raw system calls; gives up with `_exit(127)` after writing the
/// failing errno into the context.
extern "C" fn child(arg: *mut c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Context`, alive and not used by the suspended parent.
    let context = unsafe { &mut *arg.cast::<Context<'_>>() };
    let fail = |context: &mut Context<'_>, errno: i32| -> ! {
        context.error = if errno == 0 { libc::EINVAL } else { errno };
        // SAFETY: ends this process without running the host's exit handlers.
        unsafe { libc::_exit(127) }
    };
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };
    // SAFETY (whole block): raw system calls with valid arguments; nothing allocates.
    unsafe {
        // The host's handlers must not run here (they would on the host's memory): every
        // caught signal back to its default, and SIGPIPE too (Rust ignores it in the host).
        for signal in 1..SIGNALS_END {
            let mut old = std::mem::zeroed::<libc::sigaction>();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            let ignored = old.sa_sigaction == libc::SIG_IGN;
            if old.sa_sigaction != libc::SIG_DFL && (!ignored || signal == libc::SIGPIPE) {
                let mut default = std::mem::zeroed::<libc::sigaction>();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
        let mut empty = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut empty);
        libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        for (target, fd) in context.stdio.into_iter().enumerate() {
            let target = target as RawFd;
            // dup2 onto itself would keep close-on-exec: clear it instead.
            let ok = if fd == target {
                libc::fcntl(fd, libc::F_SETFD, 0) != -1
            } else {
                libc::dup2(fd, target) != -1
            };
            if !ok {
                fail(context, errno());
            }
        }
        if libc::chdir(context.cwd.as_ptr()) == -1 {
            fail(context, errno());
        }
    }
    if let Err(e) = (context.pre_exec)() {
        fail(context, e.raw_os_error().unwrap_or(libc::EINVAL));
    }
    // SAFETY: NUL-terminated program and NULL-terminated arrays of NUL-terminated strings,
    // all owned by the parent's context.
    unsafe {
        libc::execve(
            context.program.as_ptr(),
            context.argv.as_ptr(),
            context.envp.as_ptr(),
        );
    }
    fail(context, errno())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    fn run(program: &str, args: &[&str]) -> io::Result<Child> {
        let mut argv = vec![OsStr::new(program)];
        argv.extend(args.iter().map(OsStr::new));
        let exec = Exec {
            program: Path::new(program),
            argv,
            env: vec![(OsStr::new("ONLY"), OsStr::new("this"))],
            cwd: Path::new("/"),
        };
        spawn(&exec, &mut || Ok(()))
    }

    /// This process's exited, unreaped children that still carry the calling thread's name (a
    /// child of `spawn` from this thread that gave up before exec). Other tests' children run
    /// other programs, and waiting for them here would take their exit from those tests.
    fn unreaped_children_that_never_exec_d() -> usize {
        let me = std::process::id().to_string();
        let own = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
            .filter(|stat| {
                // pid (comm) state ppid …
                let Some((comm, rest)) = stat
                    .split_once(" (")
                    .and_then(|(_, rest)| rest.rsplit_once(") "))
                else {
                    return false;
                };
                let mut fields = rest.split(' ');
                let (state, ppid) = (fields.next(), fields.next());
                state == Some("Z") && ppid == Some(me.as_str()) && comm == own.trim_end()
            })
            .count()
    }

    fn wait(pid: u32) -> i32 {
        let mut status = 0;
        // SAFETY: pid is our child; status is a valid out-pointer.
        assert_eq!(
            unsafe { libc::waitpid(pid as i32, &mut status, 0) },
            pid as i32
        );
        status
    }

    #[test]
    fn the_child_gets_exactly_its_arguments_environment_directory_and_pipes() {
        let child = run(
            "/bin/sh",
            &[
                "-c",
                "echo \"$0|$ONLY|$(pwd)|${HOME-unset}\"; echo err >&2; read x || echo eof",
                "zero",
            ],
        )
        .unwrap();
        let mut out = String::new();
        std::fs::File::from(child.stdout)
            .read_to_string(&mut out)
            .unwrap();
        let mut err = String::new();
        std::fs::File::from(child.stderr)
            .read_to_string(&mut err)
            .unwrap();
        // Only the given environment (no HOME from the host); stdin is /dev/null.
        assert_eq!(out, "zero|this|/|unset\neof\n");
        assert_eq!(err, "err\n");
        assert_eq!(wait(child.pid), 0);
    }

    #[test]
    fn a_program_that_cannot_be_executed_is_its_errno_and_leaves_no_child() {
        let error = run("/nonexistent/program", &[]).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ENOENT));
        assert_eq!(unreaped_children_that_never_exec_d(), 0);
    }

    #[test]
    fn an_argument_with_a_nul_byte_is_refused_before_anything_starts() {
        let error = run("/bin/true", &["a\0b"]).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert!(error.to_string().contains("NUL byte"), "{error}");
        assert_eq!(unreaped_children_that_never_exec_d(), 0);
    }

    #[test]
    fn a_failing_pre_exec_is_reported_with_its_errno_and_nothing_runs() {
        let exec = Exec {
            program: Path::new("/bin/true"),
            argv: vec![OsStr::new("true")],
            env: Vec::new(),
            cwd: Path::new("/"),
        };
        let error = spawn(&exec, &mut || {
            Err(io::Error::from_raw_os_error(libc::EPERM))
        })
        .unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EPERM));
    }

    #[test]
    fn the_hosts_signal_mask_is_restored_and_not_inherited() {
        // Block SIGUSR1 here; the child starts with an empty mask and this thread's is back.
        // SAFETY: plain signal-mask calls on this thread.
        unsafe {
            let mut set = std::mem::zeroed::<libc::sigset_t>();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR1);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
        let child = run("/bin/sh", &["-c", "grep SigBlk /proc/self/status"]).unwrap();
        let mut out = String::new();
        std::fs::File::from(child.stdout)
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out.trim(), "SigBlk:\t0000000000000000");
        wait(child.pid);
        // SAFETY: reads this thread's mask.
        let still_blocked = unsafe {
            let mut now = std::mem::zeroed::<libc::sigset_t>();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
            libc::sigismember(&now, libc::SIGUSR1) == 1
        };
        assert!(still_blocked);
    }
}
