//! What the example plugins of every SDK in another language (Python, TypeScript) must do under
//! a tether host, checked the same way for each: the example hosts' round trips under tether's
//! and go-plugin's hosts ([`sdk_interop_tests!`](crate::sdk_interop_tests!)), go-plugin's KV contract through the library
//! over pinned AutoMTLS in both broker modes, a graceful `Shutdown` that leaves nothing running,
//! and an exit of their own when their host dies.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tether_broker::callbacks::BrokerMode;
use tether_broker::launch::Address;
use tether_broker::{HandshakeConfig, PluginClient, PluginClientBuilder, ShutdownOutcome};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};

use crate::example_host::{Contract, ExampleHost};
use crate::peers::{self, GoPlugin};
use crate::{bins, procs};

/// How long a plugin may take to exit after its host died (a pidfd watch takes milliseconds).
pub const HOST_DEATH_EXIT_DEADLINE: Duration = Duration::from_secs(10);

/// The example plugins of an SDK, as the example hosts launch them.
pub trait SdkPeer {
    /// The example plugin that speaks `contract`, as a command line for an example host
    /// (`KV_PLUGIN` / `COUNTER_PLUGIN`); with `tmpdir`, started through `env` with `TMPDIR` set
    /// to it.
    fn plugin_command(&self, contract: Contract, tmpdir: Option<&Path>) -> String;

    /// The options tether's example hosts need to run the plugin confined (sandbox allowances
    /// for its interpreter), given before the subcommand.
    fn tether_host_options(&self) -> Vec<String>;
}

/// `interpreter script` as a command line; with `tmpdir`, started through `env` with `TMPDIR`
/// set to it: go-plugin hosts pass their own environment on, so this is how a test gives the
/// plugin a temporary directory it can check is empty afterwards.
#[must_use]
pub fn command_line(interpreter: &Path, script: &Path, tmpdir: Option<&Path>) -> String {
    let mut words = Vec::new();
    if let Some(tmpdir) = tmpdir {
        words.push("env".into());
        words.push(format!("TMPDIR={}", tmpdir.display()).into());
    }
    words.push(interpreter.to_string_lossy());
    words.push(script.to_string_lossy());
    shell_words::join(words)
}

/// Whose example host drives an SDK's plugin in [`round_trip`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// tether's `kv-host` / `counter-host`, confining the plugin.
    Tether,
    /// go-plugin's `kvhost` / `counterhost` of that variant.
    Go(GoPlugin),
}

/// `contract`'s round trip between `host`'s example host and `peer`'s example plugin, with
/// AutoMTLS on or off (`tls`) and host `options`. Under a go-plugin host the plugin gets a fresh
/// `TMPDIR`, which must be empty afterwards: it removed everything it made there (its socket
/// directory, the relay sockets of its dials). Skipped (or failed) as [`peers::go_or_skip`]
/// says when the Go peers are unavailable. [`sdk_interop_tests!`](crate::sdk_interop_tests!) writes the tests.
///
/// # Panics
/// When the round trip does not hold.
pub fn round_trip(
    peer: &impl SdkPeer,
    host: Host,
    contract: Contract,
    tls: bool,
    options: &[&str],
    test: &str,
) {
    match host {
        Host::Tether => {
            let program = match contract {
                Contract::Kv => bins::KV_HOST.path(),
                Contract::Counter => bins::COUNTER_HOST.path(),
            };
            ExampleHost::new(contract, program, peer.plugin_command(contract, None))
                .options(peer.tether_host_options())
                .options(options.iter().copied())
                .tls(tls)
                .round_trip();
        }
        Host::Go(variant) => {
            let Some(go) = peers::go_or_skip(variant, test) else {
                return;
            };
            let program = match contract {
                Contract::Kv => &go.host,
                Contract::Counter => &go.counter_host,
            };
            let tmp = tempfile::tempdir().expect("a temporary directory");
            ExampleHost::new(
                contract,
                program,
                peer.plugin_command(contract, Some(tmp.path())),
            )
            .options(options.iter().copied())
            .tls(tls)
            .round_trip();
            let left: Vec<_> = std::fs::read_dir(tmp.path())
                .expect("the temporary directory is readable")
                .map(|e| e.map(|e| e.path()))
                .collect();
            assert!(left.is_empty(), "the plugin left files behind: {left:?}");
        }
    }
}

