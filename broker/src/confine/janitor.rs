//! The janitor: one small process per host that cleans up after the host's plugins if the host
//! dies, even by `SIGKILL`.
//!
//! It is `/bin/sh` running [`SCRIPT`], started on the first launch and kept for the host's
//! lifetime. Its standard input is one end of a socket pair (the *lifeline*) whose other end
//! only the host holds (close-on-exec, so plugins never inherit it). Each launch registers its
//! plugin's process group, its pids cgroup (when it has one) and its directories right after
//! the spawn; each plugin ended by the host is unregistered, so a process group id that the
//! system later reuses is never signalled. When the lifeline reaches end-of-file — the host
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
//! One line per message, all ASCII: `r ID PGID CGROUP DIR…` registers, `u ID` unregisters,
//! `k ID PGID CGROUP DIR…` cleans up at once (kills the group and the cgroup, removes the
//! directories, deletes the registration's gVisor container), `g ID RUNSC ROOT CONTAINER` adds
//! a gVisor container to registration `ID` (deleted with `RUNSC --root ROOT delete --force
//! CONTAINER` after its group is killed). `ID` is the host's registration number, `PGID` a process group id above 1,
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
//! Remaining window, as with a per-plugin janitor: between the reaping of a plugin and its
//! unregistration (microseconds), a host killed at that instant has the janitor signal a group
//! id that the system would have to reuse in that same instant.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt as _;
use std::path::{Component, Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tether_transport::internal::lock;

use crate::confine::container::Container;

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

/// The shell that runs [`SCRIPT`].
const SHELL: &str = "/bin/sh";

/// The janitor's program (`sh -c`, POSIX shell, `$1` = [`RM_BATCH`], `$2` =
/// [`CGROUP_KILL_ROUNDS`]). Registrations live in the variables `p_ID` (process group), `c_ID`
/// (encoded cgroup or `-`) and `d_ID` (encoded directories); `ids` lists the live ones as
/// ` ID ID … `. Pathname expansion is off, so encoded directories are only split at spaces.
/// Only shell built-ins read and signal (`read`, `kill`); `rm`, `rmdir`, `cat` (the mount
/// table, once) and `umount` (a capped directory's tmpfs, detached first) are the only
/// programs run.
const SCRIPT: &str = r#"set -f
batch=$1
rounds=$2
ids=' '
gone() {
  case $1 in ''|*[!0-9]*) return;; esac
  [ "$1" -gt 1 ] && kill -s KILL -- "-$1" 2>/dev/null
}
decode() {
  case $1 in
    *\\*) d=$(printf "$1/"); d=${d%/};;
    *) d=$1;;
  esac
}
cgkill() {
  [ "$1" = - ] && return
  decode "$1"
  [ -d "$d" ] || return
  [ -f "$d/cgroup.kill" ] && echo 1 > "$d/cgroup.kill" 2>/dev/null
  n=0
  while [ "$n" -lt "$rounds" ]; do
    [ -f "$d/cgroup.procs" ] || return
    left=
    while read -r pid; do
      case $pid in ''|*[!0-9]*) continue;; esac
      left=1; kill -s KILL "$pid" 2>/dev/null
    done < "$d/cgroup.procs"
    [ -z "$left" ] && rmdir -- "$d" 2>/dev/null && return
    n=$((n + 1))
  done
}
unmount() {
  case $mounts in *" $d "*) umount -l -- "$d" 2>/dev/null;; esac
}
container() {
  [ -n "$1" ] || return 0
  set -- $1
  decode "$1"; r=$d; decode "$2"; root=$d; decode "$3"
  "$r" --root "$root" delete --force "$d" >/dev/null 2>&1
}
while read -r op id pgid cg dirs; do
  case $id in ''|*[!0-9]*) continue;; esac
  case $op in
    r) eval "p_$id=\$pgid c_$id=\$cg d_$id=\$dirs"; ids="$ids$id ";;
    u) unset "p_$id" "c_$id" "d_$id" "g_$id"
       case $ids in *" $id "*) ids="${ids%% $id *} ${ids#* $id }";; esac;;
    g) eval "g_$id=\"\$pgid \$cg \$dirs\"";;
    k) gone "$pgid"; cgkill "$cg"; eval "container \"\$g_$id\""; mounts=$(cat /proc/self/mounts); for e in $dirs; do decode "$e"; unmount; rm -rf -- "$d"; done;;
  esac
