//! The confined child process, attacked from inside: a real probe plugin tries to push
//! keystrokes into the operator's terminal (issue 11, hole 2), to change, trace or read its host
//! (hole 3), and to make system calls that reach beyond its own process tree (item 7).
//!
//! Attacks on the host run in a child test process that is the host, so that a successful
//! attack (the host killed by `prlimit`) fails that test only, with the child's exit status.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use tether_broker::confine::{Confinement, NamespacesMode, SeccompMode};
use tether_broker::{HandshakeConfig, PluginClient, PluginClientBuilder, SandboxMode};
use tether_examples::kv::GetRequest;
use tether_examples::kv::kv_client::KvClient;
use tether_tests::escape::{HOST_ATTACKS, SYSCALLS};

const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");
const TTY_HOST: &str = env!("CARGO_BIN_EXE_tty-host");
/// How long the terminal test's host may take, start to end.
const TTY_HOST_TIMEOUT: Duration = Duration::from_secs(60);
/// Set in the child test process that plays the host.
const CHILD_HOST_VAR: &str = "TETHER_ESCAPES_CHILD_HOST";

/// Runs `test` in a child test process (the host the plugin attacks); returns `true` in that
/// child, where the caller then runs the test body.
fn in_child_host(test: &str) -> bool {
    if std::env::var_os(CHILD_HOST_VAR).is_some() {
        return true;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_HOST_VAR, "1")
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{test}: the host ended with {} (an attack that worked can kill it):\n{text}",
        out.status
    );
    assert!(text.contains("1 passed"), "{test} did not run:\n{text}");
    false
}

fn probe(dir: &std::path::Path) -> PluginClientBuilder<HandshakeConfig> {
    PluginClient::builder(PROBE)
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .current_dir(dir)
}

async fn get(plugin: &PluginClient, key: &str) -> String {
    let value = KvClient::new(plugin.channel())
        .get(GetRequest { key: key.into() })
        .await
        .unwrap_or_else(|status| panic!("{key}: {status:?}"))
        .into_inner()
        .value;
    String::from_utf8(value).unwrap()
}

/// Every attack of [`HOST_ATTACKS`], in order, with its outcome; printed as it goes, so that a
/// host killed by the last one still shows the others. The plugin is told the host's real pid
/// (a plugin in a world of its own sees its parent as 0 and could not name the host at all).
async fn attack_host(plugin: &PluginClient) -> BTreeMap<&'static str, String> {
    let host = std::process::id();
    let mut outcomes = BTreeMap::new();
    for attack in HOST_ATTACKS {
        let outcome = get(plugin, &format!("attack-pid:{host}:{attack}")).await;
        eprintln!("attack {attack}: {outcome}");
        outcomes.insert(*attack, outcome);
    }
    outcomes
}

/// The host's own scheduling state, to compare before and after the attacks.
fn host_state() -> ((u64, u64), i32, Vec<usize>) {
    // SAFETY: getrlimit/getpriority/sched_getaffinity on the calling process with valid
    // pointers to locals.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        assert_eq!(libc::getrlimit(libc::RLIMIT_AS, &mut limit), 0);
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, 0);
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        let cpus = (0..libc::CPU_SETSIZE as usize)
            .filter(|cpu| libc::CPU_ISSET(*cpu, &set))
            .collect();
        ((limit.rlim_cur, limit.rlim_max), nice, cpus)
    }
}

/// EPERM, or in a world of its own, where the host's pid names no process, ESRCH.
fn refused(outcome: &str) -> bool {
    outcome == "EPERM" || outcome == "ESRCH" || outcome.ends_with(": ESRCH")
}

#[track_caller]
fn assert_all_refused(outcomes: &BTreeMap<&'static str, String>, skip: &[&str]) {
    let allowed: Vec<String> = outcomes
        .iter()
        .filter(|(attack, outcome)| !skip.contains(attack) && !refused(outcome))
        .map(|(attack, outcome)| format!("{attack}: {outcome}"))
        .collect();
    assert!(
        allowed.is_empty(),
        "attacks on the host that were not refused with EPERM: {allowed:?}"
    );
}

