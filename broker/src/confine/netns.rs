//! Empty network namespaces made before the launch that enters them.
//!
//! A plugin with no network gets a network namespace of its own ([`NetworkMechanism::Namespace`]).
//! Making one (`unshare(CLONE_NEWNET)`: the loopback device, the per-namespace sysctl tables)
//! costs ≈ 0.4 ms of kernel time here, and between fork and exec it is on the launch's critical
//! path while the host waits for the exec. So the host makes each launch's namespace ahead of
//! time, on a short-lived thread of its own, and keeps [`NETWORK_NAMESPACE_RESERVE`] of them
//! ready; the child only enters one (`setns`, microseconds). Taking one starts making the next
//! while the plugin starts, when the host is waiting anyway (bench/BENCHMARKS.md, Decisions).
//!
//! The isolation is the same as `unshare` in the child: every namespace is new and empty (a
//! loopback that is down), made for exactly one plugin — [`take`] hands each out once, and the
//! launch closes the host's descriptor when the spawn is done. Until then the only reference to
//! it is that descriptor in the host. If a namespace cannot be made ahead (no thread, no
//! `/proc`), the child makes its own as before.
//!
//! [`NetworkMechanism::Namespace`]: crate::confine::NetworkMechanism::Namespace

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

/// How many empty network namespaces the host keeps ready for its next launches: one, the next
/// launch's. A burst of launches beyond it makes the rest on the spot (still off the forked
/// child), so a larger reserve would only hold more namespaces while the host is idle.
pub const NETWORK_NAMESPACE_RESERVE: usize = 1;

/// How a launch's child gets its empty network namespace.
#[derive(Debug)]
pub(crate) enum NewNamespace {
    /// Enter this namespace, made by the host for this launch alone (`setns`).
    Enter(OwnedFd),
    /// Make one in the child (`unshare`): none could be made ahead.
    Unshare,
}

impl NewNamespace {
    /// The descriptor to `setns` into, `None` to `unshare` instead.
    pub(crate) fn enter_fd(&self) -> Option<RawFd> {
        match self {
            Self::Enter(fd) => Some(fd.as_raw_fd()),
            Self::Unshare => None,
        }
    }
}

struct Reserve {
    ready: Vec<OwnedFd>,
    /// A thread is making namespaces for the reserve.
    filling: bool,
}

static RESERVE: Mutex<Reserve> = Mutex::new(Reserve {
    ready: Vec::new(),
    filling: false,
});

/// A new, empty network namespace for one launch, from the reserve or made now; starts refilling
/// the reserve.
pub(crate) fn take() -> NewNamespace {
    let ready = lock().ready.pop();
    let namespace = match ready.map_or_else(make, Ok) {
        Ok(fd) => NewNamespace::Enter(fd),
        Err(e) => {
            tracing::debug!(error = %e, "cannot make a network namespace ahead; the plugin makes its own");
            NewNamespace::Unshare
        }
    };
    refill();
    namespace
}

fn lock() -> std::sync::MutexGuard<'static, Reserve> {
    // The reserve is a list of descriptors: a thread that panicked while holding the lock left
    // it consistent.
    RESERVE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts a thread filling the reserve unless it is full or being filled.
fn refill() {
    {
        let mut reserve = lock();
        if reserve.filling || reserve.ready.len() >= NETWORK_NAMESPACE_RESERVE {
            return;
        }
        reserve.filling = true;
    }
    let filler = std::thread::Builder::new()
        .name("tether-netns".into())
        .spawn(|| {
            // This thread is the filler's alone and ends below: it may move into each new
            // namespace it makes.
            loop {
                let made = unshare_here();
                let mut reserve = lock();
                match made {
                    Ok(fd) => reserve.ready.push(fd),
                    Err(e) => {
                        tracing::debug!(error = %e, "cannot make a network namespace ahead");
                        reserve.filling = false;
                        return;
                    }
                }
                if reserve.ready.len() >= NETWORK_NAMESPACE_RESERVE {
                    reserve.filling = false;
                    return;
                }
            }
        });
    if filler.is_err() {
        lock().filling = false;
    }
}

/// Makes an empty network namespace on a thread of its own, which leaves it when it ends: the
/// returned descriptor is then the namespace's only reference.
fn make() -> io::Result<OwnedFd> {
    std::thread::Builder::new()
        .name("tether-netns".into())
        .spawn(unshare_here)?
        .join()
        .map_err(|_| io::Error::other("the network namespace thread panicked"))?
}

/// Moves the calling thread into a new, empty network namespace and returns a descriptor of
/// it. Only for a thread of this module's own, which ends without doing anything else there.
fn unshare_here() -> io::Result<OwnedFd> {
    // SAFETY: unshare changes only this thread's namespaces (a network namespace may be
    // unshared in a multi-threaded process).
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a NUL-terminated path; the flags make a read-only, close-on-exec descriptor,
    // whose ownership passes to the OwnedFd below.
    let fd = unsafe {
        libc::open(
            c"/proc/thread-self/ns/net".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn inode(path: &str) -> u64 {
        std::fs::metadata(path).unwrap().ino()
    }

    #[test]
    fn each_launch_gets_a_namespace_of_its_own_and_the_host_stays_in_its_own() {
        if !crate::confine::network_namespaces_available() {
            eprintln!("skipped: the host may not make network namespaces (not root)");
            return;
        }
        let host = inode("/proc/thread-self/ns/net");
        let mut seen = std::collections::HashSet::new();
        // Kept open, so that no namespace is freed and its inode number reused.
        let mut held = Vec::new();
        for _ in 0..5 {
            let NewNamespace::Enter(fd) = take() else {
                panic!("a root host makes namespaces ahead");
            };
            let ns = inode(&format!("/proc/self/fd/{}", fd.as_raw_fd()));
            assert_ne!(ns, host, "the host's own namespace is never handed out");
            assert!(seen.insert(ns), "a namespace is handed out twice");
            held.push(fd);
        }
        assert_eq!(inode("/proc/thread-self/ns/net"), host);
        assert_eq!(inode("/proc/self/ns/net"), host);
    }
}
