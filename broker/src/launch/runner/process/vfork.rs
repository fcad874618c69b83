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
//! A plugin that runs in a world ([`Hooks::enters_world`]) is started one step further: the
//! child enters the world's namespaces — the pid namespace applies to its children only — and
//! starts the plugin with `clone(CLONE_VM | CLONE_VFORK | CLONE_PARENT)`, so that the plugin is
//! the host's own child (the host waits for it as for any other) and not the pid namespace's
//! init; then it exits. The plugin runs the confinement and `exec`s.
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

use crate::confine::child::{BlockedSignals, Hooks, Stack, c_string, reset_signal_handlers};

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

/// Everything the child reads, prepared by the parent.
struct Context<'a> {
    program: CString,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    cwd: CString,
    stdio: [RawFd; 3],
    hooks: &'a mut dyn Hooks,
    /// The stack of the plugin started inside a world.
    nested_stack: *mut c_void,
    /// Set by the child inside a world: the plugin's process id (the host's view).
    plugin_pid: libc::pid_t,
    /// Set by the child when it gives up: the errno of what failed.
    error: i32,
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

/// Starts `exec` with stdin from `/dev/null` and stdout and stderr piped, running `hooks` in
/// the child before `exec`. Returns once the program has exec'd; an error of a hook or of
/// `exec` itself is returned as the errno it failed with (the children are reaped).
pub(crate) fn spawn(exec: &Exec<'_>, hooks: &mut dyn Hooks) -> io::Result<Child> {
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
    let nested = if hooks.enters_world() {
        Some(Stack::new()?)
    } else {
        None
    };
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
        hooks,
        nested_stack: nested.as_ref().map_or(std::ptr::null_mut(), Stack::top),
        plugin_pid: 0,
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
    let program = if nested.is_some() {
        // The child has exited once the plugin exec'd (or gave up): reap it.
        // SAFETY: pid is our child.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL) };
        context.plugin_pid
    } else {
        pid
    };
    if context.error != 0 {
        if program > 0 {
            // The program exited without exec: reap it.
            // SAFETY: program is our child.
            unsafe { libc::waitpid(program, std::ptr::null_mut(), libc::__WALL) };
        }
        return Err(io::Error::from_raw_os_error(context.error));
    }
    if program <= 0 {
        return Err(io::Error::other("the plugin was not started in its world"));
    }
    Ok(Child {
        pid: program.unsigned_abs(),
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

/// The child, until `exec`. Only raw system calls; gives up with `_exit(127)` after writing the
/// failing errno into the context.
extern "C" fn child(arg: *mut c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Context`, alive and not used by the suspended parent.
    let context = unsafe { &mut *arg.cast::<Context<'_>>() };
    let fail = give_up;
    let errno = crate::confine::child::errno;
    // SAFETY (whole block): raw system calls with valid arguments; nothing allocates.
    unsafe {
        // The host's handlers must not run here (they would on the host's memory).
        reset_signal_handlers();
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
    }
    if let Err(e) = context.hooks.before() {
        fail(context, e.raw_os_error().unwrap_or(libc::EINVAL));
    }
    if context.hooks.enters_world() {
        if let Err(e) = context.hooks.enter() {
            fail(context, e.raw_os_error().unwrap_or(libc::EINVAL));
        }
        // SAFETY: a NUL-terminated path owned by the parent's context.
        if unsafe { libc::chdir(context.cwd.as_ptr()) } == -1 {
            fail(context, errno());
        }
        // SAFETY: `plugin` gets a stack of its own and the same context, which outlives it:
        // with CLONE_VFORK this process is suspended until it has exec'd or exited; with
        // CLONE_PARENT its parent is the host.
        let pid = unsafe {
            libc::clone(
                plugin,
                context.nested_stack,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PARENT | libc::SIGCHLD,
                arg,
            )
        };
        if pid == -1 {
            fail(context, errno());
        }
        context.plugin_pid = pid;
        // SAFETY: ends this process without running the host's exit handlers.
        unsafe { libc::_exit(0) }
    }
    // SAFETY: a NUL-terminated path owned by the parent's context.
    if unsafe { libc::chdir(context.cwd.as_ptr()) } == -1 {
        fail(context, errno());
    }
    confine_and_exec(context)
}

/// The plugin started inside its world, until `exec`.
extern "C" fn plugin(arg: *mut c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Context`, alive and not used by the suspended processes.
    let context = unsafe { &mut *arg.cast::<Context<'_>>() };
    confine_and_exec(context)
}

/// The confinement hook, then `exec`; on failure the errno goes into the context and the
/// process ends with `_exit(127)`.
fn confine_and_exec(context: &mut Context<'_>) -> ! {
    if let Err(e) = context.hooks.confine() {
        give_up(context, e.raw_os_error().unwrap_or(libc::EINVAL));
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
    give_up(context, crate::confine::child::errno())
}

fn give_up(context: &mut Context<'_>, errno: i32) -> ! {
    context.error = if errno == 0 { libc::EINVAL } else { errno };
    // SAFETY: ends this process without running the host's exit handlers.
    unsafe { libc::_exit(127) }
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