done
for id in $ids; do eval "gone \"\$p_$id\""; done
for id in $ids; do eval "cgkill \"\$c_$id\""; done
for id in $ids; do eval "container \"\$g_$id\""; done
mounts=$(cat /proc/self/mounts)
set --
for id in $ids; do
  eval "x=\$d_$id"
  for e in $x; do decode "$e"; unmount; set -- "$@" "$d"; done
  if [ $# -ge "$batch" ]; then rm -rf -- "$@"; set --; fi
done
[ $# -gt 0 ] && rm -rf -- "$@"
exit 0
"#;

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

    /// Registers the plugin process group `pgid`, its pids cgroup `cgroup` (if it has one) and
    /// its directories `dirs`: if the host dies before the returned registration is
    /// unregistered, the group is killed, every process in the cgroup is killed and the
    /// cgroup removed, and the directories are removed. Starts the janitor process if none
    /// runs (or it died).
    ///
    /// # Errors
    /// `pgid` is not above 1 or not a valid id, a directory is not absolute or contains `..`,
    /// or the janitor cannot be started or written to.
    pub(crate) fn register(
        &'static self,
        pgid: u32,
        cgroup: Option<&Path>,
        dirs: &[&Path],
    ) -> io::Result<Registration> {
        self.register_with(pgid, cgroup, dirs, None)
    }

    /// Like [`register`](Self::register), for a plugin that runs in a gVisor `container`: if
    /// the host dies, the container is deleted too (after the group is killed).
    ///
    /// # Errors
    /// As [`register`](Self::register).
    pub(crate) fn register_container(
        &'static self,
        pgid: u32,
        dirs: &[&Path],
        container: &Container,
    ) -> io::Result<Registration> {
        self.register_with(pgid, None, dirs, Some(container))
    }

    fn register_with(
        &'static self,
        pgid: u32,
        cgroup: Option<&Path>,
        dirs: &[&Path],
        container: Option<&Container>,
    ) -> io::Result<Registration> {
        if pgid <= 1 || i32::try_from(pgid).is_err() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{pgid} is not a plugin's process group id"),
            ));
        }
        let mut encoded = String::new();
        for dir in dirs {
            let dir = checked(dir)?;
            if !encoded.is_empty() {
                encoded.push(' ');
            }
            encode(&dir, &mut encoded);
        }
        let cgroup = match cgroup {
            Some(dir) => {
                let mut out = String::new();
                encode(&checked(dir)?, &mut out);
                out
            }
            None => "-".to_owned(),
        };
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        let mut message = register_line(id, pgid, &cgroup, &encoded);
        let container = container.map(|c| container_line(c, id)).transpose()?;
        message.push_str(container.as_deref().unwrap_or(""));
        state.send(&message)?;
        state.registered.insert(id, (pgid, cgroup, encoded));
        if let Some(line) = container {
            state.containers.insert(id, line);
        }
        Ok(Registration {
            janitor: self,
            id,
            armed: true,
        })
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

/// `dir` made absolute (against the host's working directory), refusing `..` and `/`.
fn checked(dir: &Path) -> io::Result<PathBuf> {
    let dir = std::path::absolute(dir)?;
    if dir.parent().is_none() || dir.components().any(|c| c == Component::ParentDir) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is not a directory the janitor may remove",
                dir.display()
            ),
        ));
    }
    Ok(dir)
}

/// The protocol line registering plugin `id`: process group `pgid`, its `cgroup` (encoded, or
/// `-`) and its `dirs` (encoded, space-separated), as `SCRIPT` parses it.
fn register_line(id: u64, pgid: u32, cgroup: &str, dirs: &str) -> String {
    format!("r {id} {pgid} {cgroup} {dirs}\n")
}

/// Appends `path` with every byte outside `[A-Za-z0-9/._-]` as an octal escape `\ooo`.
/// The protocol line adding `container` to registration `id`.
fn container_line(container: &Container, id: u64) -> io::Result<String> {
    let name_ok = !container.id.is_empty()
        && container
            .id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !name_ok || !container.runsc.is_absolute() || !container.root.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{container:?} is not a container the janitor may delete"),
        ));
    }
    let mut line = format!("g {id} ");
    encode(&container.runsc, &mut line);
    line.push(' ');
    encode(&container.root, &mut line);
    line.push(' ');
    line.push_str(&container.id);
    line.push('\n');
    Ok(line)
}

fn encode(path: &Path, out: &mut String) {
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "\\{b:03o}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::process::ExitStatusExt as _;
    use std::process::ExitStatus;
    use std::sync::mpsc;

    use super::*;

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
    fn paths_are_encoded_so_that_only_safe_bytes_remain() {
        let mut out = String::new();
        encode(
            Path::new(OsStr::from_bytes(b"/a b/c\n%\\\xff/x-y_z.1")),
            &mut out,
        );
        assert_eq!(out, r"/a\040b/c\012\045\134\377/x-y_z.1");
    }

    #[test]
    fn the_root_and_parent_components_are_refused() {
        assert!(checked(Path::new("/")).is_err());
        assert!(checked(Path::new("/tmp/../etc")).is_err());
        assert!(checked(Path::new("relative")).unwrap().is_absolute());
        let j = janitor();
        assert!(j.register(1, None, &[]).is_err());
        assert!(j.register(0, None, &[]).is_err());
        assert!(j.pid().is_none(), "no janitor for refused registrations");
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
