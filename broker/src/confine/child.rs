//! What a child started on the host's memory (`clone(CLONE_VM …)`) needs before it `exec`s: a
//! stack of its own, the host's signals kept out, strings the kernel takes, and system calls
//! that report the errno without allocating; and what such a child runs before it `exec`s
//! ([`Hooks`]). Used by the process runner's spawn (`launch::runner::process::vfork`) and by
//! the maker of worlds (`confine::world::make`).

use std::ffi::{CString, c_void};
use std::io;

/// The child's stack until `exec`: the confinement's system calls need little, and a guard
/// page below it turns an overflow into a fault instead of a write into the host's memory.
pub(crate) const CHILD_STACK_SIZE: usize = 128 * 1024;

/// One past the highest signal number on Linux (`_NSIG`).
pub(crate) const SIGNALS_END: libc::c_int = 65;

/// `bytes` as a C string; a NUL byte inside is refused.
pub(crate) fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "an argument, variable or path contains a NUL byte",
        )
    })
}

/// `Err` with the current errno when `ret` is -1.
pub(crate) fn check(ret: libc::c_int) -> io::Result<()> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `Err` with the current errno when `ret` is -1; else `ret`.
pub(crate) fn check_long(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// The errno of the last failed call (`EINVAL` if there is none).
pub(crate) fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .filter(|e| *e != 0)
        .unwrap_or(libc::EINVAL)
}

/// A stack mapping with a guard page at its low end, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Stack {
    base: *mut c_void,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; nothing else refers to it.
unsafe impl Send for Stack {}

impl Stack {
    pub(crate) fn new() -> io::Result<Self> {
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
    pub(crate) fn top(&self) -> *mut c_void {
        // SAFETY: one past the end of the mapping, which is page-aligned.
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; its child has exec'd or exited.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// All signals blocked on this thread while it lives; the previous mask restored on drop.
pub(crate) struct BlockedSignals(libc::sigset_t);

impl BlockedSignals {
    pub(crate) fn new() -> io::Result<Self> {
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

/// In a child on the host's memory: every caught signal back to its default (the host's
/// handlers must not run on the host's memory from here), and `SIGPIPE` too (Rust ignores it
/// in the host). Raw system calls only.
pub(crate) fn reset_signal_handlers() {
    // SAFETY (whole block): sigaction on plain local structs.
    unsafe {
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
    }
}

/// What runs in the child between its start and `exec`, on the host's memory: raw,
/// async-signal-safe system calls only (no allocation, no locks, no panics).
pub(crate) trait Hooks: Send + Sync {
    /// First, in the host's namespaces.
    fn before(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Whether the plugin runs in a world: then [`Self::enter`] runs next and the plugin is
    /// started as the child's sibling inside it.
    fn enters_world(&self) -> bool {
        false
    }

    /// Enters the world (after [`Self::before`], before the working directory is set).
    fn enter(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Last, in the process that `exec`s.
    fn confine(&mut self) -> io::Result<()>;
}

impl<F: FnMut() -> io::Result<()> + Send + Sync> Hooks for F {
    fn confine(&mut self) -> io::Result<()> {
        self()
    }
}
