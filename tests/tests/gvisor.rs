//! The gVisor runner with real plugins and a real `runsc`: tether's Rust plugins, go-plugin
//! v1.8 plugins and the Python SDK's plugin store and read values and call back into the host
//! in both broker modes; a sandboxed plugin cannot read the host's files outside its mounts,
//! cannot reach a TCP listener on the host's loopback and sees only its own secrets; a crash
//! mid-call, a hang before the handshake and the host's `SIGKILL` leave no container, bundle,
//! socket or secret behind.
//!
//! Without `runsc` (or not as root) the tests print why and pass as skipped, unless
//! `TETHER_REQUIRE_PEERS=1` (CI sets it): then they fail.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use secrecy::SecretSlice;
use tether_broker::error::{Phase, StartErrorKind};
use tether_broker::launch::ReattachedOutcome;
use tether_broker::launch::{GvisorOptions, Runner};
use tether_broker::{
    Delivery, Grants, HandshakeConfig, PluginClient, PluginClientBuilder, ReattachConfig,
    ReattachedPlugin, error::UseErrorKind,
};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};
use tether_tests::bins;
use tether_tests::example_host::ExampleHost;
use tether_tests::gvisor::{self, containers};
use tether_tests::lease::{eventually, get as lease_get, kill_and_see_the_crash, put as lease_put};
use tether_tests::loosening;
use tether_tests::peers::{self, GoPlugin};
use tether_tests::procs;
use tether_tests::python;
use tether_tests::world::{PluginSpec, World};

const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");
const HANG: &str = env!("CARGO_BIN_EXE_hang-before-handshake");

/// How long a test waits for a process to exit.
const EXIT_DEADLINE: Duration = Duration::from_secs(10);

/// Set in the child host of the host-`SIGKILL` test: its private-directory base.
const CHILD_HOST_ENV: &str = "TETHER_TEST_GVISOR_CHILD_HOST";

macro_rules! require_runsc {
    ($test:expr) => {
        if gvisor::runsc_or_skip($test).is_none() {
            return;
        }
    };
}

/// A private-directory base of the test's own: private dirs, bundles, delivered files and runsc's
/// state root all go there, so "nothing left" is checked on it alone.
struct Runtime {
    dir: tempfile::TempDir,
}

