//! Running a program on a real pseudo-terminal, as an operator runs it from a shell, and
//! reading everything the terminal received.

use std::io::Read as _;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A new pseudo-terminal: (master, slave).
///
/// # Panics
/// When `openpty` fails.
#[must_use]
pub fn open_pty() -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty fills in two descriptors; name, termios and winsize are optional.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned here only.
    unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

/// Runs `command` as the leader of a session whose controlling terminal is a new
/// pseudo-terminal (stdin, stdout and stderr), and returns its exit status and every byte the
/// terminal received (echoed input included), read until the program and everything it
/// started closed the terminal.
///
/// # Panics
/// When the program cannot start or the terminal stays open longer than `timeout`.
#[must_use]
pub fn run_on_a_terminal(mut command: Command, timeout: Duration) -> (ExitStatus, Vec<u8>) {
    let (master, slave) = open_pty();
    command
        .stdin(Stdio::from(slave.try_clone().expect("dup the terminal")))
        .stdout(Stdio::from(slave.try_clone().expect("dup the terminal")))
        .stderr(Stdio::from(slave));
    // SAFETY: setsid and ioctl are async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().expect("the program starts");
    drop(command); // The parent's copies of the slave.
    let (tx, rx) = mpsc::channel();
    let mut master = std::fs::File::from(master);
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        // Reads until every copy of the slave is closed (EIO).
        let _ = master.read_to_end(&mut seen);
        let _ = tx.send(seen);
    });
    let seen = rx.recv_timeout(timeout).unwrap_or_else(|_| {
        let _ = child.kill();
        panic!("the terminal stayed open for more than {timeout:?}")
    });
    let status = child.wait().expect("wait for the program");
    (status, seen)
}
