//! Issue 22, "A plugin sees an empty world": each thing a plugin still shared with its host,
//! attempted from inside a real confined plugin that an operator's catalog starts (a manifest
//! and a grants file, today's defaults), through the library's `Supervisor` or `tether call
//! --catalog`. Every test runs for a root host and for a non-root host
//! (`tether_tests::host_user`).
//!
//! A hole that is still open has its test marked `#[ignore = "open hole: issue 22 #N
//! (world)"]`: it fails on the code before the fix (`notes/redteam.md` records how), and the
//! fix removes the mark. The tests without a mark pin down what already holds.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use base64::Engine as _;
use tether_broker::confine::DEFAULT_DISK_MIB;
use tether_broker::error::UseErrorKind;
use tether_broker::{Catalog, DirValueSource, Grants, Lease, Supervisor, Timeouts};
use tether_tests::escape::HOST_ATTACKS;
use tether_tests::host_user::{Host, root_and_unprivileged};
use tether_tests::lease::get as lease_get;
use tether_tests::peers::{self, GoPlugin};
use tether_tests::shared_world::HOSTILE_XATTR;
use tether_tests::world::{PluginSpec, TEST_GRACE, World};
use tether_tests::{bins, gvisor};

const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");

/// Every `[limits]` key of today, set (hole 6 is about a plugin with all of them).
const ALL_LIMITS: &str =
    "[limits]\nmemory_mib = 1024\ncpu_seconds = 60\nopen_files = 256\nprocesses = 64\n";
/// The disk cap the disk test asks for (`[limits] disk_mib`).
const DISK_MIB: u64 = 16;
/// How far below the cap a write may stop (the socket, delivered files and tmpfs metadata
/// share it).
const DISK_SLACK_MIB: u64 = 2;

/// A catalog of copied probe binaries, secrets, a grants file, all in a [`World`].
struct Site {
    world: World,
}

impl Site {
    fn new() -> Self {
        Self {
            world: World::new(),
        }
    }

    /// A plugin named `name` running a copy of `binary` (never a link: some attacks change the
    /// binary's metadata) with `secrets` and `tables`.
    fn plugin(&self, name: &str, binary: &str, secrets: &[&str], tables: &str) {
        self.world.add_plugin(
            &PluginSpec::new(name, binary)
                .copied()
                .secrets(secrets)
                .tables(tables),
        );
    }

    /// The operator's grants file (`catalog/../grants.toml`, where `tether` looks).
    fn grants(&self, text: &str) -> PathBuf {
        let file = self.world.catalog().parent().unwrap().join("grants.toml");
        std::fs::write(&file, text).unwrap();
        file
    }

    /// A supervisor as a host built on the library starts it: the catalog, the grants file,
    /// the secrets directory, today's defaults for everything else; `plaintext` names the
    /// plugins started without AutoMTLS.
    fn supervisor(&self, plaintext: &'static [&'static str]) -> Supervisor {
        let catalog = Catalog::load_dir(&self.world.catalog()).unwrap();
        assert!(catalog.errors().is_empty(), "{:?}", catalog.errors());
        let file = self.world.catalog().parent().unwrap().join("grants.toml");
        let grants = Grants::load(&file).unwrap();
        Supervisor::builder(catalog, self.world.state())
            .grants(grants)
            .secrets(DirValueSource::new(self.world.secrets()))
            .customize(move |b| {
                let plain = plaintext.contains(&b.plugin_name().as_str());
                let b = b.timeouts(
                    Timeouts::default()
                        .shutdown_grace(TEST_GRACE)
                        .terminate_grace(TEST_GRACE),
                );
                if plain { b.plaintext() } else { b }
            })
            .build()
    }

    /// `tether call --catalog catalog PLUGIN proto.KV/Get {"key": KEY}`: the value on
    /// success, else the whole output.
    fn tether_get(&self, plugin: &str, key: &str) -> Result<String, String> {
        let proto = peers::repo_root().join("examples/proto/kv.proto");
        let request = serde_json::json!({ "key": key }).to_string();
        let out = Command::new(bins::TETHER.path())
            .args(["call", "--proto"])
            .arg(proto)
            .args(["--catalog", "catalog", plugin, "proto.KV/Get", &request])
            .current_dir(self.world.catalog().parent().unwrap())
            .output()
            .unwrap();
        value_of(&out)
    }
}