impl Runtime {
    fn new() -> Self {
        Self {
            dir: tempfile::Builder::new()
                .prefix("tg-")
                .tempdir_in("/tmp")
                .unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn state_root(&self) -> PathBuf {
        // SAFETY: geteuid has no preconditions.
        self.path()
            .join(format!("tether-runsc-{}", unsafe { libc::geteuid() }))
    }

    /// A probe plugin under gVisor, with everything it makes in this private-directory base.
    fn probe(&self, program: &str) -> PluginClientBuilder<HandshakeConfig> {
        PluginClient::builder(program)
            .runner(Runner::Gvisor(GvisorOptions::new().runsc(gvisor::RUNSC)))
            .private_dir_base(self.path())
            .delivery_dir(self.path())
            .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
    }

    /// No container in the state root and nothing but the state root in the directory.
    #[track_caller]
    fn assert_nothing_left(&self) {
        assert_eq!(
            containers(&self.state_root()),
            Vec::<String>::new(),
            "containers left"
        );
        let left: Vec<String> = std::fs::read_dir(self.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| !name.starts_with("tether-runsc-"))
            .collect();
        assert_eq!(
            left,
            Vec::<String>::new(),
            "bundles, sockets or secrets left"
        );
        let root: Vec<_> = std::fs::read_dir(self.state_root())
            .map(|d| d.count())
            .into_iter()
            .collect();
        assert!(
            root.iter().all(|&n| n == 0),
            "state files left in the state root"
        );
    }
}

async fn get(plugin: &PluginClient, key: &str) -> Result<Vec<u8>, tonic::Status> {
    KvClient::new(plugin.channel())
        .get(GetRequest { key: key.into() })
        .await
        .map(|r| r.into_inner().value)
}

fn secret(value: &str) -> SecretSlice<u8> {
    SecretSlice::from(value.as_bytes().to_vec())
}

// --- put/get and callbacks ------------------------------------------------------------------

#[test]
fn a_rust_kv_plugin_stores_and_reads_values_under_gvisor() {
    require_runsc!("a_rust_kv_plugin_stores_and_reads_values_under_gvisor");
    ExampleHost::kv(bins::KV_HOST.path(), bins::KV_PLUGIN.path())
        .options(["--gvisor"])
        .kv_round_trip();
}

#[test]
fn a_go_plugin_v1_8_kv_plugin_stores_and_reads_values_under_gvisor() {
    require_runsc!("a_go_plugin_v1_8_kv_plugin_stores_and_reads_values_under_gvisor");
    let Some(go) = peers::go_or_skip(GoPlugin::V18, "go v1.8 kv under gvisor") else {
        return;
    };
    ExampleHost::kv(bins::KV_HOST.path(), &go.plugin)
        .options(["--gvisor"])
        .kv_round_trip();
}

#[test]
fn a_python_kv_plugin_runs_under_gvisor_with_its_interpreter_mounted_read_only() {
    require_runsc!("a_python_kv_plugin_runs_under_gvisor_with_its_interpreter_mounted_read_only");
    let Some(py) = python::python_or_skip("python kv under gvisor") else {
        return;
    };
    let mut options = vec!["--gvisor".to_owned()];
    options.extend(py.kv_host_sandbox_args());
    ExampleHost::kv(bins::KV_HOST.path(), py.kv_plugin_command())
        .options(options)
        .kv_round_trip();
}

macro_rules! counter_tests {
    ($($name:ident: $plugin:expr, $multiplex:expr;)*) => {$(
        #[test]
        fn $name() {
            require_runsc!(stringify!($name));
            let Some(plugin) = $plugin else { return };
            let mut options = vec!["--gvisor"];
            if $multiplex {
                options.push("--multiplex");
            }
            ExampleHost::counter(bins::COUNTER_HOST.path(), plugin)
                .options(options)
                .counter_round_trip();
        }
    )*};
}

fn go_counter() -> Option<PathBuf> {
    peers::go_or_skip(GoPlugin::V18, "go v1.8 counter under gvisor").map(|go| go.counter_plugin)
}

counter_tests! {
    a_rust_plugin_under_gvisor_calls_back_through_sockets_in_its_directory:
        Some(PathBuf::from(bins::COUNTER_PLUGIN.path())), false;
    a_rust_plugin_under_gvisor_calls_back_through_the_one_multiplexed_socket:
        Some(PathBuf::from(bins::COUNTER_PLUGIN.path())), true;
    a_go_plugin_v1_8_under_gvisor_calls_back_through_sockets_in_its_directory:
        go_counter(), false;
    a_go_plugin_v1_8_under_gvisor_calls_back_through_the_one_multiplexed_socket:
        go_counter(), true;
}

// --- what a sandboxed plugin cannot reach ---------------------------------------------------

#[tokio::test]
async fn a_plugin_in_gvisor_cannot_read_a_host_file_outside_its_mounts() {
    require_runsc!("a_plugin_in_gvisor_cannot_read_a_host_file_outside_its_mounts");
    let runtime = Runtime::new();
    let host_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(host_file.path(), "host-only").unwrap();
    let plugin = runtime.probe(PROBE).start().await.unwrap();
    for path in [
        host_file.path().to_str().unwrap(),
        "/etc/passwd",
        "/etc/shadow",
    ] {
        let status = get(&plugin, &format!("read:{path}")).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::NotFound, "{path}: {status:?}");
    }
    // Its own binary's directory holds only its binary (no sibling is visible).
    let dir = Path::new(PROBE).parent().unwrap().to_str().unwrap();
    let listed = String::from_utf8(get(&plugin, &format!("list:{dir}")).await.unwrap()).unwrap();
    assert_eq!(listed, "probe-plugin");
    plugin.shutdown().await.unwrap();
    runtime.assert_nothing_left();
}

#[tokio::test]
async fn a_plugin_in_gvisor_cannot_reach_a_tcp_listener_on_the_hosts_loopback() {
    require_runsc!("a_plugin_in_gvisor_cannot_reach_a_tcp_listener_on_the_hosts_loopback");
    let runtime = Runtime::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // The same probe as a confined child process reaches it: the listener is real.
    let process = PluginClient::builder(PROBE)
        .network(tether_broker::confine::NetworkMode::Host)
        .private_dir_base(runtime.path())
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .start()
        .await
        .unwrap();
    assert_eq!(
        get(&process, &format!("connect:{addr}")).await.unwrap(),
        b"connected"
    );
    process.shutdown().await.unwrap();

    let plugin = runtime.probe(PROBE).start().await.unwrap();
    let status = get(&plugin, &format!("connect:{addr}")).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    plugin.shutdown().await.unwrap();
    runtime.assert_nothing_left();
}

#[tokio::test]
async fn a_plugin_in_gvisor_sees_only_its_own_secrets() {
    require_runsc!("a_plugin_in_gvisor_sees_only_its_own_secrets");
    let runtime = Runtime::new();
    let a = runtime
        .probe(PROBE)
        .name("a")
        .deliver(Delivery::new().secret("token", secret("a-token")))
        .start()
        .await
        .unwrap();
    let b = runtime
        .probe(PROBE)
        .name("b")
        .deliver(Delivery::new().secret("other", secret("b-secret")))
        .start()
        .await
        .unwrap();
    assert_eq!(get(&a, "secret:token").await.unwrap(), b"a-token");
    let dir = String::from_utf8(get(&a, "env:TETHER_SECRETS_DIR").await.unwrap()).unwrap();
    assert_eq!(
        dir,
        format!("{}/secrets", tether_broker::launch::DELIVERED_DIR)
    );
    assert_eq!(get(&a, &format!("list:{dir}")).await.unwrap(), b"token");
    assert!(get(&a, "secret:other").await.is_err());
    // b's delivered directory on the host does not exist in a's sandbox.
    for entry in std::fs::read_dir(runtime.path()).unwrap() {
        let path = entry.unwrap().path();
        let status = get(&a, &format!("list:{}", path.display()))
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::NotFound, "{}", path.display());
    }
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    runtime.assert_nothing_left();
}

