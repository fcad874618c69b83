//! The janitor: one small process per host that cleans up after the host's plugins if the host
//! dies, even by `SIGKILL`.
//!
//! It is `/bin/sh` running [`SCRIPT`](protocol::SCRIPT), started on the first launch and kept for the host's
//! lifetime. Its standard input is one end of a socket pair (the *lifeline*) whose other end
//! only the host holds (close-on-exec, so plugins never inherit it). Each launch registers its
//! directories as soon as they exist — before a secret is written into them — and adds its pids
//! cgroup (when it has one), its gVisor container and its plugin's process group as it makes
//! them ([`Registration::update`]); each plugin ended by the host is unregistered, so a process
//! group id that the system later reuses is never signalled. When the lifeline reaches end-of-file — the host
//! has exited or was killed — the janitor sends `SIGKILL` to every still-registered process
//! group, then kills **every process in** each still-registered cgroup and removes the group,
//! then removes every still-registered directory with `rm -rf`, which removes symbolic links
//! rather than following them.
//!
//! The cgroup kill is what reaches a process that left the plugin's process group or session
//! (`setsid`), which no group kill does: on cgroup v2 by writing `1` to `cgroup.kill` (the
//! kernel kills the whole group, racing no fork); on a v1 hierarchy by rounds of "`SIGKILL`
//! every pid in `cgroup.procs`" until the group is empty (at most [`CGROUP_KILL_ROUNDS`]; a
//! process killed cannot fork again, and the group's `pids.max` bounds how many can appear
//! between two rounds), then `rmdir`.
//!
//! # Protocol
//! One line per message, all ASCII: `r ID PGID CGROUP DIR…` registers (or replaces what
//! registration `ID` covers, its container included), `u ID` unregisters,
//! `k ID PGID CGROUP DIR…` cleans up at once (kills the group and the cgroup, removes the
//! directories, deletes the registration's gVisor container), `g ID RUNSC ROOT CONTAINER` adds
//! a gVisor container to registration `ID` (deleted with `RUNSC --root ROOT delete --force
//! CONTAINER` after its group is killed). `ID` is the host's registration number, `PGID` a
//! process group id above 1, or `0` before the plugin runs (no group is signalled),
//! `CGROUP` the plugin's cgroup directory or `-` for none, and it and each `DIR` an absolute
//! path without `..` in which every byte outside `[A-Za-z0-9/._-]` is written as a three-digit
//! octal escape `\ooo` (so spaces, newlines, `%`, `\` and non-UTF-8 bytes are all safe; the
//! shell decodes them with `printf`). A line cut short by the host's death has no newline and
//! is ignored.
//!
//! # When the janitor dies
//! The host notices at its next message (the process has exited, or the write fails or times
//! out after [`WRITE_TIMEOUT`]); it then starts a new janitor, **re-sends every live
//! registration** to it and logs a warning. A janitor that is replaced while still running is
//! killed first, so closing its lifeline does not make it clean up.
//!
//! # Confinement
//! Started with an empty environment, `/` as working directory, standard output and error on
//! `/dev/null`, in a process group of its own (a signal to the host's group does not reach
//! it), with `no_new_privs` and every descriptor above standard error closed at exec.
//!
//! Remaining windows, each microseconds long: between the reaping of a plugin and its
//! unregistration, a host killed at that instant has the janitor signal a group id that the
//! system would have to reuse in that same instant; between the creation of a launch's
//! directories and their registration (no byte is written into them before), a host killed at
//! that instant leaves them behind, empty.

mod protocol;

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tether_transport::internal::lock;

use crate::confine::container::Container;
use crate::confine::janitor::protocol::{
    NO_GROUP, SCRIPT, checked_group, container_line, encoded, register_line,
};

/// How long a message to the janitor may wait for room in the lifeline before the janitor is
/// considered stuck and replaced. The janitor reads continuously, so a write normally completes
/// at once; this only bounds a janitor that was stopped (`SIGSTOP`) or starved.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// How many directories one `rm` removes when the host has died (keeps the argument list far
/// below the system's limit: 64 paths of at most 4 KiB each).
pub(crate) const RM_BATCH: usize = 64;