/// One `#[test]` per line, each a [`round_trip`] of an SDK's example plugin (the peer comes
/// from the function named first, e.g. `python::python_or_skip`; host options last, when there
/// are any):
///
/// ```ignore
/// sdk_interop_tests! { python::python_or_skip;
///     kv_host_runs_the_python_kv_plugin_in_plaintext: Host::Tether, Contract::Kv, false;
///     go_host_v1_8_with_multiplexing_runs_it: Host::Go(GoPlugin::V18), Contract::Kv, true, &["--multiplex"];
/// }
/// ```
#[macro_export]
macro_rules! sdk_interop_tests {
    ($peer:path; $($name:ident: $host:expr, $contract:expr, $tls:expr $(, $options:expr)?;)*) => {$(
        #[test]
        fn $name() {
            let options: &[&str] = &[];
            $(let options: &[&str] = $options;)?
            if let Some(peer) = $peer(stringify!($name)) {
                $crate::sdk_plugin::round_trip(
                    &peer,
                    $host,
                    $contract,
                    $tls,
                    options,
                    stringify!($name),
                );
            }
        }
    )*};
}

/// The example plugins' handshake: cookie `BASIC_PLUGIN=hello`, app protocol version 1.
#[must_use]
pub fn example_handshake() -> HandshakeConfig {
    HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1])
}

/// `builder`'s plugin, started in `work` with the [`example_handshake`] and offered the broker
/// mode `multiplex` asks for, which it must have accepted.
///
/// # Panics
/// When it does not start or negotiated another mode.
pub async fn start_in_mode(
    builder: PluginClientBuilder,
    work: &Path,
    multiplex: bool,
) -> PluginClient {
    let plugin = builder
        .current_dir(work)
        .handshake(example_handshake())
        .multiplex(multiplex)
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let expected = if multiplex {
        BrokerMode::Multiplexed
    } else {
        BrokerMode::Default
    };
    assert_eq!(plugin.broker_mode(), expected);
    plugin
}

/// A multiplexed plugin has exactly one connection: everything goes over its yamux session.
///
/// # Panics
/// When it has another number, or listens on TCP.
pub fn assert_one_connection(plugin: &PluginClient) {
    let Address::Unix(socket) = plugin.address() else {
        panic!("not a unix socket: {}", plugin.address());
    };
    assert_eq!(
        procs::unix_connections_to(plugin.pid(), socket),
        1,
        "one connection to the plugin"
    );
}

/// Through the library, in both broker modes, the KV example plugin `kv` builds (`language`
/// names it in what is printed): [`start_in_mode`], [`assert_pinned_automtls`],
/// [`assert_kv_contract`], then sequential `Get`s, whose time per call is printed with the start
/// time for bench/BENCHMARKS.md, and [`assert_graceful_shutdown`].
///
/// # Panics
/// When any of that does not hold.
pub async fn assert_kv_plugin_in_both_modes(language: &str, kv: impl Fn() -> PluginClientBuilder) {
    for multiplex in [false, true] {
        let work = tempfile::tempdir().expect("a temporary directory");
        let started = Instant::now();
        let plugin = start_in_mode(kv(), work.path(), multiplex).await;
        let start_time = started.elapsed();
        let mode = plugin.broker_mode();
        assert_pinned_automtls(&plugin);
        assert_kv_contract(&plugin).await;
        if multiplex {
            assert_one_connection(&plugin);
        }
        let mut client = KvClient::new(plugin.channel());
        let calls = 200;
        let timed = Instant::now();
        for _ in 0..calls {
            let request = GetRequest {
                key: "answer".into(),
            };
            let value = client.get(request).await.expect("Get").into_inner().value;
            assert_eq!(value, b"42");
        }
        let per_call = timed.elapsed() / calls;
        eprintln!(
            "{language} kv plugin, {mode} broker: started in {start_time:?}, sequential Get {per_call:?} per call"
        );
        assert_graceful_shutdown(plugin, work.path()).await;
    }
}