#[tokio::test]
async fn a_confined_plugin_cannot_change_trace_or_read_its_host() {
    if !in_child_host("a_confined_plugin_cannot_change_trace_or_read_its_host") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let before = host_state();
    let plugin = probe(dir.path()).start().await.unwrap();
    let outcomes = attack_host(&plugin).await;
    assert_eq!(
        host_state(),
        before,
        "the host's limits or scheduling changed"
    );
    assert_all_refused(&outcomes, &[]);
    plugin.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_system_call_filter_alone_keeps_a_plugin_off_its_host() {
    // Without Landlock (sandbox off), only seccomp stands between the plugin and its host for
    // all but signals (which Landlock scopes, or another uid refuses: see `run_as`).
    if !in_child_host("the_system_call_filter_alone_keeps_a_plugin_off_its_host") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let before = host_state();
    let plugin = probe(dir.path())
        .sandbox(SandboxMode::Off)
        .seccomp(SeccompMode::Default)
        .start()
        .await
        .unwrap();
    let outcomes = attack_host(&plugin).await;
    assert_eq!(
        host_state(),
        before,
        "the host's limits or scheduling changed"
    );
    assert_all_refused(&outcomes, &["kill0"]);
    plugin.shutdown().await.unwrap();
}

/// What each of [`SYSCALLS`] gives a plugin of this test's host with `seccomp`, sandbox off (as
/// root, the plugin then keeps its capabilities: nothing but the filter refuses these calls).
async fn syscall_outcomes(seccomp: SeccompMode) -> BTreeMap<&'static str, String> {
    let dir = tempfile::tempdir().unwrap();
    // As root, the plugin keeps root's capabilities only outside a world and with root
    // explicitly allowed (a root host's plugins otherwise run as an unprivileged id).
    let plugin = probe(dir.path())
        .confinement(
            Confinement::default()
                .sandbox(SandboxMode::Off)
                .seccomp(seccomp)
                .namespaces(NamespacesMode::Off)
                .allow_root(true),
        )
        .start()
        .await
        .unwrap();
    let mut outcomes = BTreeMap::new();
    for call in SYSCALLS {
        outcomes.insert(*call, get(&plugin, &format!("syscall:{call}")).await);
    }
    plugin.shutdown().await.unwrap();
    outcomes
}