/// How many rounds of "`SIGKILL` every process listed in the cgroup" the janitor tries on a
/// cgroup v1 plugin group (v2 groups are killed at once with `cgroup.kill`) before it leaves
/// the group to the next launch's stale-group cleanup. Each round that finds the group empty
/// also tries to remove it (which fails while killed processes are still exiting).
pub(crate) const CGROUP_KILL_ROUNDS: u32 = 10_000;

/// The shell that runs [`SCRIPT`](protocol::SCRIPT).
const SHELL: &str = "/bin/sh";

/// The process-wide janitor shared by every launch of this host.
static SHARED: Janitor = Janitor::new();

/// A janitor process (started lazily) and what is registered with it.
#[derive(Debug)]
pub(crate) struct Janitor {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    running: Option<Running>,
    /// Every live registration by id: `(process group, encoded cgroup or "-", encoded
    /// directories)`, kept to re-send to a replacement janitor.
    registered: BTreeMap<u64, (u32, String, String)>,
    /// The container line of registrations that have one, re-sent with them.
    containers: BTreeMap<u64, String>,
    next_id: u64,
}

#[derive(Debug)]
struct Running {
    child: Child,
    lifeline: UnixStream,
}

/// A plugin registered with the janitor. [`unregister`](Self::unregister) it once the host
/// has ended the plugin and removed its directories; dropping it instead has the janitor kill
/// the group and remove the directories at once (the host could not confirm it did).
#[derive(Debug)]
pub(crate) struct Registration {
    janitor: &'static Janitor,
    id: u64,
    armed: bool,
}

impl Janitor {
    /// A janitor with nothing registered; its process starts with the first registration.
    pub(crate) const fn new() -> Self {
        Self {
            state: Mutex::new(State {
                running: None,
                registered: BTreeMap::new(),
                containers: BTreeMap::new(),
                next_id: 0,
            }),
        }
    }

    /// The janitor of this host process.
    pub(crate) fn shared() -> &'static Self {
        &SHARED
    }

    /// Registers the directories `dirs` of a launch (its private directory, the directory its
    /// secrets are about to be written to), made before its plugin runs: if the host dies
    /// before the returned registration is unregistered, they are removed. The launch adds its
    /// cgroup, container and process group with [`Registration::update`] as it makes them.
    /// Starts the janitor process if none runs (or it died).
    ///
    /// # Errors
    /// A directory is not absolute or contains `..`, or the janitor cannot be started or
    /// written to.
    pub(crate) fn register_dirs(&'static self, dirs: &[&Path]) -> io::Result<Registration> {
        let (cgroup, encoded) = encoded(None, dirs)?;
        let mut state = self.lock();
        let id = state.next_id;
        state.send(&register_line(id, NO_GROUP, &cgroup, &encoded))?;
        state.next_id += 1;
        state.registered.insert(id, (NO_GROUP, cgroup, encoded));
        Ok(Registration {
            janitor: self,
            id,
            armed: true,
        })
    }

    /// [`register_dirs`](Self::register_dirs), then the plugin's process group `pgid` and its
    /// pids cgroup `cgroup`.
    #[cfg(test)]
    fn register(
        &'static self,
        pgid: u32,
        cgroup: Option<&Path>,
        dirs: &[&Path],
    ) -> io::Result<Registration> {
        let mut registration = self.register_dirs(dirs)?;
        registration.update(Some(pgid), cgroup, dirs, None)?;
        Ok(registration)
    }

    /// Replaces what registration `id` covers (see [`Registration::update`]).
    fn update(
        &self,
        id: u64,
        pgid: u32,
        cgroup: Option<&Path>,
        dirs: &[&Path],
        container: Option<&Container>,
    ) -> io::Result<()> {
        let (cgroup, encoded) = encoded(cgroup, dirs)?;
        let container = container.map(|c| container_line(c, id)).transpose()?;
        let mut state = self.lock();
        let mut message = register_line(id, pgid, &cgroup, &encoded);
        message.push_str(container.as_deref().unwrap_or(""));
        // Kept first: a janitor started to replace a dead one is sent this already.
        state.registered.insert(id, (pgid, cgroup, encoded));
        match container {
            Some(line) => state.containers.insert(id, line),
            None => state.containers.remove(&id),
        };
        state.send(&message)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Forgets registration `id`; with `clean_now`, has the janitor kill its group and remove
    /// its directories first.
    fn release(&self, id: u64, clean_now: bool) {
        let mut state = self.lock();
        let Some((pgid, cgroup, dirs)) = state.registered.remove(&id) else {
            return;
        };
        state.containers.remove(&id);
        let message = if clean_now {
            // `k` before `u`: it reads the registration's container, which `u` forgets.
            format!("k {id} {pgid} {cgroup} {dirs}\nu {id}\n")
        } else if state.running.is_some() {
            format!("u {id}\n")
        } else {
            return;
        };
        if let Err(e) = state.send(&message) {
            tracing::warn!(error = %e, pgid, clean_now, "cannot tell the janitor that a plugin has ended");
        }
    }

    /// The janitor's process id, if it runs.
    #[cfg(test)]
    fn pid(&self) -> Option<u32> {
        self.lock().running.as_ref().map(|r| r.child.id())
    }

    /// Closes the lifeline as the host's death would, leaving the janitor to clean up; returns
    /// its process to wait for.
    #[cfg(test)]
    fn cut_lifeline(&self) -> Option<Child> {
        self.lock().running.take().map(|r| r.child)
    }
}