// --- faults leave nothing behind ------------------------------------------------------------

#[tokio::test]
async fn a_plugin_crashing_mid_call_under_gvisor_leaves_no_container_bundle_socket_or_secret() {
    require_runsc!(
        "a_plugin_crashing_mid_call_under_gvisor_leaves_no_container_bundle_socket_or_secret"
    );
    let runtime = Runtime::new();
    let plugin = runtime
        .probe(PROBE)
        .deliver(Delivery::new().secret("token", secret("t")))
        .start()
        .await
        .unwrap();
    let crash = KvClient::new(plugin.channel())
        .put(PutRequest {
            key: "crash:".into(),
            value: Vec::new(),
        })
        .await;
    assert!(crash.is_err());
    let status = tokio::time::timeout(EXIT_DEADLINE, plugin.exited())
        .await
        .unwrap();
    assert_eq!(
        status.code(),
        Some(3),
        "runsc run exits with the plugin's status"
    );
    plugin.shutdown().await.unwrap();
    runtime.assert_nothing_left();
}

#[tokio::test]
async fn a_plugin_hanging_before_its_handshake_under_gvisor_times_out_and_leaves_nothing() {
    require_runsc!(
        "a_plugin_hanging_before_its_handshake_under_gvisor_times_out_and_leaves_nothing"
    );
    let runtime = Runtime::new();
    let err = runtime
        .probe(HANG)
        // Its `sleep` grandchild comes from the host's /usr, mounted read-only.
        .sandbox_allow_read("/usr")
        .start_timeout(Duration::from_secs(3))
        .deliver(Delivery::new().secret("token", secret("t")))
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind(), StartErrorKind::Timeout { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("warming up"),
        "its stderr is quoted: {err}"
    );
    runtime.assert_nothing_left();
}

