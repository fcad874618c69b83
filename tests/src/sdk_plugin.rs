//! What the example plugins of every SDK in another language (Python, TypeScript) must do under
//! a tether host, checked the same way for each: go-plugin's KV contract through the library
//! over pinned AutoMTLS, a graceful `Shutdown` that leaves nothing running, and an exit of their
//! own when their host dies.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tether_broker::{PluginClient, ShutdownOutcome};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};

use crate::procs;

/// How long a plugin may take to exit after its host died (a pidfd watch takes milliseconds).
pub const HOST_DEATH_EXIT_DEADLINE: Duration = Duration::from_secs(10);

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