impl State {
    /// Sends `message`; if the janitor is gone or stuck, replaces it once and sends again.
    fn send(&mut self, message: &str) -> io::Result<()> {
        let error = match self.janitor()?.write(message) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        tracing::warn!(error = %error, "cannot write to the janitor; replacing it");
        self.abandon();
        self.janitor()?.write(message)
    }

    /// The running janitor: a new one (sent every live registration) if none runs.
    fn janitor(&mut self) -> io::Result<&mut Running> {
        if let Some(running) = &mut self.running {
            let gone = match running.child.try_wait() {
                Ok(None) => false,
                Ok(Some(status)) => {
                    tracing::warn!(pid = running.child.id(), %status, "the janitor exited; starting a new one");
                    true
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot check on the janitor; replacing it");
                    true
                }
            };
            if gone {
                self.abandon();
            }
        }
        if self.running.is_none() {
            let mut running = Running::spawn()?;
            for (id, (pgid, cgroup, dirs)) in &self.registered {
                let mut line = register_line(*id, *pgid, cgroup, dirs);
                line.push_str(self.containers.get(id).map_or("", String::as_str));
                if let Err(e) = running.write(&line) {
                    running.abandon();
                    return Err(e);
                }
            }
            if !self.registered.is_empty() {
                tracing::warn!(
                    pid = running.child.id(),
                    plugins = self.registered.len(),
                    "re-registered the running plugins with a new janitor"
                );
            }
            self.running = Some(running);
        }
        Ok(self
            .running
            .as_mut()
            .expect("a janitor was just started if none ran"))
    }

    fn abandon(&mut self) {
        if let Some(running) = self.running.take() {
            running.abandon();
        }
    }
}