#[tokio::test]
async fn the_default_system_call_filter_refuses_what_reaches_beyond_the_plugin() {
    let root = rustix::process::geteuid().is_root();
    let filtered = syscall_outcomes(SeccompMode::Default).await;
    let unfiltered = syscall_outcomes(SeccompMode::Off).await;
    let expected = |call: &str| match call {
        // Refused as absent, so that libc and runtimes fall back (clone3 → clone, io_uring →
        // epoll).
        "clone3" | "io_uring_setup" => "ENOSYS",
        // The calls a plugin needs on itself stay allowed.
        "unshare-files" | "personality-query" | "prlimit-zero" | "setpriority-zero" => "ok",
        _ => "EPERM",
    };
    let mut wrong = Vec::new();
    for call in SYSCALLS {
        let (with, without) = (&filtered[call], &unfiltered[call]);
        if with != expected(call) {
            wrong.push(format!("{call}: {with} (expected {})", expected(call)));
        }
        // The control: without the filter the same call is not refused that way, so the
        // filter is what refused it. A non-root host's kernel refuses some of them itself (no
        // capabilities; or its network filter): the plugin is refused either way.
        let kernel_refuses = !root && without == "EPERM";
        if expected(call) != "ok" && with == without && !kernel_refuses {
            wrong.push(format!("{call}: {without} without the filter too"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{wrong:#?}\nwith: {filtered:#?}\nwithout: {unfiltered:#?}"
    );
}

/// A pseudo-terminal: (master, slave).
/// Runs `tty-host` as the leader of a session whose controlling terminal is a new
/// pseudo-terminal, and returns everything the terminal showed (its output, echoed input
/// included).
fn run_on_a_terminal(marker: &str, mode: Option<&str>) -> String {
    let mut command = Command::new(TTY_HOST);
    command.args([PROBE, marker]).args(mode);
    let (status, seen) = tether_tests::terminal::run_on_a_terminal(command, TTY_HOST_TIMEOUT);
    let seen = String::from_utf8_lossy(&seen).into_owned();
    assert!(status.success(), "tty-host ended with {status}:\n{seen}");
    seen
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_plugin_cannot_push_keystrokes_into_the_operators_terminal() {
    let marker = "tether-injected-7f3a";
    for mode in [None, Some("sandbox-off")] {
        let seen = run_on_a_terminal(marker, mode);
        let line = |prefix: &str| {
            seen.lines()
                // Echoed input (`control^J`) may precede a line on the screen.
                .find_map(|l| {
                    l.trim_end_matches('\r')
                        .split_once(prefix)
                        .map(|(_, rest)| rest)
                })
                .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{seen}"))
                .to_owned()
        };
        // The positive control reached the terminal's input: injection works here.
        let input = line("tty-input-hex: ");
        assert!(
            input.starts_with(&hex(b"control\n")),
            "{mode:?}: the control did not arrive: {input}\n{seen}"
        );
        // The plugin's did not, neither as input nor echoed on the screen.
        assert_eq!(
            input,
            hex(b"control\n"),
            "{mode:?}: the plugin pushed input into the terminal:\n{seen}"
        );
        assert!(
            !seen.contains(marker),
            "{mode:?}: the plugin's keystrokes reached the terminal:\n{seen}"
        );
        let result = line("plugin-result: ");
        assert!(
            result.contains("open /dev/tty: ") || result.contains("TIOCSTI"),
            "{mode:?}: the plugin reported {result:?}\n{seen}"
        );
        eprintln!("{mode:?}: {result}");
    }
}

/// `nobody`: the uid and gid the `run_as` tests give their plugins.
const NOBODY: (u32, u32) = (65534, 65534);

/// Whether this test runs as root (only root can start a plugin as another user).
fn root_or_skip(test: &str) -> bool {
    let root = rustix::process::geteuid().is_root();
    if !root {
        eprintln!("{test}: skipped, run_as needs a root host");
    }
    root
}

#[tokio::test]
async fn a_plugin_run_as_another_user_cannot_signal_limit_or_trace_its_host() {
    // Sandbox and filter off: the other uid alone refuses every attack, signals included.
    let test = "a_plugin_run_as_another_user_cannot_signal_limit_or_trace_its_host";
    if !root_or_skip(test) || !in_child_host(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let before = host_state();
    let plugin = probe(dir.path())
        .sandbox(SandboxMode::Off)
        .seccomp(SeccompMode::Off)
        .run_as(NOBODY.0, NOBODY.1)
        .start()
        .await
        .unwrap();
    assert_eq!(plugin.run_as(), Some(NOBODY));
    assert_eq!(get(&plugin, "ids:").await, "65534 65534");
    let outcomes = attack_host(&plugin).await;
    assert_eq!(
        host_state(),
        before,
        "the host's limits or scheduling changed"
    );
    assert_all_refused(&outcomes, &[]);
    plugin.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_plugin_run_as_another_user_reads_its_granted_secret_and_writes_its_state() {
    use std::os::unix::fs::PermissionsExt as _;
    use tether_broker::{Catalog, DirValueSource, Grants, Supervisor};
    use tether_tests::world::{PluginSpec, World};

    let test = "a_plugin_run_as_another_user_reads_its_granted_secret_and_writes_its_state";
    if !root_or_skip(test) {
        return;
    }
    let world = World::new();
    // The binary's link in the catalog must be reachable by nobody (the operator's part).
    let root = world.catalog().parent().unwrap().to_owned();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o711)).unwrap();
    world.add_secret("token", "run-as-secret-51c2");
    world.add_plugin(&PluginSpec::new("a", PROBE).secrets(&["token"]));
    let catalog = Catalog::load_dir(&world.catalog()).unwrap();
    assert!(catalog.errors().is_empty(), "{:?}", catalog.errors());
    let supervisor = Supervisor::builder(catalog, world.state())
        .grants(Grants::new().secret("a", "token"))
        .secrets(DirValueSource::new(world.secrets()))
        .customize(|b| b.run_as(NOBODY.0, NOBODY.1))
        .build();
    let a = supervisor.acquire("a").await.unwrap();
    let kv = || KvClient::new(a.channel());
    let get = |key: &str| {
        let mut kv = kv();
        let key = key.to_owned();
        async move {
            kv.get(GetRequest { key })
                .await
                .map(|r| String::from_utf8(r.into_inner().value).unwrap())
        }
    };
    assert_eq!(get("ids:").await.unwrap(), "65534 65534");
    assert_eq!(get("secret:token").await.unwrap(), "run-as-secret-51c2");
    let own = world.state().join("a/own");
    kv().put(tether_examples::kv::PutRequest {
        key: format!("write:{}", own.display()),
        value: b"x".to_vec(),
    })
    .await
    .unwrap();
    assert_eq!(std::fs::read(&own).unwrap(), b"x");
    // The host's source of the secret stays out of reach.
    let source = get(&format!("read:{}", world.secrets().join("token").display()))
        .await
        .unwrap_err();
    // Landlock's refusal, or in a world the path is not there.
    assert!(
        matches!(
            source.code(),
            tonic::Code::PermissionDenied | tonic::Code::NotFound
        ),
        "{source:?}"
    );
    drop(a);
    supervisor.shutdown().await;
}