#[tokio::test]
async fn a_missing_runsc_is_a_clear_error_saying_how_to_install_it() {
    let runtime = Runtime::new();
    let err = PluginClient::builder(PROBE)
        .runner(Runner::Gvisor(
            GvisorOptions::new().runsc("/nonexistent/runsc"),
        ))
        .private_dir_base(runtime.path())
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err.kind(),
            StartErrorKind::RunnerMissing {
                runner: "gvisor",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.phase(), Phase::Prepare);
    assert!(err.to_string().contains("apt-get install runsc"), "{err}");
    runtime.assert_nothing_left();
}

#[tokio::test]
async fn runscs_own_failure_is_reported_as_the_runners_not_as_a_plugin_exit() {
    require_runsc!("runscs_own_failure_is_reported_as_the_runners_not_as_a_plugin_exit");
    let runtime = Runtime::new();
    // An operator root file system without the binary's loader: runsc cannot start it.
    let rootfs = tempfile::tempdir().unwrap();
    let err = PluginClient::builder(PROBE)
        .runner(Runner::Gvisor(
            GvisorOptions::new()
                .runsc(gvisor::RUNSC)
                .rootfs(rootfs.path()),
        ))
        .private_dir_base(runtime.path())
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err.kind(),
            StartErrorKind::Runner {
                runner: "gvisor",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("runsc failed: "), "{err}");
    runtime.assert_nothing_left();
}

/// The child host of the test below: starts a gVisor plugin (with a memory limit, so that its
/// sandbox has a cgroup), prints `ready`, waits to be killed.
async fn child_host(runtime: &Path) -> ! {
    let plugin = PluginClient::builder(PROBE)
        .runner(Runner::Gvisor(
            GvisorOptions::new().runsc(gvisor::RUNSC).memory_mib(256),
        ))
        .private_dir_base(runtime)
        .delivery_dir(runtime)
        .deliver(Delivery::new().secret("token", secret("t")))
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .start()
        .await
        .unwrap();
    println!("ready {}", plugin.pid());
    std::mem::forget(plugin);
    tether_tests::misbehave::park_forever();
}

#[tokio::test]
async fn a_host_killed_by_sigkill_leaves_no_container_bundle_socket_secret_or_cgroup_of_its_gvisor_plugin()
 {
    const TEST: &str = "a_host_killed_by_sigkill_leaves_no_container_bundle_socket_secret_or_cgroup_of_its_gvisor_plugin";
    if let Some(dir) = std::env::var_os(CHILD_HOST_ENV) {
        child_host(Path::new(&dir)).await;
    }
    require_runsc!(TEST);
    let runtime = Runtime::new();
    let mut host = Command::new(std::env::current_exe().unwrap())
        .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_HOST_ENV, runtime.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(host.stdout.take().unwrap());
    // The test harness prints `test NAME ... ` before the child's `ready PID` on that line.
    let mut line = String::new();
    let runsc_pid: u32 = loop {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the child host ended early"
        );
        if let Some((_, pid)) = line.split_once("ready ") {
            break pid.trim().parse().unwrap();
        }
    };

    assert_eq!(
        containers(&runtime.state_root()).len(),
        1,
        "the plugin's container runs"
    );
    assert_eq!(
        container_cgroups(host.id()).len(),
        1,
        "its sandbox's cgroup"
    );
    let janitor = janitor_of(host.id()).expect("the child host has a janitor");
    let (runsc_exit, janitor_exit) = (procs::pidfd(runsc_pid), procs::pidfd(janitor));
    host.kill().unwrap();
    host.wait().unwrap();
    procs::exited(runsc_exit, EXIT_DEADLINE).await;
    // The janitor exits once it has cleaned up.
    procs::exited(janitor_exit, EXIT_DEADLINE).await;
    runtime.assert_nothing_left();
    assert_eq!(
        container_cgroups(host.id()),
        Vec::<PathBuf>::new(),
        "the sandbox's cgroup is left"
    );
}

/// The janitor (`sh -c … tether-janitor …`) started by process `parent`.
fn janitor_of(parent: u32) -> Option<u32> {
    let parent = parent.to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1));
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            ppid == Some(parent.as_str())
                && cmdline
                    .split(|&b| b == 0)
                    .any(|arg| arg == b"tether-janitor")
        })
}

