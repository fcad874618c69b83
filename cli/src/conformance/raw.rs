//! Launching the plugin by hand, without `tether_broker`, so that a check controls exactly what
//! the plugin is given (a wrong cookie, no certificate, other versions, a parent that dies) and
//! sees exactly what it prints.

use std::ffi::OsString;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tether_proto::env::{LaunchEnv, MagicCookie};
use tether_proto::handshake::looks_like_handshake;
use tether_proto::rustls::pki_types::CertificateDer;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, BufReader};
use tokio::process::{Child, ChildStdout, Command};

use super::subject::Subject;

/// At most this much of the plugin's stderr is kept, for messages.
const STDERR_KEEP: usize = 16 * 1024;

/// After the plugin exited, how long its stderr may take to reach end-of-file (a child it
/// started may hold the pipe open; then what arrived so far is used).
const STDERR_SETTLE: Duration = Duration::from_secs(1);

/// At most this many stdout lines are read looking for the handshake (tether hosts skip 100).
const MAX_LINES_BEFORE_HANDSHAKE: usize = 100;

/// What one launch by hand is given.
#[derive(Debug, Clone)]
pub(crate) struct RawOptions {
    /// The cookie's value (the subject's, or a wrong one).
    pub(crate) cookie_value: String,
    /// `PLUGIN_PROTOCOL_VERSIONS`.
    pub(crate) versions: Vec<u32>,
    /// `PLUGIN_CLIENT_CERT`; `None`: plaintext.
    pub(crate) client_cert: Option<CertificateDer<'static>>,
    /// `PLUGIN_MULTIPLEX_GRPC=true`.
    pub(crate) multiplex: bool,
}

/// How the launch ended up, once the handshake line was seen or the plugin gave up.
#[derive(Debug)]
pub(crate) struct RawRun {
    child: Child,
    /// The stdout lines printed before the handshake line (or all of them, without one).
    pub(crate) before: Vec<String>,
    /// The handshake line, if one came within the start timeout.
    pub(crate) handshake: Option<String>,
    /// Set when the plugin exited (before or without a handshake).
    pub(crate) exit: Option<ExitStatus>,
    /// Whether the start timeout passed without a handshake line and without an exit.
    pub(crate) timed_out: bool,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// The task reading stderr; ends at end-of-file.
    stderr_reader: Option<tokio::task::JoinHandle<()>>,
    /// The socket directory and `TMPDIR`; removed when dropped.
    _dir: tempfile::TempDir,
    /// The plugin's pid when started through [`RawRun::start_orphanable`] (its parent `sh`
    /// says it).
    pub(crate) plugin_pid: Option<u32>,
    /// The process group the child leads (`sh`'s, with the plugin in it, when started through
    /// [`RawRun::start_orphanable`]): recorded at the start, because after
    /// [`kill_parent`](Self::kill_parent) the child has no pid and the plugin's own pid names
    /// no group.
    group: Option<rustix::process::Pid>,
    /// A pidfd of the plugin started through `sh`: while it shows the plugin running, the
    /// group has a member, so its id names no other group (Linux reuses no pid while a group
    /// of that id has a member).
    plugin_pidfd: Option<std::os::fd::OwnedFd>,
}

impl RawRun {
    /// Starts the subject with `options` and reads its stdout until a handshake-looking line,
    /// its exit or the start timeout.
    pub(crate) async fn start(subject: &Subject, options: &RawOptions) -> Result<Self, String> {
        Self::spawn(subject, options, false).await
    }

    /// Like [`start`](Self::start), but with `/bin/sh` as the plugin's parent (the "host"),
    /// which [`kill_parent`](Self::kill_parent) ends.
    pub(crate) async fn start_orphanable(
        subject: &Subject,
        options: &RawOptions,
    ) -> Result<Self, String> {
        Self::spawn(subject, options, true).await
    }

