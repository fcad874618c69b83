//! Keepers ended by the host, reaped off the launch path: a keeper's exit waits until every
//! process of its world has exited.

use std::sync::Mutex;
use std::sync::mpsc::{Sender, channel};

static QUEUE: Mutex<Option<Sender<u32>>> = Mutex::new(None);

/// Kills keeper `pid` and reaps it on the reaper thread (here, if the thread cannot start).
pub(crate) fn reap(pid: u32) {
    let mut queue = QUEUE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if queue.is_none() {
        let (sender, receiver) = channel::<u32>();
        let started = std::thread::Builder::new()
            .name("tether-world-reaper".into())
            .spawn(move || {
                for pid in receiver {
                    kill_and_wait(pid);
                }
            });
        if started.is_ok() {
            *queue = Some(sender);
        }
    }
    let sent = queue.as_ref().is_some_and(|q| q.send(pid).is_ok());
    drop(queue);
    if !sent {
        kill_and_wait(pid);
    }
}

/// Sends `SIGKILL` to the host's child `pid` and waits for it (nothing for 0, which would
/// name the host's own process group).
pub(crate) fn kill_and_wait(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    if pid == 0 {
        return;
    }
    // SAFETY: pid is an unreaped child of this process, so it names that process.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        while libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL) == -1
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
    }
}