/// The connection is mutual TLS with the plugin's own certificate (pinned: its SHA-256
/// fingerprint, 32 bytes as hex pairs), and app protocol version 1 was negotiated.
///
/// # Panics
/// When it is not.
pub fn assert_pinned_automtls(plugin: &PluginClient) {
    assert!(plugin.is_tls(), "AutoMTLS is on");
    let fingerprint = plugin.peer_fingerprint().expect("AutoMTLS is on");
    assert_eq!(fingerprint.len(), 32 * 3 - 1, "{fingerprint}");
    assert_eq!(plugin.app_version(), 1);
}

/// go-plugin's KV contract through the library: `Put` then `Get` of `answer` returns the
/// value; a key that is a path (`../answer`) is `InvalidArgument`, a missing key `NotFound`.
///
/// # Panics
/// When any of that does not hold.
pub async fn assert_kv_contract(plugin: &PluginClient) {
    let mut kv = KvClient::new(plugin.channel());
    kv.put(PutRequest {
        key: "answer".into(),
        value: b"42".to_vec(),
    })
    .await
    .expect("Put");
    let get = |key: &str| {
        let mut kv = kv.clone();
        let key = key.to_owned();
        async move { kv.get(GetRequest { key }).await }
    };
    let value = get("answer").await.expect("Get").into_inner().value;
    assert_eq!(value, b"42");
    let status = get("../answer").await.expect_err("a path is not a key");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status}");
    let status = get("missing")
        .await
        .expect_err("nothing was put under `missing`");
    assert_eq!(status.code(), tonic::Code::NotFound, "{status}");
}

/// `Shutdown` ends the plugin gracefully, with exit status 0, and no process runs in `work`
/// (the plugin's working directory) afterwards.
///
/// # Panics
/// When it does not.
pub async fn assert_graceful_shutdown(plugin: PluginClient, work: &Path) {
    let outcome = plugin.shutdown().await.expect("Shutdown");
    assert!(
        matches!(outcome, ShutdownOutcome::Graceful(status) if status.success()),
        "{outcome}"
    );
    let left = procs::in_dir(work);
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

/// Starts `interpreter script` under a stand-in host — a shell that starts it with the
/// protocol's environment (cookie `BASIC_PLUGIN=hello`, app version 1, `PATH`, and `env`) in
/// `work` and waits — then kills the host with SIGKILL, so it cannot clean up. The plugin must
/// exit by itself within [`HOST_DEATH_EXIT_DEADLINE`] and remove its private socket directory.
/// Returns the plugin's handshake line.
///
/// # Panics
/// When any of that does not hold.
pub async fn assert_exits_when_its_host_dies(
    interpreter: &OsStr,
    script: &Path,
    env: &[(&str, &OsStr)],
    work: &Path,
) -> String {
    let mut host = Command::new("sh")
        .arg("-c")
        .arg(r#""$0" "$1" & echo $!; wait"#)
        .arg(interpreter)
        .arg(script)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("BASIC_PLUGIN", "hello")
        .env("PLUGIN_PROTOCOL_VERSIONS", "1")
        .envs(env.iter().copied())
        .current_dir(work)
        .stdout(Stdio::piped())
        .spawn()
        .expect("sh starts");
    let mut stdout = std::io::BufReader::new(host.stdout.take().expect("stdout is piped"));
    let mut line = String::new();
    // First the shell prints the plugin's pid, then the plugin prints its handshake (by then it
    // watches its parent).
    std::io::BufRead::read_line(&mut stdout, &mut line).expect("the plugin's pid");
    let plugin_pid: u32 = line.trim().parse().expect("the shell prints a pid");
    line.clear();
    std::io::BufRead::read_line(&mut stdout, &mut line).expect("the handshake line");
    assert!(line.starts_with("1|1|unix|"), "handshake: {line:?}");
    let socket_dir: PathBuf = line
        .split('|')
        .nth(3)
        .and_then(|socket| Path::new(socket).parent())
        .expect("the handshake names a socket in a directory")
        .to_owned();
    assert!(socket_dir.is_dir());
    let fd = procs::pidfd(plugin_pid);

    host.kill().expect("SIGKILL the host");
    host.wait().expect("reap the host");
    procs::exited(fd, HOST_DEATH_EXIT_DEADLINE).await;
    assert!(procs::in_dir(work).is_empty());
    assert!(
        !socket_dir.exists(),
        "the plugin removes its private socket directory when its host dies"
    );
    line
}