fn value_of(out: &Output) -> Result<String, String> {
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "{}: {text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let json: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    let value = json["value"].as_str().unwrap_or_default();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value)
        .unwrap();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

async fn get(lease: &Lease, key: &str) -> String {
    let value = lease_get(lease, key)
        .await
        .unwrap_or_else(|e| panic!("{key}: {e}"));
    String::from_utf8(value).unwrap()
}

/// The probe plugins an attack is made with where the plugin's runtime may matter: tether's
/// Rust probe and go-plugin v1.8's (`tests/go/probeplugin`), as `(catalog name, binary)`.
/// Call before [`root_and_unprivileged`]: the root run builds the Go peer the unprivileged
/// run then uses. `None` when the Go peer is unavailable and may be skipped.
fn probes(test: &str) -> Option<Vec<(&'static str, String)>> {
    let go = peers::go_or_skip(GoPlugin::V18, test)?;
    Some(vec![
        ("rust-probe", PROBE.to_owned()),
        ("go-probe", go.probe.to_str().unwrap().to_owned()),
    ])
}

/// `plugin`'s delivered secrets directory as a host path: the directory it reports when the
/// host finds `plugin`'s secret `token` (`value`) there too (today
/// `/dev/shm/tether-delivery-…/secrets`); `None` when its delivered files are on no path of
/// the host's, so that there is nothing of it to attack by path.
async fn host_secrets_dir(plugin: &Lease, value: &str) -> Option<PathBuf> {
    let reported = PathBuf::from(get(plugin, "env:TETHER_SECRETS_DIR").await);
    let on_host = std::fs::read(reported.join("token")).ok();
    if on_host.as_deref() == Some(value.as_bytes()) {
        Some(reported)
    } else {
        eprintln!(
            "the delivered secrets ({} inside the plugin) are on no host path",
            reported.display()
        );
        None
    }
}

/// Lines of a probe's answer that say an attempt worked.
fn worked(outcomes: &str) -> Vec<&str> {
    outcomes
        .lines()
        .filter(|l| l.starts_with("ok") || l.contains("=ok"))
        .collect()
}

// Hole 1: a daemon's socket.

/// A daemon's unix socket owned by the host's user — for a root host a root-owned `0660`
/// socket under `/run` (as Docker's and containerd's are), else a `0600` socket in a `0700`
/// directory under `/tmp` (as the user's ssh-agent's is) — that greets whoever connects.
struct Daemon {
    _dir: tempfile::TempDir,
    path: PathBuf,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What the daemon says to each connection.
const GREETING: &str = "daemon: you now control the host";

impl Daemon {
    fn start(host: Host) -> Self {
        let (dir, mode) = if host.is_root() {
            let dir = tempfile::Builder::new()
                .prefix(&format!("tether-test-{}-", std::process::id()))
                .tempdir_in("/run")
                .unwrap();
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            (dir, 0o660)
        } else {
            let dir = tempfile::Builder::new().prefix("ssh-").tempdir().unwrap();
            (dir, 0o600)
        };
        Self::listen(dir, mode)
    }

    /// A daemon listening on `daemon.sock` in `dir`, the socket's mode `mode`.
    fn listen(dir: tempfile::TempDir, mode: u32) -> Self {
        let path = dir.path().join("daemon.sock");
        Self::listen_at(dir, path, mode)
    }

    /// A daemon listening on `path`, the socket's mode `mode`, keeping `dir` while it lives.
    fn listen_at(dir: tempfile::TempDir, path: PathBuf, mode: u32) -> Self {
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, stopped) = (Arc::clone(&accepted), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut stream) = stream else { return };
                count.fetch_add(1, Ordering::SeqCst);
                let _ = std::io::Write::write_all(&mut stream, GREETING.as_bytes());
            }
        });
        Self {
            _dir: dir,
            path,
            accepted,
            stop,
            thread: Some(thread),
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // One more connection wakes the accepting thread, which then sees `stop` and ends,
        // closing the listener.
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::os::unix::net::UnixStream::connect(&self.path);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[test]
fn hole_1_a_plugin_cannot_connect_to_a_daemon_socket_of_its_hosts_user() {
    let test = "hole_1_a_plugin_cannot_connect_to_a_daemon_socket_of_its_hosts_user";
    let Some(probes) = probes(test) else { return };
    let run = root_and_unprivileged(test);
    let host = run.host;
    let daemon = Daemon::start(host);
    // The control: the daemon answers its user.
    let path = daemon.path.to_str().unwrap();
    assert_eq!(
        tether_tests::shared_world::unix_talk(path),
        format!("ok {GREETING}")
    );
    let site = Site::new();
    for (name, binary) in &probes {
        site.plugin(name, binary, &[], "");
    }
    site.grants("");
    let mut talked = Vec::new();
    for (name, _) in &probes {
        let outcome = site.tether_get(name, &format!("unix-talk:{path}")).unwrap();
        eprintln!("{host:?}, {name}: unix-talk {path}: {outcome}");
        if outcome.starts_with("ok") || outcome.starts_with("connected") {
            talked.push(format!("{name}: {outcome}"));
        }
    }
    assert!(
        talked.is_empty(),
        "{host:?}: the plugins talked to the daemon at {path}: {talked:#?}"
    );
    assert_eq!(daemon.accepted(), 1, "the daemon accepted a plugin");
}

// A daemon's socket and a FIFO in a directory granted for reading.

/// A directory under `/run` that an operator grants plugins for reading, holding what a root
/// daemon leaves there: a root-owned `0660` socket (as `/run/docker.sock` is) that greets
/// whoever connects, and a root-owned `0600` FIFO this process holds open for reading. Made by
/// the root test process before its unprivileged run, which attacks the same one (a non-root
/// user cannot make another user's socket).
struct RootDaemonDir {
    dir: PathBuf,
    daemon: Option<Daemon>,
    fifo: PathBuf,
    reader: Option<std::fs::File>,
}

impl RootDaemonDir {
    /// The directory of the root test process with pid `root_pid`.
    fn path(root_pid: u32) -> PathBuf {
        PathBuf::from(format!("/run/tether-test-granted-{root_pid}"))
    }

    /// As root: makes it. In the unprivileged run of a root test process: finds the one its
    /// parent made. Started unprivileged by hand: `None` (there is no other user's daemon).
    fn for_this_run() -> Option<Self> {
        use std::os::unix::fs::OpenOptionsExt as _;
        if Host::current().is_root() {
            let dir = Self::path(std::process::id());
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir(&dir).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            let fifo = dir.join("daemon.fifo");
            let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
            // SAFETY: a NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o600)).unwrap();
            let reader = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo)
                .unwrap();
            let held = tempfile::Builder::new()
                .prefix("held-")
                .tempdir_in(&dir)
                .unwrap();
            // The socket where a daemon's is: directly in the granted directory.
            let daemon = Daemon::listen_at(held, dir.join("daemon.sock"), 0o660);
            return Some(Self {
                dir,
                daemon: Some(daemon),
                fifo,
                reader: Some(reader),
            });
        }
        std::env::var_os(tether_tests::host_user::CHILD_ENV)?;
        let dir = Self::path(std::os::unix::process::parent_id());
        let fifo = dir.join("daemon.fifo");
        dir.exists().then_some(Self {
            dir,
            daemon: None,
            fifo,
            reader: None,
        })
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("daemon.sock")
    }

    /// What plugins wrote into the FIFO so far (root only).
    fn fifo_written(&mut self) -> String {
        let mut text = String::new();
        if let Some(reader) = &mut self.reader {
            let _ = std::io::Read::read_to_string(reader, &mut text);
        }
        text
    }
}