// --- the supervisor, reattach, run_as and limits under gVisor -------------------------------

/// No container in `run`'s state root and nothing in `run` or `delivery` but the state root.
#[track_caller]
fn assert_world_clean(world: &World) {
    // SAFETY: geteuid has no preconditions.
    let root = format!("tether-runsc-{}", unsafe { libc::geteuid() });
    assert_eq!(
        containers(&world.run().join(&root)),
        Vec::<String>::new(),
        "containers left"
    );
    let left: Vec<String> = World::leftovers(&world.run())
        .into_iter()
        .filter(|n| *n != root)
        .collect();
    assert_eq!(left, Vec::<String>::new(), "bundles or sockets left");
    assert_eq!(
        World::leftovers(&world.delivery()),
        Vec::<String>::new(),
        "secrets left"
    );
}

#[tokio::test]
async fn a_gvisor_plugin_that_crashes_fails_the_call_and_the_supervisor_restarts_it() {
    require_runsc!("a_gvisor_plugin_that_crashes_fails_the_call_and_the_supervisor_restarts_it");
    let world = World::new();
    world.add_secret("a", "alpha");
    world.add_plugin(
        &PluginSpec::new("a", PROBE)
            .secrets(&["a"])
            .extra("runner = \"gvisor\"\n")
            .tables("[restart]\ninitial_backoff = \"10ms\""),
    );
    let supervisor = world.supervisor(Grants::new().secret("a", "a")).build();

    let lease = supervisor.acquire("a").await.unwrap();
    assert_eq!(lease_get(&lease, "secret:a").await.unwrap(), b"alpha");
    let err = lease_put(&lease, "crash:", b"").await.unwrap_err();
    let UseErrorKind::Crashed {
        status,
        stderr_tail,
        ..
    } = err.kind()
    else {
        panic!("expected Crashed, got {err}");
    };
    assert_eq!(
        status.code(),
        Some(3),
        "runsc run exits with the plugin's status"
    );
    assert!(stderr_tail.contains("crashing on purpose"), "{err}");
    drop(lease);
    eventually(
        "the crashed plugin's container and files are gone",
        EXIT_DEADLINE,
        || World::leftovers(&world.delivery()).is_empty(),
    )
    .await;
    assert_world_clean(&world);

    // Restarted on the next use, in a new sandbox; killed from outside (SIGKILL to `runsc
    // run`, which takes its sandbox with it), the next call says so.
    let lease = supervisor.acquire("a").await.unwrap();
    assert_eq!(lease_get(&lease, "secret:a").await.unwrap(), b"alpha");
    assert_eq!(supervisor.starts("a"), 2);
    kill_and_see_the_crash(&lease).await;
    drop(lease);
    let lease = supervisor.acquire("a").await.unwrap();
    assert_eq!(lease_get(&lease, "secret:a").await.unwrap(), b"alpha");
    assert_eq!(supervisor.starts("a"), 3);
    drop(lease);
    supervisor.shutdown().await;
    assert_world_clean(&world);
}

#[tokio::test]
async fn an_idle_gvisor_plugin_stops_leaving_no_container_and_starts_again_on_the_next_use() {
    require_runsc!(
        "an_idle_gvisor_plugin_stops_leaving_no_container_and_starts_again_on_the_next_use"
    );
    let world = World::new();
    world.add_secret("a", "alpha");
    world.add_plugin(
        &PluginSpec::new("a", PROBE)
            .secrets(&["a"])
            .extra("runner = \"gvisor\"\nidle_timeout = \"300ms\"\n"),
    );
    let supervisor = world.supervisor(Grants::new().secret("a", "a")).build();

    let lease = supervisor.acquire("a").await.unwrap();
    let first = lease.pid();
    assert_eq!(lease_get(&lease, "secret:a").await.unwrap(), b"alpha");
    let exited = procs::pidfd(first);
    drop(lease);
    procs::exited(exited, EXIT_DEADLINE).await;
    eventually(
        "the idle plugin's secrets are removed",
        EXIT_DEADLINE,
        || World::leftovers(&world.delivery()).is_empty(),
    )
    .await;
    assert_eq!(supervisor.pid("a").await, None);
    assert_world_clean(&world);

    let lease = supervisor.acquire("a").await.unwrap();
    assert_ne!(lease.pid(), first);
    assert_eq!(lease_get(&lease, "secret:a").await.unwrap(), b"alpha");
    assert_eq!(supervisor.starts("a"), 2);
    drop(lease);
    supervisor.shutdown().await;
    assert_world_clean(&world);
}