    async fn spawn(
        subject: &Subject,
        options: &RawOptions,
        via_shell: bool,
    ) -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("tether-conf-")
            .tempdir_in("/tmp")
            .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
        let mut env = LaunchEnv::new(MagicCookie::new(
            subject.cookie_key.clone(),
            options.cookie_value.clone(),
        ));
        env.app_versions = options.versions.clone();
        env.client_cert = options.client_cert.clone();
        env.unix_socket_dir = Some(dir.path().to_owned());
        env.tmp_dir = Some(dir.path().to_owned());
        env.multiplex = options.multiplex.then_some(true);
        let mut command = if via_shell {
            // `sh` starts the plugin in the background, says its pid, and becomes `sleep`:
            // the plugin's parent, which the check then kills.
            let mut c = Command::new("/bin/sh");
            c.arg("-c")
                .arg("\"$0\" \"$@\" & echo \"conformance-pid $!\"; exec sleep 3600")
                .arg(&subject.program)
                .args(&subject.args);
            c
        } else {
            let mut c = Command::new(&subject.program);
            c.args(&subject.args);
            c
        };
        command
            .env_clear()
            .envs(host_env())
            .envs(subject.env.iter().map(|(k, v)| (k, v)))
            .envs(env.to_vars())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(dir) = &subject.current_dir {
            command.current_dir(dir);
        }
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", subject.program.display()))?;
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let stderr_reader = child
            .stderr
            .take()
            .map(|pipe| tokio::spawn(keep_tail(pipe, Arc::clone(&stderr))));
        let Some(stdout) = child.stdout.take() else {
            return Err("the plugin's stdout is not a pipe".to_owned());
        };
        let group = child
            .id()
            .and_then(|pid| rustix::process::Pid::from_raw(pid.try_into().ok()?));
        let mut run = Self {
            group,
            child,
            before: Vec::new(),
            handshake: None,
            exit: None,
            timed_out: false,
            stderr,
            stderr_reader,
            _dir: dir,
            plugin_pid: None,
            plugin_pidfd: None,
        };
        let read = run.read_handshake(BufReader::new(stdout), via_shell);
        if tokio::time::timeout(subject.start_timeout, read)
            .await
            .is_err()
        {
            run.timed_out = true;
        }
        Ok(run)
    }

    async fn read_handshake(&mut self, mut stdout: BufReader<ChildStdout>, via_shell: bool) {
        let mut line = String::new();
        loop {
            line.clear();
            match stdout.read_line(&mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = line.trim_end_matches(['\n', '\r']).to_owned();
            if let Some(pid) = via_shell
                .then(|| text.strip_prefix("conformance-pid "))
                .flatten()
            {
                self.plugin_pid = pid.trim().parse().ok();
                self.plugin_pidfd = self
                    .plugin_pid
                    .and_then(|pid| rustix::process::Pid::from_raw(pid.try_into().ok()?))
                    .and_then(|pid| {
                        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
                    });
                continue;
            }
            if looks_like_handshake(text.as_bytes()) {
                self.handshake = Some(text);
                // Later output is drained, as hosts do, so the plugin never blocks on it.
                tokio::spawn(async move {
                    let mut sink = Vec::new();
                    let _ = stdout.read_to_end(&mut sink).await;
                });
                return;
            }
            self.before.push(text);
            if self.before.len() >= MAX_LINES_BEFORE_HANDSHAKE {
                break;
            }
        }
        // stdout ended without a handshake: the plugin is exiting.
        self.exit = self.child.wait().await.ok();
        self.settle_stderr().await;
    }

    /// Waits (at most [`STDERR_SETTLE`]) for the rest of stderr once the plugin exited.
    async fn settle_stderr(&mut self) {
        if let Some(reader) = self.stderr_reader.take() {
            let _ = tokio::time::timeout(STDERR_SETTLE, reader).await;
        }
    }

    /// What the plugin printed on stderr so far (its tail), trimmed.
    pub(crate) fn stderr(&self) -> String {
        let bytes = self.stderr.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).trim().to_owned()
    }

    /// Waits at most `timeout` for the plugin (the direct child) to exit.
    pub(crate) async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = tokio::time::timeout(timeout, self.child.wait())
                .await
                .ok()
                .and_then(Result::ok);
        }
        if self.exit.is_some() {
            self.settle_stderr().await;
        }
        self.exit
    }

    /// Kills the plugin's parent `sh` (started by [`start_orphanable`](Self::start_orphanable)).
    pub(crate) async fn kill_parent(&mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

impl Drop for RawRun {
    fn drop(&mut self) {
        // The plugin leads its own process group (or `sh` does); end all of it, while a member
        // is known to be there: the child not yet reaped, or the plugin still running.
        let member = self.child.id().is_some() || self.plugin_pidfd.as_ref().is_some_and(running);
        if let Some(group) = self.group.filter(|_| member) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        let _ = self.child.start_kill();
    }
}

/// The host's variables a plugin gets besides the protocol's: tether's default allow-list
/// (`PATH`, locale, …), as under a tether host.
fn host_env() -> Vec<(OsString, OsString)> {
    tether_broker::launch::DEFAULT_ENV_ALLOWLIST
        .iter()
        .filter_map(|name| std::env::var_os(name).map(|v| (OsString::from(name), v)))
        .collect()
}

/// Keeps the last [`STDERR_KEEP`] bytes of `pipe` in `tail`.
async fn keep_tail(mut pipe: impl AsyncRead + Unpin, tail: Arc<Mutex<Vec<u8>>>) {
    let mut chunk = [0u8; 4096];
    while let Ok(n) = pipe.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        if let Ok(mut tail) = tail.lock() {
            tail.extend_from_slice(&chunk[..n]);
            let excess = tail.len().saturating_sub(STDERR_KEEP);
            tail.drain(..excess);
        }
    }
}

/// Whether the process of `pidfd` is still running (its pidfd is not yet readable).
fn running(pidfd: &std::os::fd::OwnedFd) -> bool {
    let mut fds = [rustix::event::PollFd::new(
        pidfd,
        rustix::event::PollFlags::IN,
    )];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(0))
}

/// Waits at most `timeout` for process `pid` (not a child of ours) to exit, through a pidfd.
/// `Ok(true)`: it exited; `Ok(false)`: still running.
pub(crate) async fn wait_pid_exit(pid: u32, timeout: Duration) -> Result<bool, String> {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return Err(format!("pid {pid} is not a process id"));
    };
    let fd = match rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::SRCH) => return Ok(true),
        Err(e) => return Err(format!("cannot watch pid {pid:?}: {e}")),
    };
    // A pidfd becomes readable when the process exits; poll it off the async threads.
    let wait = tokio::task::spawn_blocking(move || {
        let timespec = rustix::event::Timespec::try_from(timeout).ok();
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        rustix::event::poll(&mut fds, timespec.as_ref()).map(|ready| ready > 0)
    });
    match wait.await {
        Ok(Ok(exited)) => Ok(exited),
        Ok(Err(e)) => Err(format!("cannot watch pid {pid:?}: {e}")),
        Err(e) => Err(format!("cannot watch pid {pid:?}: {e}")),
    }
}