impl Drop for RootDaemonDir {
    fn drop(&mut self) {
        if self.daemon.is_some() {
            drop(self.daemon.take());
            drop(self.reader.take());
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[test]
fn a_plugin_cannot_connect_to_a_socket_nor_write_a_fifo_in_a_directory_it_may_only_read() {
    let test =
        "a_plugin_cannot_connect_to_a_socket_nor_write_a_fifo_in_a_directory_it_may_only_read";
    let Some(probes) = probes(test) else { return };
    // Made before the unprivileged run, which attacks the root daemon's directory too.
    let Some(mut granted) = RootDaemonDir::for_this_run() else {
        eprintln!("{test}: started unprivileged, there is no root daemon to attack: skipped");
        return;
    };
    let run = root_and_unprivileged(test);
    let host = run.host;
    let dir = granted.dir.to_str().unwrap().to_owned();
    let socket = granted.socket().to_str().unwrap().to_owned();
    let fifo = granted.fifo.to_str().unwrap().to_owned();
    let site = Site::new();
    let read = format!("sandbox_allow_read = [\"{dir}\"]");
    let mut grants = String::new();
    for (name, binary) in &probes {
        site.world
            .add_plugin(&PluginSpec::new(name, binary).copied().extra(&read));
        grants.push_str(&format!("[plugins.{name}]\n{read}\n"));
    }
    site.grants(&grants);
    let mut reached = Vec::new();
    for (name, _) in &probes {
        // The grant works: the plugin lists the directory it may read.
        let listed = site.tether_get(name, &format!("list:{dir}")).unwrap();
        assert!(
            listed.lines().any(|l| l == "daemon.sock"),
            "{host:?}, {name}: the granted directory {dir} lists {listed:?}"
        );
        let talk = site
            .tether_get(name, &format!("unix-talk:{socket}"))
            .unwrap();
        eprintln!("{host:?}, {name}: unix-talk {socket}: {talk}");
        if talk.starts_with("ok") || talk.starts_with("connected") {
            reached.push(format!("{name}: socket {talk}"));
        }
        if *name == "rust-probe" {
            let write = site
                .tether_get(name, &format!("fifo-write:{fifo}"))
                .unwrap();
            eprintln!("{host:?}, {name}: fifo-write {fifo}: {write}");
            if write.starts_with("ok") || write.starts_with("opened") || write == "ENXIO" {
                reached.push(format!("{name}: FIFO {write}"));
            }
        }
    }
    assert!(
        reached.is_empty(),
        "{host:?}: the plugins reached the root daemon's socket or FIFO in {dir}, granted only for reading: {reached:#?}"
    );
    if let Some(daemon) = &granted.daemon {
        assert_eq!(daemon.accepted(), 0, "the daemon accepted a plugin");
        assert_eq!(granted.fifo_written(), "", "a plugin wrote into the FIFO");
    }
}

#[test]
fn a_root_hosts_grant_its_plugin_cannot_read_is_refused_before_the_launch_naming_path_and_remedy() {
    let test = "a_root_hosts_grant_its_plugin_cannot_read_is_refused_before_the_launch_naming_path_and_remedy";
    // A non-root host's plugin runs as the host's user: what it may read is the host's.
    if !Host::current().is_root() {
        eprintln!("{test}: a root host's check (its plugin runs as another user)");
        return;
    }
    // `mktemp -d`'s 0700, as most of `/root` is.
    let private = tempfile::tempdir().unwrap();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(private.path().join("notes"), "root's").unwrap();
    let dir = private.path().to_str().unwrap().to_owned();
    let site = Site::new();
    let read = format!("sandbox_allow_read = [\"{dir}\"]");
    site.world
        .add_plugin(&PluginSpec::new("reader", PROBE).copied().extra(&read));
    site.grants(&format!("[plugins.reader]\n{read}\n"));
    let refused = site
        .tether_get("reader", &format!("read:{dir}/notes"))
        .unwrap_err();
    eprintln!("refused: {refused}");
    for part in [
        format!("cannot read {dir} (owner 0:0, mode 0700)"),
        "chmod o+rX".to_owned(),
        "run_as".to_owned(),
    ] {
        assert!(refused.contains(&part), "{part:?} not in: {refused}");
    }
    // Made readable by others, the grant works.
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(
        site.tether_get("reader", &format!("read:{dir}/notes")),
        Ok("root's".to_owned())
    );
}

// Hole 2: file metadata.

/// What an attack on a file's metadata could change.
#[derive(Debug, PartialEq, Eq)]
struct Stat {
    mode: u32,
    uid: u32,
    gid: u32,
    mtime: (i64, i64),
    hostile_xattr: bool,
}

fn stat(path: &Path) -> Stat {
    let m = std::fs::metadata(path).unwrap();
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let name = std::ffi::CString::new(HOSTILE_XATTR).unwrap();
    // SAFETY: getxattr with a NULL buffer of size 0 asks for the value's size only.
    let size = unsafe { libc::getxattr(c.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
    Stat {
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        mtime: (m.mtime(), m.mtime_nsec()),
        hostile_xattr: size >= 0,
    }
}

#[tokio::test]
async fn hole_2_a_plugin_cannot_change_the_metadata_of_files_outside_its_grants() {
    let run = root_and_unprivileged(
        "hole_2_a_plugin_cannot_change_the_metadata_of_files_outside_its_grants",
    );
    let host = run.host;
    let site = Site::new();
    site.world.add_secret("token", "sibling-token-2b7e");
    site.plugin("attacker", PROBE, &[], "");
    site.plugin("sibling", PROBE, &["token"], "");
    site.grants("[plugins.sibling]\nsecrets = [\"token\"]\n");
    let supervisor = site.supervisor(&[]);
    let sibling = supervisor.acquire("sibling").await.unwrap();
    let bin = site.world.catalog().join("bin");
    let mut targets = vec![bin.join("attacker"), bin.join("sibling")];
    if let Some(secrets) = host_secrets_dir(&sibling, "sibling-token-2b7e").await {
        targets.extend([secrets.join("token"), secrets]);
    }
    // The group the plugin tries to give them: its own (the host's). As root, the test first
    // gives them another, so that the change is a change.
    let gid = rustix::process::getegid().as_raw();
    if host.is_root() {
        for target in &targets {
            std::os::unix::fs::chown(target, None, Some(65534)).unwrap();
        }
    }
    let before: Vec<Stat> = targets.iter().map(|t| stat(t)).collect();
    let attacker = supervisor.acquire("attacker").await.unwrap();
    let mut problems = Vec::new();
    for (target, before) in targets.iter().zip(&before) {
        let outcome = get(&attacker, &format!("metadata:{gid}:{}", target.display())).await;
        eprintln!("{host:?}: {}: {outcome}", target.display());
        let after = stat(target);
        if after != *before {
            problems.push(format!(
                "{} changed: {before:?} -> {after:?}",
                target.display()
            ));
        }
        if outcome.contains("=ok") {
            problems.push(format!("{}: {outcome}", target.display()));
        }
    }
    drop((attacker, sibling));
    supervisor.shutdown().await;
    assert!(problems.is_empty(), "{host:?}: {problems:#?}");
}

#[tokio::test]
async fn a_plugin_cannot_rewrite_a_catalog_binary_or_another_plugins_secret() {
    // What already holds beside hole 2: the files' contents (Landlock's write rights).
    let run =
        root_and_unprivileged("a_plugin_cannot_rewrite_a_catalog_binary_or_another_plugins_secret");
    let host = run.host;
    let site = Site::new();
    site.world.add_secret("token", "sibling-token-5d1c");
    site.plugin("attacker", PROBE, &[], "");
    site.plugin("sibling", PROBE, &["token"], "");
    site.grants("[plugins.sibling]\nsecrets = [\"token\"]\n");
    let supervisor = site.supervisor(&[]);
    let sibling = supervisor.acquire("sibling").await.unwrap();
    let secrets = host_secrets_dir(&sibling, "sibling-token-5d1c").await;
    let attacker = supervisor.acquire("attacker").await.unwrap();
    let mut targets = vec![site.world.catalog().join("bin/sibling")];
    targets.extend(secrets.iter().map(|dir| dir.join("token")));
    for target in targets {
        let before = std::fs::read(&target).unwrap();
        let written =
            tether_tests::lease::put(&attacker, &format!("write:{}", target.display()), b"owned")
                .await;
        assert!(
            written.is_err(),
            "{host:?}: {} was rewritten",
            target.display()
        );
        assert_eq!(std::fs::read(&target).unwrap(), before);
    }
    assert_eq!(get(&sibling, "secret:token").await, "sibling-token-5d1c");
    drop((attacker, sibling));
    supervisor.shutdown().await;
}

// Hole 3: a sibling plugin's socket.

const SIBLING_SECRET: &str = "sibling-secret-9c41";

/// The attacker (a Rust probe from the catalog) and a sibling (go-plugin v1.8's probe, granted
/// `token`), the sibling in plaintext when `plaintext`; returns what the attacker found and
/// stole, and the sibling's private directory when it is not the attacker's (inside their
/// worlds both may be `/tmp`).
async fn attack_the_sibling(
    host: Host,
    go: &Path,
    plaintext: bool,
) -> (String, String, Option<String>) {
    let site = Site::new();
    site.world.add_secret("token", SIBLING_SECRET);
    site.plugin("attacker", PROBE, &[], "");
    site.plugin("sibling", go.to_str().unwrap(), &["token"], "");
    site.grants("[plugins.sibling]\nsecrets = [\"token\"]\n");
    let supervisor = site.supervisor(if plaintext { &["sibling"] } else { &[] });
    let sibling = supervisor.acquire("sibling").await.unwrap();
    // The control: the sibling serves its secret to its host.
    assert_eq!(get(&sibling, "secret:token").await, SIBLING_SECRET);
    let private = get(&sibling, "env:PLUGIN_UNIX_SOCKET_DIR").await;
    let attacker = supervisor.acquire("attacker").await.unwrap();
    let own = get(&attacker, "env:PLUGIN_UNIX_SOCKET_DIR").await;
    let private = (private != own).then_some(private);
    let sockets = get(&attacker, "sockets:").await;
    let stolen = get(&attacker, "steal:secret:token").await;
    eprintln!("{host:?}, plaintext {plaintext}: sockets:\n{sockets}\nsteal:\n{stolen}");
    drop((attacker, sibling));
    supervisor.shutdown().await;
    (sockets, stolen, private)
}

#[tokio::test]
async fn hole_3_a_plugin_cannot_find_a_sibling_plugins_socket_nor_call_it() {
    let test = "hole_3_a_plugin_cannot_find_a_sibling_plugins_socket_nor_call_it";
    // Built by the root run, before the unprivileged one needs them.
    let Some(go) = peers::go_or_skip(GoPlugin::V18, test) else {
        return;
    };
    let run = root_and_unprivileged(test);
    let host = run.host;
    let (sockets, stolen, private) = attack_the_sibling(host, &go.probe, true).await;
    assert!(
        !stolen.contains(SIBLING_SECRET),
        "{host:?}: the plugin read its sibling's secret:\n{stolen}"
    );
    if let Some(private) = private {
        assert!(
            !sockets.lines().any(|s| s.starts_with(&private)),
            "{host:?}: the plugin found its sibling's socket in {private}:\n{sockets}"
        );
    }
}

#[tokio::test]
async fn a_sibling_plugin_with_mutual_tls_answers_no_call_of_another_plugin() {
    // What already holds beside hole 3: a plugin that can reach its sibling's socket still
    // cannot call it without the host's client certificate.
    let test = "a_sibling_plugin_with_mutual_tls_answers_no_call_of_another_plugin";
    let Some(go) = peers::go_or_skip(GoPlugin::V18, test) else {
        return;
    };
    let run = root_and_unprivileged(test);
    let host = run.host;
    let (_, stolen, _) = attack_the_sibling(host, &go.probe, false).await;
    assert!(
        !stolen.contains(SIBLING_SECRET) && worked(&stolen).is_empty(),
        "{host:?}: a call to the sibling worked:\n{stolen}"
    );
}

/// How an attack on another process may end: refused by Landlock's scopes or the system-call
/// filter (`EPERM`, `EACCES`), or no such process in the plugin's world (`ESRCH`).
const REFUSED: &[&str] = &["EPERM", "EACCES", "ESRCH"];

#[tokio::test]
async fn a_plugin_cannot_signal_trace_or_read_a_sibling_plugin() {
    // What already holds beside hole 3 and the process table: a plugin that knows its
    // sibling's pid (today's process table lists it) can neither signal, trace, renice, limit
    // nor read it, nor reach its files through /proc/PID/root: Landlock scopes signals and
    // ptrace to the plugin's own domain, the system-call filter refuses the rest for any pid
    // but the caller's.
    let run = root_and_unprivileged("a_plugin_cannot_signal_trace_or_read_a_sibling_plugin");
    let host = run.host;
    let site = Site::new();
    site.world.add_secret("token", SIBLING_SECRET);
    site.plugin("attacker", PROBE, &[], "");
    site.plugin("sibling", PROBE, &["token"], "");
    site.grants("[plugins.sibling]\nsecrets = [\"token\"]\n");
    let supervisor = site.supervisor(&[]);
    let sibling = supervisor.acquire("sibling").await.unwrap();
    let attacker = supervisor.acquire("attacker").await.unwrap();
    let pid = sibling.pid();
    let secrets = get(&sibling, "env:TETHER_SECRETS_DIR").await;
    let mut outcomes = Vec::new();
    for attack in HOST_ATTACKS.iter().chain(&["sigkill"]) {
        let key = format!("attack-pid:{pid}:{attack}");
        outcomes.push((key.clone(), get(&attacker, &key).await));
    }
    for key in [
        format!("read:/proc/{pid}/environ"),
        format!("read:/proc/{pid}/mem"),
        // Listing its fd directory works today (the process table test covers that it is
        // listed at all); opening what a descriptor names does not.
        format!("read:/proc/{pid}/fd/0"),
        format!("list:/proc/{pid}/cwd"),
        format!("list:/proc/{pid}/root"),
        format!("read:/proc/{pid}/root{secrets}/token"),
    ] {
        let outcome = match lease_get(&attacker, &key).await {
            Ok(value) => format!("ok {}", String::from_utf8_lossy(&value)),
            Err(e) => match e.kind() {
                UseErrorKind::Call { status } => match status.code() {
                    tonic::Code::PermissionDenied => "EACCES".to_owned(),
                    tonic::Code::NotFound => "ESRCH".to_owned(),
                    _ => format!("allowed, then {}", status.message()),
                },
                _ => panic!("{key}: {e}"),
            },
        };
        outcomes.push((key, outcome));
    }
    eprintln!("{host:?}: {outcomes:#?}");
    // The sibling lives on, the same process, and still serves its host.
    let after = lease_get(&sibling, "secret:token").await;
    assert!(
        matches!(&after, Ok(v) if v == SIBLING_SECRET.as_bytes()) && sibling.pid() == pid,
        "{host:?}: the sibling did not survive the attacks ({after:?}): {outcomes:#?}"
    );
    drop((attacker, sibling));
    supervisor.shutdown().await;
    // An attack of several steps names the step that failed (`pidfd_open: ESRCH`).
    let allowed: Vec<_> = outcomes
        .iter()
        .filter(|(_, outcome)| {
            let errno = outcome.rsplit(": ").next().unwrap_or_default();
            !REFUSED.contains(&errno)
        })
        .collect();
    assert!(
        allowed.is_empty(),
        "{host:?}: attacks on the sibling that were not refused: {allowed:#?}"
    );
}

// Hole 4: SysV IPC.

/// A shared memory segment, a message queue and a semaphore set of the host's, mode `0600`,
/// each holding a secret or a value; removed when dropped.
struct HostIpc {
    key: i32,
    shm: i32,
    msg: i32,
    sem: i32,
}

const SHM_SECRET: &str = "host-shm-secret-41f0";
const MSG_SECRET: &str = "host-msg-secret-77a2";
const SEM_VALUE: i32 = 7;

impl HostIpc {
    fn create() -> Self {
        // One key for all three (separate namespaces per kind), unique to this process.
        let key = 0x7e70_0000 | (std::process::id() as i32 & 0xffff);
        // SAFETY (whole block): SysV IPC calls with valid pointers to locals; the segment is
        // detached after the write, which stays within its size.
        unsafe {
            let flags = libc::IPC_CREAT | libc::IPC_EXCL | 0o600;
            let shm = libc::shmget(key, 4096, flags);
            assert!(shm >= 0, "shmget: {}", std::io::Error::last_os_error());
            let at = libc::shmat(shm, std::ptr::null(), 0);
            assert_ne!(at as isize, -1);
            std::ptr::copy_nonoverlapping(SHM_SECRET.as_ptr(), at.cast(), SHM_SECRET.len());
            libc::shmdt(at);
            let msg = libc::msgget(key, flags);
            assert!(msg >= 0, "msgget: {}", std::io::Error::last_os_error());
            let mut message = [0_u8; std::mem::size_of::<libc::c_long>() + 32];
            message[..std::mem::size_of::<libc::c_long>()].copy_from_slice(&1_i64.to_ne_bytes());
            message[std::mem::size_of::<libc::c_long>()..][..MSG_SECRET.len()]
                .copy_from_slice(MSG_SECRET.as_bytes());
            assert_eq!(
                libc::msgsnd(
                    msg,
                    message.as_ptr().cast(),
                    MSG_SECRET.len(),
                    libc::IPC_NOWAIT
                ),
                0
            );
            let sem = libc::semget(key, 1, flags);
            assert!(sem >= 0, "semget: {}", std::io::Error::last_os_error());
            assert_eq!(libc::semctl(sem, 0, libc::SETVAL, SEM_VALUE), 0);
            Self { key, shm, msg, sem }
        }
    }

    /// The segment's text, the number of queued messages and the semaphore's value.
    fn state(&self) -> (String, u64, i32) {
        // SAFETY: as in `create`; the segment is read within its size.
        unsafe {
            let at = libc::shmat(self.shm, std::ptr::null(), libc::SHM_RDONLY);
            let bytes = std::slice::from_raw_parts(at.cast::<u8>(), 64);
            let end = bytes.iter().position(|b| *b == 0).unwrap_or(64);
            let text = String::from_utf8_lossy(&bytes[..end]).into_owned();
            libc::shmdt(at);
            let mut ds: libc::msqid_ds = std::mem::zeroed();
            libc::msgctl(self.msg, libc::IPC_STAT, &mut ds);
            (text, ds.msg_qnum, libc::semctl(self.sem, 0, libc::GETVAL))
        }
    }
}

impl Drop for HostIpc {
    fn drop(&mut self) {
        // SAFETY: removes the objects this value made.
        unsafe {
            libc::shmctl(self.shm, libc::IPC_RMID, std::ptr::null_mut());
            libc::msgctl(self.msg, libc::IPC_RMID, std::ptr::null_mut());
            libc::semctl(self.sem, 0, libc::IPC_RMID);
        }
    }
}

#[tokio::test]
async fn hole_4_a_plugin_cannot_see_read_or_change_the_hosts_sysv_ipc() {
    let run = root_and_unprivileged("hole_4_a_plugin_cannot_see_read_or_change_the_hosts_sysv_ipc");
    let host = run.host;
    let ipc = HostIpc::create();
    let before = ipc.state();
    assert_eq!(before, (SHM_SECRET.to_owned(), 1, SEM_VALUE));
    let site = Site::new();
    site.plugin("attacker", PROBE, &[], "");
    site.grants("");
    let supervisor = site.supervisor(&[]);
    let attacker = supervisor.acquire("attacker").await.unwrap();
    let listed = get(&attacker, "sysv-list:").await;
    let key = ipc.key;
    let mut outcomes = Vec::new();
    for attack in [
        format!("sysv:shm-read:{key}:"),
        format!("sysv:shm-write:{key}:owned"),
        format!("sysv:msg-receive:{key}:"),
        format!("sysv:sem-set:{key}:99"),
    ] {
        let outcome = get(&attacker, &attack).await;
        outcomes.push(format!("{attack} -> {outcome}"));
    }
    drop(attacker);
    supervisor.shutdown().await;
    eprintln!("{host:?}: listed:\n{listed}\n{outcomes:#?}");
    let after = ipc.state();
    assert_eq!(
        after, before,
        "{host:?}: the host's IPC objects changed: {outcomes:#?}"
    );
    assert!(
        !listed
            .split_whitespace()
            .any(|field| field == key.to_string()),
        "{host:?}: the plugin listed the host's IPC objects (key {key}):\n{listed}"
    );
    let worked: Vec<&String> = outcomes.iter().filter(|o| o.contains("-> ok")).collect();
    assert!(worked.is_empty(), "{host:?}: {worked:#?}");
}

#[tokio::test]
async fn a_plugin_cannot_open_the_hosts_posix_shared_memory() {
    // What already holds beside hole 4: POSIX shared memory is a file under /dev/shm, which
    // the file-system rules cover (and which a world of its own does not hold: there the
    // write makes a file in the plugin's own /dev/shm, and the host's stays as it was).
    let run = root_and_unprivileged("a_plugin_cannot_open_the_hosts_posix_shared_memory");
    let host = run.host;
    let shm = tempfile::Builder::new()
        .prefix("tether-test-shm-")
        .tempfile_in("/dev/shm")
        .unwrap();
    std::fs::write(shm.path(), SHM_SECRET).unwrap();
    let site = Site::new();
    site.plugin("attacker", PROBE, &[], "");
    site.grants("");
    let supervisor = site.supervisor(&[]);
    let attacker = supervisor.acquire("attacker").await.unwrap();
    let read = lease_get(&attacker, &format!("read:{}", shm.path().display())).await;
    let written = tether_tests::lease::put(
        &attacker,
        &format!("write:{}", shm.path().display()),
        b"owned",
    )
    .await;
    drop(attacker);
    supervisor.shutdown().await;
    assert!(
        read.is_err(),
        "{host:?}: the plugin read {}",
        shm.path().display()
    );
    assert_eq!(
        std::fs::read_to_string(shm.path()).unwrap(),
        SHM_SECRET,
        "{host:?}: the plugin changed the host's {} (write: {written:?})",
        shm.path().display()
    );
}

// Hole 5: inotify on the host's directories.

#[tokio::test]
async fn hole_5_a_plugin_cannot_watch_the_host_read_secrets_nor_make_other_launches_dirs() {
    let run = root_and_unprivileged(
        "hole_5_a_plugin_cannot_watch_the_host_read_secrets_nor_make_other_launches_dirs",
    );
    let host = run.host;
    let site = Site::new();
    site.world.add_secret("token", "sibling-token-e4a9");
    site.plugin("attacker", PROBE, &[], "");
    site.plugin("sibling", PROBE, &["token"], "");
    site.grants("[plugins.sibling]\nsecrets = [\"token\"]\n");
    let supervisor = site.supervisor(&[]);
    let attacker = supervisor.acquire("attacker").await.unwrap();
    let secrets = site.world.secrets();
    let mut watches = Vec::new();
    for dir in [secrets.to_str().unwrap(), "/tmp", "/dev/shm"] {
        watches.push(format!(
            "{dir}: {}",
            get(&attacker, &format!("inotify-watch:{dir}")).await
        ));
    }
    // The host reads the sibling's secret from the source and makes its private and delivery
    // directories; inotify queues each event as it happens, before `acquire` returns.
    let sibling = supervisor.acquire("sibling").await.unwrap();
    let events = get(&attacker, "inotify-events:").await;
    drop((attacker, sibling));
    supervisor.shutdown().await;
    eprintln!("{host:?}: watches {watches:?}\nevents:\n{events}");
    // Any launch's private directory (`tether-XXXXXX`) or delivery directory
    // (`tether-delivery-XXXXXX`) on the host is another's: the attacker's own were made before
    // it started watching.
    let seen: Vec<&str> = events
        .lines()
        .filter(|e| {
            let path = e.rsplit_once(' ').map_or(*e, |(path, _)| path);
            let name = path.rsplit('/').next().unwrap_or("");
            path.starts_with(secrets.to_str().unwrap()) || name.starts_with("tether-")
        })
        .collect();
    assert!(
        seen.is_empty(),
        "{host:?}: the plugin saw the host read a secret or make another launch's directories: {seen:#?}"
    );
}

// Hole 6: the disk.

/// The locations a plugin may write without a grant.
const FILL_TARGETS: &[&str] = &["$TMPDIR/fill", "/tmp/fill", "/dev/shm/fill"];

/// Fills each of [`FILL_TARGETS`] through `tether call` of a probe with `tables`; returns
/// `(target, outcome, bytes)`.
fn fill_all(site: &Site, plugin: &str) -> Vec<(String, String, u64)> {
    FILL_TARGETS
        .iter()
        .map(|target| {
            let outcome = site
                .tether_get(plugin, &format!("fill:{target}"))
                .unwrap_or_else(|e| panic!("fill:{target}: {e}"));
            let (errno, bytes) = outcome.split_once(' ').unwrap();
            eprintln!("{plugin}: fill {target}: {outcome}");
            (
                (*target).to_owned(),
                errno.to_owned(),
                bytes.parse().unwrap(),
            )
        })
        .collect()
}

#[track_caller]
fn assert_capped(filled: &[(String, String, u64)], cap_mib: u64) {
    let cap = cap_mib << 20;
    let wrong: Vec<String> = filled
        .iter()
        .filter(|(_, errno, bytes)| {
            errno != "ENOSPC" || *bytes > cap || *bytes + (DISK_SLACK_MIB << 20) < cap
        })
        .map(|(target, errno, bytes)| format!("{target}: {errno} after {bytes} bytes"))
        .collect();
    assert!(
        wrong.is_empty(),
        "writes not stopped with ENOSPC at the {cap_mib} MiB cap: {wrong:#?}"
    );
}

#[test]
fn hole_6_a_plugin_with_every_limit_set_cannot_fill_the_disk_past_its_disk_cap() {
    let test = "hole_6_a_plugin_with_every_limit_set_cannot_fill_the_disk_past_its_disk_cap";
    let Some(probes) = probes(test) else { return };
    let run = root_and_unprivileged(test);
    let host = run.host;
    let site = Site::new();
    let tables = format!("{ALL_LIMITS}disk_mib = {DISK_MIB}\n");
    for (name, binary) in &probes {
        site.plugin(name, binary, &[], &tables);
    }
    site.grants("");
    for (name, _) in &probes {
        let filled = fill_all(&site, name);
        eprintln!("{host:?}: {filled:?}");
        assert_capped(&filled, DISK_MIB);
    }
}

#[test]
fn hole_6_without_disk_mib_a_plugin_is_stopped_by_the_default_disk_cap() {
    let test = "hole_6_without_disk_mib_a_plugin_is_stopped_by_the_default_disk_cap";
    let Some(probes) = probes(test) else { return };
    let run = root_and_unprivileged(test);
    let host = run.host;
    let site = Site::new();
    for (name, binary) in &probes {
        site.plugin(name, binary, &[], ALL_LIMITS);
    }
    site.grants("");
    for (name, _) in &probes {
        let filled = fill_all(&site, name);
        eprintln!("{host:?}: {filled:?}");
        assert_capped(&filled, DEFAULT_DISK_MIB);
    }
}

#[test]
fn hole_6_under_the_gvisor_runner_a_plugin_cannot_fill_the_disk_past_its_disk_cap() {
    let test = "hole_6_under_the_gvisor_runner_a_plugin_cannot_fill_the_disk_past_its_disk_cap";
    // The gVisor runner is for a root host only (runsc runs as root): no unprivileged run.
    if !Host::current().is_root() {
        eprintln!("{test}: not for a non-root host (the gVisor runner needs root)");
        return;
    }
    if gvisor::runsc_or_skip(test).is_none() {
        return;
    }
    let site = Site::new();
    for (name, disk) in [
        ("default", String::new()),
        ("capped", format!("disk_mib = {DISK_MIB}\n")),
    ] {
        site.world.add_plugin(
            &PluginSpec::new(name, PROBE)
                .copied()
                .extra("runner = \"gvisor\"")
                .tables(&format!("{ALL_LIMITS}{disk}")),
        );
    }
    site.grants("");
    assert_capped(&fill_all(&site, "default"), DEFAULT_DISK_MIB);
    assert_capped(&fill_all(&site, "capped"), DISK_MIB);
}

// The gVisor runner's host unix sockets (issue 22, "What to build" 8).

#[test]
fn under_the_gvisor_runner_a_plugin_connects_to_no_host_socket_outside_its_socket_directory() {
    let test =
        "under_the_gvisor_runner_a_plugin_connects_to_no_host_socket_outside_its_socket_directory";
    // The gVisor runner is for a root host only (runsc runs as root): no unprivileged run.
    if !Host::current().is_root() {
        eprintln!("{test}: not for a non-root host (the gVisor runner needs root)");
        return;
    }
    if gvisor::runsc_or_skip(test).is_none() {
        return;
    }
    // A daemon's socket in a directory the operator granted for reading (runsc mounts it
    // into the sandbox), and one under /run as in hole 1.
    let granted = tempfile::Builder::new()
        .prefix("tether-test-granted-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(granted.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = granted.path().to_str().unwrap().to_owned();
    let in_grant = Daemon::listen(granted, 0o660);
    let under_run = Daemon::start(Host::Root);
    let site = Site::new();
    let read = format!("sandbox_allow_read = [\"{dir}\"]");
    site.world.add_plugin(
        &PluginSpec::new("reader", PROBE)
            .copied()
            .extra(&format!("runner = \"gvisor\"\n{read}")),
    );
    site.grants(&format!("[plugins.reader]\n{read}\n"));
    // The grant works: the plugin lists the directory it may read, the socket included.
    let listed = site.tether_get("reader", &format!("list:{dir}")).unwrap();
    assert!(
        listed.lines().any(|l| l == "daemon.sock"),
        "gVisor: the granted directory {dir} lists {listed:?}"
    );
    let mut talked = Vec::new();
    for daemon in [&in_grant, &under_run] {
        let path = daemon.path.to_str().unwrap();
        let outcome = site
            .tether_get("reader", &format!("unix-talk:{path}"))
            .unwrap();
        eprintln!("gVisor: unix-talk {path}: {outcome}");
        if outcome.starts_with("ok") {
            talked.push(format!("{path}: {outcome}"));
        }
    }
    assert!(
        talked.is_empty(),
        "gVisor: the plugin talked to host daemons: {talked:#?}"
    );
    assert_eq!(
        (in_grant.accepted(), under_run.accepted()),
        (0, 0),
        "a daemon accepted the plugin"
    );
}

// The process table: every command line, the host's included.

/// A process of the host's user that is none of the plugin's business, with a secret on its
/// command line (as operators pass passwords); ends when dropped.
struct Bystander {
    child: std::process::Child,
    marker: String,
}

impl Bystander {
    fn start() -> Self {
        let marker = format!("--password=bystander-{}", std::process::id());
        // `read` waits on the pipe until it is closed: no sleep, and it ends with the test.
        let child = Command::new("/bin/sh")
            .args(["-c", "read line", &marker])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        Self { child, marker }
    }
}

impl Drop for Bystander {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_plugin_sees_only_its_own_processes_and_no_other_command_line() {
    let test = "a_plugin_sees_only_its_own_processes_and_no_other_command_line";
    let Some(probes) = probes(test) else { return };
    let run = root_and_unprivileged(test);
    let host = run.host;
    let bystander = Bystander::start();
    let host_cmdline = std::fs::read("/proc/self/cmdline").unwrap();
    let host_cmdline = String::from_utf8_lossy(&host_cmdline)
        .replace('\0', " ")
        .trim()
        .to_owned();
    let site = Site::new();
    for (name, binary) in &probes {
        site.plugin(name, binary, &[], "");
    }
    site.grants("");
    let supervisor = site.supervisor(&[]);
    let mut problems = Vec::new();
    for (name, _) in &probes {
        let attacker = supervisor.acquire(name).await.unwrap();
        let seen = get(&attacker, "ps:").await;
        drop(attacker);
        problems.extend(
            process_table_problems(&seen, &bystander.marker, &host_cmdline)
                .into_iter()
                .map(|p| format!("{name}: {p}")),
        );
    }
    supervisor.shutdown().await;
    assert!(problems.is_empty(), "{host:?}: {problems:#?}");
}

/// What is wrong with the process table `seen` (a probe's `ps:`, its own row first): a
/// command line holding `marker` (another process's), the host's command line, or a process
/// outside the plugin's own tree (itself, its children, an init of its own as pid 1).
fn process_table_problems(seen: &str, marker: &str, host_cmdline: &str) -> Vec<String> {
    let rows: Vec<(u32, String, String)> = seen
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ' ');
            Some((
                f.next()?.parse().ok()?,
                f.next()?.to_owned(),
                f.next().unwrap_or("").to_owned(),
            ))
        })
        .collect();
    // Programs only, never their arguments: other processes' command lines are not this
    // test's to print.
    let program = |row: &(u32, String, String)| {
        format!(
            "{} {} {}",
            row.0,
            row.1,
            row.2.split(' ').next().unwrap_or("")
        )
    };
    eprintln!(
        "the plugin sees {} processes: {:?}",
        rows.len(),
        rows.iter().map(program).collect::<Vec<_>>()
    );
    let mut problems = Vec::new();
    if seen.contains(marker) {
        problems.push(format!("it read another process's command line ({marker})"));
    }
    if rows.iter().any(|(_, _, cmdline)| cmdline == host_cmdline) {
        problems.push("it read its host's command line".to_owned());
    }
    let own = rows.first().map_or(0, |row| row.0);
    let foreign: Vec<String> = rows
        .iter()
        .filter(|(pid, ppid, _)| *pid != own && *pid != 1 && *ppid != own.to_string())
        .map(program)
        .collect();
    if !foreign.is_empty() {
        problems.push(format!(
            "it sees {} processes outside its own tree, among them {:?}",
            foreign.len(),
            &foreign[..foreign.len().min(12)]
        ));
    }
    problems
}