#[tokio::test]
async fn a_gvisor_plugin_is_reattached_through_its_host_side_socket_and_never_signalled() {
    require_runsc!(
        "a_gvisor_plugin_is_reattached_through_its_host_side_socket_and_never_signalled"
    );
    let runtime = Runtime::new();
    // Reattach configs carry no certificates: the plugin is started in plaintext.
    let plugin = runtime.probe(PROBE).plaintext().start().await.unwrap();
    let tether_broker::launch::Address::Unix(socket) = plugin.address().clone() else {
        panic!(
            "a gVisor plugin listens on a unix socket: {}",
            plugin.address()
        );
    };
    assert!(
        socket.starts_with(runtime.path()),
        "the address is the host's view of the socket: {}",
        socket.display()
    );
    let config = ReattachConfig::new(
        1,
        "unix",
        socket.to_str().unwrap(),
        i32::try_from(plugin.pid()).unwrap(),
    );
    let reattached = ReattachedPlugin::connect(config, None).await.unwrap();
    // The pid is `runsc run`'s; the listening socket is held inside the sandbox, so the pid
    // is not verified and the reattached side never signals it.
    assert!(!reattached.pid_verified());
    let pid = String::from_utf8(
        KvClient::new(reattached.channel())
            .get(GetRequest { key: "pid:".into() })
            .await
            .unwrap()
            .into_inner()
            .value,
    )
    .unwrap();
    assert_eq!(pid, "1", "the plugin is the sandbox's first process");
    let exited = plugin.exited();
    assert_eq!(reattached.shutdown().await, ReattachedOutcome::NotVerified);
    // The shutdown request reached the plugin, and `runsc run` exited with it.
    let status = tokio::time::timeout(EXIT_DEADLINE, exited).await.unwrap();
    assert!(status.success(), "{status}");
    plugin.shutdown().await.unwrap();
    runtime.assert_nothing_left();
}

#[tokio::test]
async fn a_gvisor_plugin_runs_as_the_user_it_was_given_and_still_reads_its_secret() {
    require_runsc!("a_gvisor_plugin_runs_as_the_user_it_was_given_and_still_reads_its_secret");
    let runtime = Runtime::new();
    let plugin = runtime
        .probe(PROBE)
        .run_as(65534, 65534)
        .deliver(Delivery::new().secret("token", secret("t-65534")))
        .start()
        .await
        .unwrap();
    assert_eq!(plugin.run_as(), Some((65534, 65534)));
    assert_eq!(get(&plugin, "ids:").await.unwrap(), b"65534 65534");
    assert_eq!(get(&plugin, "secret:token").await.unwrap(), b"t-65534");
    plugin.shutdown().await.unwrap();
    runtime.assert_nothing_left();
}

/// Has the plugin (as gVisor's root, or as `run_as`) try to leave a set-uid or set-gid file, a
/// device node, a file of another owner and a file capability in its working directory, then
/// returns what the host holds there after the plugin has ended, and what the plugin reported.
async fn loosening_left_by(run_as: Option<(u32, u32)>) -> (Vec<String>, String) {
    use std::os::unix::fs::MetadataExt as _;
    let runtime = Runtime::new();
    let state = tempfile::Builder::new()
        .prefix("tg-state-")
        .tempdir_in("/tmp")
        .unwrap();
    let mut builder = runtime.probe(PROBE).current_dir(state.path());
    if let Some((uid, gid)) = run_as {
        std::os::unix::fs::chown(state.path(), Some(uid), Some(gid)).unwrap();
        builder = builder.run_as(uid, gid);
    }
    let plugin = builder.start().await.unwrap();
    let tried = String::from_utf8(get(&plugin, "loosen:.").await.unwrap()).unwrap();
    plugin.shutdown().await.unwrap();
    runtime.assert_nothing_left();
    let meta = std::fs::metadata(state.path()).unwrap();
    assert!(
        state.path().join("chmod-suid").exists(),
        "the plugin wrote nothing in its working directory: {tried}"
    );
    let left = loosening::left_on_the_host(state.path(), (meta.uid(), meta.gid()));
    (left, tried)
}