impl Running {
    fn spawn() -> io::Result<Self> {
        let (lifeline, janitor_end) = UnixStream::pair()?;
        lifeline.set_write_timeout(Some(WRITE_TIMEOUT))?;
        let mut command = Command::new(SHELL);
        command
            .args([
                "-c",
                SCRIPT,
                "tether-janitor",
                &RM_BATCH.to_string(),
                &CGROUP_KILL_ROUNDS.to_string(),
            ])
            .env_clear()
            // Holds no directory of the host's busy.
            .current_dir("/")
            .stdin(Stdio::from(OwnedFd::from(janitor_end)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Not in the host's process group: a signal to that group must not stop it.
            .process_group(0);
        // SAFETY: `confine` makes only async-signal-safe system calls.
        unsafe { command.pre_exec(confine) };
        let child = command.spawn()?;
        // `command`, holding the janitor's end, is dropped here: only the janitor keeps it.
        tracing::debug!(pid = child.id(), "janitor started");
        Ok(Self { child, lifeline })
    }

    /// Writes all of `message` without raising `SIGPIPE` if the janitor is gone.
    fn write(&mut self, message: &str) -> io::Result<()> {
        let mut rest = message.as_bytes();
        while !rest.is_empty() {
            // SAFETY: a valid socket and a valid buffer of `rest.len()` bytes.
            let sent = unsafe {
                libc::send(
                    self.lifeline.as_raw_fd(),
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            match usize::try_from(sent) {
                Ok(n) => rest = &rest[n..],
                Err(_) => {
                    let error = io::Error::last_os_error();
                    if error.kind() != io::ErrorKind::Interrupted {
                        return Err(error);
                    }
                }
            }
        }
        Ok(())
    }

    /// Ends this janitor without letting it clean up: killed before its lifeline closes.
    fn abandon(mut self) {
        // Unreaped until the wait below, so the pid is still this janitor's.
        let _ = self.child.kill();
        drop(self.lifeline);
        let _ = self.child.wait();
    }
}

/// Between fork and exec: no privileges to gain, and no descriptor of the host's kept.
fn confine() -> io::Result<()> {
    // SAFETY: raw system calls with valid arguments; nothing allocates.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        // CLOSE_RANGE_CLOEXEC = 1 << 2. Kernels before 5.11 lack it; the host's own
        // descriptors are close-on-exec anyway, so that is not fatal.
        libc::syscall(libc::SYS_close_range, 3_u32, u32::MAX, 4_u32);
    }
    Ok(())
}

impl Registration {
    /// Replaces what this registration covers with the process group `pgid` (`None` before
    /// the plugin runs), the pids cgroup `cgroup`, the directories `dirs` and the gVisor
    /// `container`: a launch adds each before it can be left behind (the cgroup before the
    /// plugin enters it, the container before `runsc` makes it), keeping its directories.
    ///
    /// # Errors
    /// As [`Janitor::register`]. What the host keeps is updated even when the janitor could not
    /// be told (a janitor started to replace it is sent the update).
    pub(crate) fn update(
        &mut self,
        pgid: Option<u32>,
        cgroup: Option<&Path>,
        dirs: &[&Path],
        container: Option<&Container>,
    ) -> io::Result<()> {
        let pgid = match pgid {
            Some(pgid) => checked_group(pgid)?,
            None => NO_GROUP,
        };
        self.janitor.update(self.id, pgid, cgroup, dirs, container)
    }

    /// The host has ended the plugin and removed its directories: the janitor forgets them.
    pub(crate) fn unregister(mut self) {
        self.armed = false;
        self.janitor.release(self.id, false);
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if self.armed {
            self.janitor.release(self.id, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::process::ExitStatusExt as _;
    use std::path::PathBuf;
    use std::process::ExitStatus;
    use std::sync::mpsc;

    use super::*;
    use crate::confine::janitor::protocol::checked;

    /// How long a test waits for a process to exit.
    const EXIT_LIMIT: Duration = Duration::from_secs(5);

    fn janitor() -> &'static Janitor {
        Box::leak(Box::new(Janitor::new()))
    }

    /// A plugin stand-in leading its own process group.
    fn plugin() -> Child {
        Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap()
    }

    fn waited(mut child: Child) -> ExitStatus {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || tx.send(child.wait().unwrap()));
        rx.recv_timeout(EXIT_LIMIT).expect("the process exits")
    }

    /// A directory (holding a file) that the janitor may be asked to remove.
    fn dir(base: &Path, name: &str) -> PathBuf {
        let dir = base.join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("secret"), b"s").unwrap();
        dir
    }

    fn killed(status: ExitStatus) -> bool {
        status.signal() == Some(libc::SIGKILL)
    }

    #[test]
    fn the_root_and_parent_components_are_refused() {
        assert!(checked(Path::new("/")).is_err());
        assert!(checked(Path::new("/tmp/../etc")).is_err());
        assert!(checked(Path::new("relative")).unwrap().is_absolute());
        let j = janitor();
        assert!(j.register_dirs(&[Path::new("/")]).is_err());
        assert!(j.register_dirs(&[Path::new("/tmp/../etc")]).is_err());
        assert!(j.pid().is_none(), "no janitor for refused registrations");
        // Process groups 0 and 1 are never a plugin's.
        let mut registration = j.register_dirs(&[]).unwrap();
        assert!(registration.update(Some(1), None, &[], None).is_err());
        assert!(registration.update(Some(0), None, &[], None).is_err());
        registration.unregister();
    }

    #[test]
    fn host_death_kills_registered_groups_and_removes_their_dirs_but_not_an_unregistered_ones() {
        let base = tempfile::tempdir().unwrap();
        let j = janitor();
        let (a, b, c) = (plugin(), plugin(), plugin());
        let (da, db, dc) = (
            dir(base.path(), "a"),
            dir(base.path(), "b"),
            dir(base.path(), "c"),
        );
        let ra = j.register(a.id(), None, &[&da]).unwrap();
        let rb = j
            .register(b.id(), None, &[&db, base.path().join("b2").as_path()])
            .unwrap();
        let rc = j.register(c.id(), None, &[&dc]).unwrap();
        rc.unregister();
        std::mem::forget((ra, rb)); // The host dies holding them.
        let janitor = j.cut_lifeline().unwrap();
        assert!(waited(janitor).success());
        assert!(killed(waited(a)));
        assert!(killed(waited(b)));
        assert!(!da.exists() && !db.exists());
        let mut c = c;
        assert!(
            c.try_wait().unwrap().is_none(),
            "the unregistered plugin runs"
        );
        assert!(dc.join("secret").exists());
        c.kill().unwrap();
        c.wait().unwrap();
    }

    #[test]
    fn directories_registered_before_their_plugin_runs_and_what_is_added_later_are_cleaned_up_when_the_host_dies()
     {
        let base = tempfile::tempdir().unwrap();
        let j = janitor();
        let (only, early, later) = (
            dir(base.path(), "only"),
            dir(base.path(), "early"),
            dir(base.path(), "later"),
        );
        let before_spawn = j.register_dirs(&[&only]).unwrap();
        let mut launch = j.register_dirs(&[&early]).unwrap();
        let p = plugin();
        launch
            .update(Some(p.id()), None, &[&early, &later], None)
            .unwrap();
        assert!(launch.update(Some(1), None, &[&early], None).is_err());
        std::mem::forget((before_spawn, launch)); // The host dies holding them.
        assert!(waited(j.cut_lifeline().unwrap()).success());
        assert!(killed(waited(p)));
        assert!(!only.exists() && !early.exists() && !later.exists());
    }

    #[test]
    fn a_closed_lifeline_with_everything_unregistered_touches_nothing() {
        let base = tempfile::tempdir().unwrap();
        let j = janitor();
        let mut p = plugin();
        let d = dir(base.path(), "d");
        j.register(p.id(), None, &[&d]).unwrap().unregister();
        assert!(waited(j.cut_lifeline().unwrap()).success());
        assert!(p.try_wait().unwrap().is_none());
        assert!(d.join("secret").exists());
        p.kill().unwrap();
        p.wait().unwrap();
    }

    #[test]
    fn a_dropped_registration_is_cleaned_up_at_once_and_the_janitor_keeps_running() {
        let base = tempfile::tempdir().unwrap();
        let j = janitor();
        let (p, q) = (plugin(), plugin());
        let (dp, dq) = (dir(base.path(), "p"), dir(base.path(), "q"));
        let rp = j.register(p.id(), None, &[&dp]).unwrap();
        let rq = j.register(q.id(), None, &[&dq]).unwrap();
        let pid = j.pid();
        drop(rp);
        assert!(killed(waited(p)));
        // The removal follows the kill; the janitor handles messages in order, so once it
        // has unregistered `rq` (below) and exited, `dp` is gone.
        rq.unregister();
        assert_eq!(j.pid(), pid, "the same janitor");
        assert!(waited(j.cut_lifeline().unwrap()).success());
        assert!(!dp.exists());
        let mut q = q;
        assert!(q.try_wait().unwrap().is_none());
        assert!(dq.exists());
        q.kill().unwrap();
        q.wait().unwrap();
    }

    #[test]
    fn a_janitor_that_died_is_replaced_and_sent_the_live_registrations() {
        let base = tempfile::tempdir().unwrap();
        let j = janitor();
        let (a, b) = (plugin(), plugin());
        let (da, db) = (dir(base.path(), "a"), dir(base.path(), "b"));
        let ra = j.register(a.id(), None, &[&da]).unwrap();
        let first = j.pid().unwrap();
        // SAFETY: the janitor is our unreaped child, so the pid is its.
        assert_eq!(unsafe { libc::kill(first.cast_signed(), libc::SIGKILL) }, 0);
        // Wait until it has died, without reaping it (the host notices on its next message).
        // SAFETY: waitid on our child with a valid out-pointer.
        let dead = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                first,
                &raw mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        assert_eq!(dead, 0);
        let rb = j.register(b.id(), None, &[&db]).unwrap();
        let second = j.pid().unwrap();
        assert_ne!(first, second, "a new janitor");
        std::mem::forget((ra, rb));
        assert!(waited(j.cut_lifeline().unwrap()).success());
        assert!(killed(waited(a)), "registered before the old janitor died");
        assert!(killed(waited(b)));
        assert!(!da.exists() && !db.exists());
    }

    #[test]
    fn directories_with_any_bytes_are_removed_and_symbolic_links_not_followed() {
        let base = tempfile::tempdir().unwrap();
        let outside = dir(base.path(), "outside");
        let name = OsStr::from_bytes(b"we ird\n%s\\x\xff*");
        let odd = dir(base.path(), "x");
        let odd = {
            let renamed = base.path().join(name);
            std::fs::rename(&odd, &renamed).unwrap();
            renamed
        };
        std::os::unix::fs::symlink(&outside, odd.join("link")).unwrap();
        // A sibling whose name a glob of the odd one would match.
        let sibling = dir(base.path(), "we");
        let j = janitor();
        let p = plugin();
        std::mem::forget(j.register(p.id(), None, &[&odd]).unwrap());
        assert!(waited(j.cut_lifeline().unwrap()).success());
        assert!(killed(waited(p)));
        assert!(!odd.exists());
        assert!(outside.join("secret").exists(), "the link's target stays");
        assert!(sibling.join("secret").exists());
    }

    #[test]
    fn the_janitor_runs_confined() {
        let j = janitor();
        let mut p = plugin();
        let r = j.register(p.id(), None, &[]).unwrap();
        let pid = j.pid().unwrap();
        let proc = PathBuf::from(format!("/proc/{pid}"));
        assert!(std::fs::read(proc.join("environ")).unwrap().is_empty());
        assert_eq!(
            std::fs::read_link(proc.join("cwd")).unwrap(),
            Path::new("/")
        );
        let status = std::fs::read_to_string(proc.join("status")).unwrap();
        assert!(status.contains("NoNewPrivs:\t1"), "{status}");
        let fds: Vec<String> = std::fs::read_dir(proc.join("fd"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            fds.iter().all(|fd| ["0", "1", "2"].contains(&fd.as_str())),
            "{fds:?}"
        );
        // Its own process group.
        // SAFETY: getpgid has no preconditions.
        assert_eq!(
            unsafe { libc::getpgid(pid.cast_signed()) },
            pid.cast_signed()
        );
        r.unregister();
        assert!(waited(j.cut_lifeline().unwrap()).success());
        p.kill().unwrap();
        p.wait().unwrap();
    }
}