#[tokio::test]
async fn a_gvisor_plugin_leaves_no_set_uid_file_device_node_or_capability_in_its_working_directory()
{
    require_runsc!(
        "a_gvisor_plugin_leaves_no_set_uid_file_device_node_or_capability_in_its_working_directory"
    );
    for run_as in [None, Some((65534, 65534))] {
        let (left, tried) = loosening_left_by(run_as).await;
        assert_eq!(
            left,
            Vec::<String>::new(),
            "as {run_as:?}, the plugin's attempts: {tried}"
        );
        for refused in [
            "chmod-suid",
            "chmod-sgid",
            "fchmod-suid",
            "create-suid",
            "mknod-char",
        ] {
            assert!(
                tried.contains(&format!("{refused}=E")),
                "as {run_as:?}: {refused} was not refused: {tried}"
            );
        }
    }
}

/// Memory cgroup directories (v1 `memory` hierarchy or v2) of the containers of the host with
/// process id `host` (container ids end in `-<host pid>`).
fn container_cgroups(host: u32) -> Vec<PathBuf> {
    let suffix = format!("-{host}");
    ["/sys/fs/cgroup/memory", "/sys/fs/cgroup"]
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                n.to_string_lossy().starts_with("tether-") && n.to_string_lossy().ends_with(&suffix)
            })
        })
        .collect()
}

#[tokio::test]
async fn a_gvisor_plugin_gets_its_memory_and_cpu_limits_and_is_stopped_past_its_memory() {
    require_runsc!("a_gvisor_plugin_gets_its_memory_and_cpu_limits_and_is_stopped_past_its_memory");
    let _counting = CGROUP_COUNTERS.lock().await;
    let runtime = Runtime::new();
    let plugin = PluginClient::builder(PROBE)
        .runner(Runner::Gvisor(
            GvisorOptions::new()
                .runsc(gvisor::RUNSC)
                .memory_mib(128)
                .cpu_millis(500),
        ))
        .private_dir_base(runtime.path())
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .start()
        .await
        .unwrap();
    let groups = container_cgroups(std::process::id());
    assert_eq!(groups.len(), 1, "the sandbox has a memory cgroup");
    assert_sandbox_limits(&groups[0], 128, "50000");
    // Below the limit, memory is there.
    KvClient::new(plugin.channel())
        .put(PutRequest {
            key: "balloon:".into(),
            value: b"16".to_vec(),
        })
        .await
        .unwrap();
    let exited = plugin.exited();
    // Past it, the kernel's OOM killer ends the sandbox mid-call: the connection drops.
    let status = KvClient::new(plugin.channel())
        .put(PutRequest {
            key: "balloon:".into(),
            value: b"512".to_vec(),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            status.code(),
            tonic::Code::Unknown | tonic::Code::Unavailable
        ),
        "{status:?}"
    );
    let exit = tokio::time::timeout(EXIT_DEADLINE, exited).await.unwrap();
    assert!(!exit.success(), "the sandbox was stopped: {exit}");
    eprintln!("runsc run exited with {exit} after the OOM kill");
    plugin.shutdown().await.unwrap();
    runtime.assert_nothing_left();
    assert_eq!(
        container_cgroups(std::process::id()),
        Vec::<PathBuf>::new(),
        "cgroups left"
    );
}

/// Held by the tests that count this process's sandbox cgroups (they would see each other's).
static CGROUP_COUNTERS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The limits are in force on the sandbox's groups (v1 hierarchies here; v2 files
/// otherwise): memory in MiB, the CFS quota in µs per 100 ms.
#[track_caller]
fn assert_sandbox_limits(group: &Path, memory_mib: u64, cpu_quota: &str) {
    let read = |controller: &str, v1: &str, v2: &str| {
        let name = group.file_name().unwrap();
        std::fs::read_to_string(
            Path::new("/sys/fs/cgroup")
                .join(controller)
                .join(name)
                .join(v1),
        )
        .or_else(|_| std::fs::read_to_string(group.join(v2)))
        .unwrap()
    };
    assert_eq!(
        read("memory", "memory.limit_in_bytes", "memory.max").trim(),
        (memory_mib << 20).to_string()
    );
    let quota = read("cpu", "cpu.cfs_quota_us", "cpu.max");
    assert!(
        quota.trim() == cpu_quota || quota.starts_with(&format!("{cpu_quota} 100000")),
        "{quota}"
    );
}

#[tokio::test]
async fn a_manifests_gvisor_table_limits_the_sandbox_and_a_plugin_past_its_memory_is_restarted() {
    require_runsc!(
        "a_manifests_gvisor_table_limits_the_sandbox_and_a_plugin_past_its_memory_is_restarted"
    );
    let _counting = CGROUP_COUNTERS.lock().await;
    let world = World::new();
    world.add_plugin(
        &PluginSpec::new("a", PROBE)
            .extra("runner = \"gvisor\"\n")
            .tables("[gvisor]\nmemory_mib = 96\ncpu_millis = 250\n\n[restart]\ninitial_backoff = \"10ms\""),
    );
    let supervisor = world.supervisor(Grants::new()).build();
    let lease = supervisor.acquire("a").await.unwrap();
    let groups = container_cgroups(std::process::id());
    assert_eq!(groups.len(), 1, "the sandbox has a memory cgroup");
    assert_sandbox_limits(&groups[0], 96, "25000");
    let balloon = |mib: &'static str| {
        lease.call(move |ch| async move {
            KvClient::new(ch)
                .put(PutRequest {
                    key: "balloon:".into(),
                    value: mib.as_bytes().to_vec(),
                })
                .await
        })
    };
    balloon("8").await.unwrap();
    let err = balloon("256").await.unwrap_err();
    assert!(matches!(err.kind(), UseErrorKind::Crashed { .. }), "{err}");
    drop(lease);
    // The next use starts it again, with the same limits.
    let lease = supervisor.acquire("a").await.unwrap();
    assert_eq!(supervisor.starts("a"), 2);
    let groups = container_cgroups(std::process::id());
    assert_eq!(
        groups.len(),
        1,
        "one sandbox, one memory cgroup: {groups:?}"
    );
    assert_sandbox_limits(&groups[0], 96, "25000");
    drop(lease);
    supervisor.shutdown().await;
    assert_world_clean(&world);
    assert_eq!(
        container_cgroups(std::process::id()),
        Vec::<PathBuf>::new(),
        "cgroups left"
    );
}

// --- one-shot runs (the container-per-step model of the benchmark) --------------------------

/// Runs `sh -c SCRIPT` to its exit under `runner` in `state`.
async fn run_step(
    runtime: &Runtime,
    runner: Runner,
    state: &Path,
    script: &str,
) -> std::process::ExitStatus {
    PluginClient::builder("/bin/sh")
        .args(["-c", script])
        .runner(runner)
        .private_dir_base(runtime.path())
        .current_dir(state)
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
        .run_to_exit()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_one_shot_program_runs_to_its_exit_under_either_runner_and_leaves_only_its_output() {
    require_runsc!(
        "a_one_shot_program_runs_to_its_exit_under_either_runner_and_leaves_only_its_output"
    );
    let runtime = Runtime::new();
    let state = tempfile::tempdir().unwrap();
    let gvisor = Runner::Gvisor(GvisorOptions::new().runsc(gvisor::RUNSC));
    for (runner, file) in [(gvisor, "out-gvisor"), (Runner::Process, "out-process")] {
        let script = format!("echo step > {file}; exit 7");
        let status = run_step(&runtime, runner, state.path(), &script).await;
        assert_eq!(status.code(), Some(7), "{file}: {status}");
        assert_eq!(
            std::fs::read_to_string(state.path().join(file)).unwrap(),
            "step\n"
        );
    }
    runtime.assert_nothing_left();
}
