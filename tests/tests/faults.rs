//! Fault injection beyond start-up: plugins that crash in the middle of a stream, handlers that
//! hang, foreign processes and other plugins' certificates at a plugin's socket, plugins that
//! ignore every request to stop, a fork bomb (stopped at the plugin's process limit), and broker streams whose peer goes away.
//! Each test asserts the error the host sees, that the host keeps serving, and that no process
//! remains.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tether_broker::{
    Catalog, HandshakeConfig, Lease, PluginClient, ReattachConfig, ReattachedPlugin,
    ShutdownOutcome, Supervisor, Timeouts, UseError, confine::ProcessLimit, error::UseErrorKind,
    launch::ReattachTls,
};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};
use tether_examples::streams::{StreamsService, StreamsState};
use tether_examples::streams_proto::streams_client::StreamsClient;
use tether_examples::streams_proto::streams_server::StreamsServer;
use tether_examples::streams_proto::{CountRequest, Number, SleepRequest};
use tether_proto::tls::Identity;
use tether_tests::bins;
use tether_tests::lease::eventually;
use tether_tests::world::{PluginSpec, World};
use tether_tests::{cgroups, procs};
use tokio_stream::StreamExt as _;

const PROBE: &str = env!("CARGO_BIN_EXE_probe-plugin");
const STREAMS_PLUGIN: &str = env!("CARGO_BIN_EXE_streams-plugin");
const STUBBORN_PLUGIN: &str = env!("CARGO_BIN_EXE_stubborn-plugin");

/// The fork bomb's process limit: small, so that even a failing test cannot hurt the shared
/// machine.
const BOMB_MAX_PROCESSES: u64 = 64;

/// How long a test waits for something the host does in the background.
const DEADLINE: Duration = Duration::from_secs(10);

/// The issue's bound: calls in flight end this soon after their plugin died.
const CRASH_NOTICED_WITHIN: Duration = Duration::from_secs(1);

fn supervisor(world: &World) -> tether_broker::SupervisorBuilder {
    let catalog = Catalog::load_dir(&world.catalog()).unwrap();
    assert!(catalog.errors().is_empty(), "{:?}", catalog.errors());
    let (delivery, run) = (world.delivery(), world.run());
    Supervisor::builder(catalog, world.state()).customize(move |b| {
        b.delivery_dir(&delivery).private_dir_base(&run).timeouts(
            Timeouts::default()
                .shutdown_grace(Duration::from_millis(500))
                .terminate_grace(Duration::from_millis(500)),
        )
    })
}

fn sigkill(pid: u32) -> Instant {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    Instant::now()
}

/// Asserts that `err` reports plugin `plugin` killed by SIGKILL, and that it came within
/// [`CRASH_NOTICED_WITHIN`] of `killed`.
fn assert_crashed_by_sigkill(err: &UseError, plugin: &str, killed: Instant) {
    let took = killed.elapsed();
    let UseErrorKind::Crashed { status, .. } = err.kind() else {
        panic!("expected Crashed, got {err}");
    };
    assert_eq!(err.plugin(), plugin);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(status),
        Some(libc::SIGKILL),
        "{err}"
    );
    assert!(err.to_string().contains("crashed"), "{err}");
    assert!(
        took < CRASH_NOTICED_WITHIN,
        "the call ended {took:?} after the crash"
    );
}

// Case 8: crash mid-call, streaming.

#[tokio::test]
async fn a_plugin_killed_during_a_server_stream_ends_the_call_within_a_second_with_its_status() {
    let world = World::new();
    world.add_plugin(&PluginSpec::new("s", STREAMS_PLUGIN));
    let supervisor = supervisor(&world).build();
    let lease = supervisor.acquire("s").await.unwrap();
    let pid = lease.pid();
    let killed = Arc::new(std::sync::OnceLock::new());
    let killed_in_call = Arc::clone(&killed);
    let err = lease
        .call(|channel| async move {
            let mut numbers = StreamsClient::new(channel)
                .count(CountRequest { n: 0 })
                .await?
                .into_inner();
            let mut seen = 0;
            while let Some(number) = numbers.message().await? {
                seen += 1;
                assert_eq!(number.value, seen);
                if seen == 3 {
                    killed_in_call.set(sigkill(pid)).unwrap();
                }
            }
            Ok(tonic::Response::new(seen))
        })
        .await
        .unwrap_err();
    assert_crashed_by_sigkill(&err, "s", *killed.get().expect("three numbers arrived"));
    drop(lease);
    // The host carries on: the next use starts the plugin again and streams.
    let lease = supervisor.acquire("s").await.unwrap();
    assert_ne!(lease.pid(), pid);
    let sum: i64 = lease
        .call(|channel| async move {
            let numbers = StreamsClient::new(channel)
                .count(CountRequest { n: 3 })
                .await?
                .into_inner();
            let all: Vec<Number> = numbers.collect::<Result<_, _>>().await?;
            Ok(tonic::Response::new(all.iter().map(|n| n.value).sum()))
        })
        .await
        .unwrap();
    assert_eq!(sum, 6);
    drop(lease);
    supervisor.shutdown().await;
    assert!(procs::in_dir(&world.state().join("s")).is_empty());
    assert!(World::leftovers(&world.run()).is_empty());
}

#[tokio::test]
async fn a_plugin_killed_during_a_bidirectional_stream_ends_the_call_within_a_second() {
    let world = World::new();
    world.add_plugin(&PluginSpec::new("s", STREAMS_PLUGIN));
    let supervisor = supervisor(&world).build();
    let lease = supervisor.acquire("s").await.unwrap();
    let pid = lease.pid();
    let killed = Arc::new(std::sync::OnceLock::new());
    let killed_in_call = Arc::clone(&killed);
    let err = lease
        .call(|channel| async move {
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            let mut doubled = StreamsClient::new(channel)
                .double(tokio_stream::wrappers::ReceiverStream::new(rx))
                .await?
                .into_inner();
            let mut value = 0;
            loop {
                value += 1;
                // The host keeps sending; a closed channel means the call is over.
                if tx.send(Number { value }).await.is_err() {
                    break;
                }
                let Some(answer) = doubled.message().await? else {
                    break;
                };
                assert_eq!(answer.value, 2 * value);
                if value == 3 {
                    killed_in_call.set(sigkill(pid)).unwrap();
                }
            }
            Ok(tonic::Response::new(value))
        })
        .await
        .unwrap_err();
    assert_crashed_by_sigkill(&err, "s", *killed.get().expect("three answers arrived"));
    drop(lease);
    supervisor.shutdown().await;
    assert!(procs::in_dir(&world.state().join("s")).is_empty());
}

// Case 4: noise before the handshake.

#[tokio::test]
async fn noise_lines_before_a_valid_handshake_are_skipped_and_the_plugin_serves() {
    let work = tempfile::tempdir().unwrap();
    // A wrapper that chatters on stdout (text, a non-UTF-8 line, a line shaped nothing like a
    // handshake) and then runs the real plugin, which prints the handshake.
    let script = r#"echo "starting up..."; printf 'caf\351\n'; echo "a|b|c"; exec "$0""#;
    let plugin = PluginClient::builder("/bin/sh")
        .args(["-c", script, bins::KV_PLUGIN.path()])
        // The plugin (`/bin/sh`) may execute system programs and, granted, the test's.
        .sandbox_allow_exec(Path::new(bins::KV_PLUGIN.path()).parent().unwrap())
        .current_dir(work.path())
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
        .start()
        .await
        .unwrap();
    KvClient::new(plugin.channel())
        .put(PutRequest {
            key: "after-noise".into(),
            value: b"ok".to_vec(),
        })
        .await
        .unwrap();
    plugin.shutdown().await.unwrap();
    assert!(procs::in_dir(work.path()).is_empty());
}

// Case 9: a handler hangs.

async fn sleep_call(lease: &Lease, millis: u64, grpc_deadline: Option<Duration>) -> UseError {
    lease
        .call(|channel| async move {
            let mut request = tonic::Request::new(SleepRequest { millis });
            if let Some(deadline) = grpc_deadline {
                request.set_timeout(deadline);
            }
            StreamsClient::new(channel).sleep(request).await
        })
        .await
        .unwrap_err()
}

#[tokio::test]
async fn hanging_handlers_hit_their_deadline_and_the_plugin_is_recycled_after_the_policys_count() {
    let world = World::new();
    world.add_plugin(&PluginSpec::new("s", STREAMS_PLUGIN));
    let call_timeout = Duration::from_millis(800);
    let supervisor = supervisor(&world)
        .call_timeout(call_timeout)
        .recycle_after_deadlines(2)
        .build();
    let lease = supervisor.acquire("s").await.unwrap();
    let hung = lease.pid();
    let exited = procs::pidfd(hung);
    let an_hour = 3_600_000;

    // 1. The request's own gRPC deadline fires (the plugin's server enforces it).
    let err = sleep_call(&lease, an_hour, Some(Duration::from_millis(200))).await;
    let UseErrorKind::Call { status, .. } = err.kind() else {
        panic!("expected the plugin's deadline status, got {err}");
    };
    assert_eq!(status.code(), tonic::Code::Cancelled, "{err}");
    assert_eq!(status.message(), "Timeout expired", "{err}");
    // One deadline is not yet a hang: the same process is still the plugin.
    assert_eq!(supervisor.pid("s").await, Some(hung));

    // 2. A call without a gRPC deadline is abandoned by the host's call timeout; the second
    //    deadline in a row recycles the plugin.
    let began = Instant::now();
    let err = sleep_call(&lease, an_hour, None).await;
    assert!(began.elapsed() >= call_timeout, "{err}");
    assert!(
        err.plugin() == "s"
            && matches!(*err.kind(), UseErrorKind::DeadlineExceeded { timeout, recycled: true } if timeout == call_timeout),
        "{err:?}"
    );
    assert!(err.to_string().contains("killed"), "{err}");
    procs::exited(exited, DEADLINE).await;
    drop(lease);

    // 3. The next use gets a fresh process, which answers.
    let lease = supervisor.acquire("s").await.unwrap();
    assert_ne!(lease.pid(), hung);
    lease
        .call(|channel| async move {
            StreamsClient::new(channel)
                .sleep(SleepRequest { millis: 0 })
                .await
        })
        .await
        .unwrap();
    assert_eq!(supervisor.starts("s"), 2);
    drop(lease);
    supervisor.shutdown().await;
    assert!(procs::in_dir(&world.state().join("s")).is_empty());
    assert!(World::leftovers(&world.run()).is_empty());
}

// Case 7: who may talk to a plugin's socket.

/// Starts the KV plugin as the host would, with `host` as the client certificate it must
/// require; returns the process, its reattach config and the certificate it announced.
fn start_with_host_identity(
    dir: &Path,
    host: &Identity,
) -> (std::process::Child, ReattachConfig, Vec<u8>) {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(bins::KV_PLUGIN.path())
        .env_clear()
        .env("PLUGIN_CLIENT_CERT", host.cert_pem())
        .env("BASIC_PLUGIN", "hello")
        .env("PLUGIN_PROTOCOL_VERSIONS", "1")
        .env("PLUGIN_UNIX_SOCKET_DIR", dir)
        .env("TMPDIR", dir)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let handshake = tether_proto::handshake::Handshake::parse(line.trim().as_bytes()).unwrap();
    let tether_proto::handshake::Address::Unix(socket) = &handshake.address else {
        panic!("expected a unix socket: {line}");
    };
    let json = format!(
        r#"{{"Protocol":"grpc","ProtocolVersion":1,"Addr":{{"Network":"unix","String":"{}"}},"Pid":{},"Test":true}}"#,
        socket.display(),
        child.id()
    );
    let cert = handshake
        .server_cert
        .expect("AutoMTLS announces a certificate");
    (child, ReattachConfig::from_json(&json).unwrap(), cert)
}

/// Whether a client presenting `tls` (or none) gets a KV answer from the plugin.
async fn answers(config: &ReattachConfig, tls: Option<ReattachTls>) -> bool {
    let Ok(plugin) = ReattachedPlugin::connect(config.clone(), tls).await else {
        return false;
    };
    let answered = KvClient::new(plugin.channel())
        .put(PutRequest {
            key: "k".into(),
            value: b"v".to_vec(),
        })
        .await
        .is_ok();
    // Not a shutdown: the plugin must stay up for the next client.
    drop(plugin);
    answered
}

#[tokio::test]
async fn only_the_host_certificate_reaches_a_plugin_not_foreign_or_another_plugins_one() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (host_for_a, host_for_b) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    let (mut a, config_a, cert_a) = start_with_host_identity(dir_a.path(), &host_for_a);
    let (mut b, _config_b, _cert_b) = start_with_host_identity(dir_b.path(), &host_for_b);

    // A foreign local process without TLS.
    assert!(
        !answers(&config_a, None).await,
        "plaintext reached plugin a"
    );
    // A foreign local process with its own fresh certificate (and a's real one pinned).
    let foreign = ReattachTls {
        identity: Identity::generate().unwrap(),
        plugin_cert: cert_a.clone(),
    };
    assert!(
        !answers(&config_a, Some(foreign)).await,
        "a foreign certificate reached plugin a"
    );
    // The certificate that is valid for plugin b's connection.
    let of_b = ReattachTls {
        identity: host_for_b,
        plugin_cert: cert_a.clone(),
    };
    assert!(
        !answers(&config_a, Some(of_b)).await,
        "plugin b's certificate reached plugin a"
    );
    // The host's certificate for a does (so the refusals above are mTLS at work).
    let host = ReattachTls {
        identity: host_for_a,
        plugin_cert: cert_a,
    };
    assert!(answers(&config_a, Some(host)).await);
    for child in [&mut a, &mut b] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

// Case 10: ignores Shutdown and SIGTERM, and has a grandchild.

#[tokio::test]
async fn a_plugin_ignoring_shutdown_and_sigterm_is_killed_with_its_grandchild_after_the_grace() {
    let work = tempfile::tempdir().unwrap();
    let runtime = tempfile::Builder::new()
        .prefix("tt")
        .tempdir_in("/tmp")
        .unwrap();
    let (shutdown_grace, terminate_grace) =
        (Duration::from_millis(300), Duration::from_millis(300));
    let plugin = PluginClient::builder(STUBBORN_PLUGIN)
        .current_dir(work.path())
        .private_dir_base(runtime.path())
        .timeouts(
            Timeouts::default()
                .shutdown_grace(shutdown_grace)
                .terminate_grace(terminate_grace),
        )
        .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
        .start()
        .await
        .unwrap();
    let value = KvClient::new(plugin.channel())
        .get(GetRequest { key: "up".into() })
        .await
        .unwrap()
        .into_inner()
        .value;
    assert_eq!(value, b"up");
    // The plugin and its `sleep` grandchild.
    assert_eq!(
        procs::in_dir(work.path()).len(),
        2,
        "the plugin and its grandchild"
    );
    let began = Instant::now();
    let outcome = plugin.shutdown().await.unwrap();
    assert!(matches!(outcome, ShutdownOutcome::Killed(_)), "{outcome:?}");
    assert!(began.elapsed() >= shutdown_grace + terminate_grace);
    let left = procs::in_dir(work.path());
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(World::leftovers(runtime.path()).is_empty());
}

// Case 16: fork bomb.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_is_stopped_at_the_plugins_process_limit_and_every_process_of_it_ends_with_the_plugin()
 {
    let world = World::new();
    world.add_plugin(
        &PluginSpec::new("bomb", PROBE)
            .tables(&format!("[limits]\nprocesses = {BOMB_MAX_PROCESSES}")),
    );
    world.add_plugin(&PluginSpec::new("kv", bins::KV_PLUGIN.path()));
    let supervisor = supervisor(&world).build();
    let bomb = supervisor.acquire("bomb").await.unwrap();
    let bomb_dir = world.state().join("bomb");
    let cgroup = match bomb.process_limit().clone() {
        ProcessLimit::Cgroup { max, dir } => {
            assert_eq!(max, BOMB_MAX_PROCESSES);
            Some(dir)
        }
        ProcessLimit::Rlimit { max } => {
            // Only where the host cannot make pids cgroups (RLIMIT_NPROC, non-root).
            assert!(
                !cgroups::pids_controller_expected(),
                "this host has a writable pids controller, yet the plugin got RLIMIT_NPROC only"
            );
            assert_eq!(max, Some(BOMB_MAX_PROCESSES));
            None
        }
        other => panic!("unexpected process limit {other:?}"),
    };
    // With the cgroup, a bomb of 2^13 - 1 shells and as many `sleep`s (about 16 000
    // processes unstopped); without it (a host that cannot make pids cgroups, where root would
    // not be stopped) one of about 250.
    let levels = if cgroup.is_some() { 12 } else { 6 };
    bomb.call(|channel| async move {
        KvClient::new(channel)
            .put(PutRequest {
                key: "forkbomb:".into(),
                value: levels.to_string().into_bytes(),
            })
            .await
    })
    .await
    .unwrap();
    if let Some(dir) = &cgroup {
        // Forks past the limit fail: the bomb is stopped there.
        eventually("forks are refused at the limit", DEADLINE, || {
            cgroups::counter(dir, "pids.events", Some("max")).unwrap() > 0
        })
        .await;
        let current = cgroups::counter(dir, "pids.current", None).unwrap();
        assert!(current <= BOMB_MAX_PROCESSES, "{current} tasks");
        let in_group = cgroups::procs(dir);
        assert!(in_group.len() <= usize::try_from(BOMB_MAX_PROCESSES).unwrap());
        // Every process of the bomb is in the plugin's group. Asked of each process, and only
        // of live ones: the bomb keeps replacing shells that failed to fork, and an exiting
        // process already shows the root group.
        let bomb_procs = procs::in_dir(&bomb_dir);
        assert!(bomb_procs.len() > 1, "the bomb did not start");
        let name = dir.file_name().unwrap().to_str().unwrap();
        for p in &bomb_procs {
            let Ok(groups) = std::fs::read_to_string(format!("/proc/{}/cgroup", p.pid)) else {
                continue;
            };
            // An exiting process (PF_EXITING, set first thing in do_exit) is listed in the
            // root group of every v1 hierarchy while it still runs and has a working
            // directory (proc_cgroup_show), so its own flag says whether it is live.
            let still_live = std::fs::read_to_string(format!("/proc/{}/stat", p.pid))
                .is_ok_and(|stat| procs::stat_is_live(&stat));
            assert!(
                groups.contains(name) || !still_live,
                "{p:?} escaped the group: {groups}"
            );
        }
    } else {
        eventually("the bomb has spread", DEADLINE, || {
            procs::in_dir(&bomb_dir).len() > 200
        })
        .await;
    }

    // The host, another plugin and the bombing plugin itself keep answering.
    let kv = supervisor.acquire("kv").await.unwrap();
    kv.call(|channel| async move {
        KvClient::new(channel)
            .put(PutRequest {
                key: "during".into(),
                value: b"bomb".to_vec(),
            })
            .await
    })
    .await
    .unwrap();
    let pid = bomb
        .call(|channel| async move {
            KvClient::new(channel)
                .get(GetRequest { key: "pid:".into() })
                .await
        })
        .await
        .unwrap()
        .value;
    // It answers with its pid (its world's, where it has one: not the host's number).
    let pid: u32 = String::from_utf8(pid).unwrap().parse().unwrap();
    assert!(pid > 1, "{pid}");
    drop((bomb, kv));

    // Stopping the plugin ends every process of the bomb and removes its group.
    supervisor.shutdown().await;
    let left = procs::in_dir(&bomb_dir);
    assert!(left.is_empty(), "{} processes left behind", left.len());
    assert!(World::leftovers(&world.run()).is_empty());
    if let Some(dir) = cgroup {
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}

/// A grandchild in a process group of its own escapes the plugin's group kill, but not its
/// pids cgroup.
#[tokio::test]
async fn a_grandchild_that_left_the_plugins_process_group_still_ends_with_the_plugin() {
    let world = World::new();
    world.add_plugin(&PluginSpec::new("escape", PROBE));
    let supervisor = supervisor(&world).build();
    let plugin = supervisor.acquire("escape").await.unwrap();
    let dir = world.state().join("escape");
    let cgroup = match plugin.process_limit().clone() {
        ProcessLimit::Cgroup { dir, .. } => Some(dir),
        ProcessLimit::Rlimit { .. } => {
            assert!(
                !cgroups::pids_controller_expected(),
                "this host has a writable pids controller, yet the plugin got RLIMIT_NPROC only"
            );
            None
        }
        other => panic!("unexpected process limit {other:?}"),
    };
    plugin
        .call(|channel| async move {
            KvClient::new(channel)
                .put(PutRequest {
                    key: "escape:".into(),
                    value: Vec::new(),
                })
                .await
        })
        .await
        .unwrap();
    let escaped: Vec<_> = procs::in_dir(&dir)
        .into_iter()
        .filter(|p| p.pid != plugin.pid())
        .collect();
    assert_eq!(escaped.len(), 1, "{escaped:?}");
    if let Some(group) = &cgroup {
        // Nor can the plugin (uid 0 on a root host) move itself out of its group: Landlock
        // keeps the cgroup file system read-only.
        let parent_procs = group.parent().unwrap().join("cgroup.procs");
        let moved = plugin
            .call(|channel| async move {
                KvClient::new(channel)
                    .put(PutRequest {
                        key: format!("write:{}", parent_procs.display()),
                        value: b"0".to_vec(),
                    })
                    .await
            })
            .await;
        assert!(
            // Landlock's refusal; in a world the host's cgroup file is not there, or read-only.
            matches!(moved.as_ref().map_err(UseError::kind), Err(UseErrorKind::Call { status, .. }) if matches!(status.code(), tonic::Code::PermissionDenied | tonic::Code::NotFound) || status.message().contains("Read-only file system")),
            "{moved:?}"
        );
        assert!(cgroups::procs(group).contains(&plugin.pid()));
    }
    drop(plugin);
    supervisor.shutdown().await;
    let left = procs::in_dir(&dir);
    if cgroup.is_none() {
        // Without a pids cgroup nothing reaches it: end it here.
        for p in &left {
            let _ = std::process::Command::new("kill")
                .args(["-9", &p.pid.to_string()])
                .status();
        }
        return;
    }
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(!cgroup.unwrap().exists());
}

// Case 17: a broker stream whose peer goes away.

/// A host-side and a plugin-side `GRPCBroker`, connected in memory over mutual TLS.
fn broker_pair(dir: &Path) -> (tether_broker::GrpcBroker, tether_broker::GrpcBroker) {
    use tether_transport::{
        BrokerSetup, BrokerTls, GrpcBroker, GrpcBrokerConfig, ListenOn, Target,
    };
    let config = GrpcBrokerConfig::new().stop_grace(Duration::from_millis(100));
    let host = GrpcBroker::new("plugin `test`", config.clone());
    let plugin = GrpcBroker::new("the host", config);
    let (h, p) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    for (side, own, peer) in [(&host, &h, &p), (&plugin, &p, &h)] {
        let allowed = dir.to_owned();
        side.connect(BrokerSetup {
            tls: Some(BrokerTls::new(own, peer.cert_der().clone()).unwrap()),
            listen: ListenOn::Unix(dir.to_owned()),
            policy: Arc::new(
                move |address: &tether_proto::handshake::Address| match address {
                    tether_proto::handshake::Address::Unix(path) if path.starts_with(&allowed) => {
                        Ok(Target::Unix(path.clone()))
                    }
                    _ => Err(format!("not inside {}", allowed.display())),
                },
            ),
            mux: None,
        });
    }
    let to_plugin = host.take_outbound().unwrap().map(Ok);
    let to_host = plugin.take_outbound().unwrap().map(Ok);
    let (h, p) = (host.clone(), plugin.clone());
    tokio::spawn(async move { p.run_inbound(to_plugin).await });
    tokio::spawn(async move { h.run_inbound(to_host).await });
    (host, plugin)
}

#[tokio::test]
async fn when_either_side_of_a_broker_stream_goes_away_the_other_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let (host, plugin) = broker_pair(dir.path());
    let state = Arc::new(StreamsState::default());
    let id = host.next_id();
    let served = host
        .accept_and_serve(
            id,
            StreamsServer::new(StreamsService::new(Arc::clone(&state))),
        )
        .await
        .unwrap();
    let mut client = StreamsClient::new(plugin.dial(id).await.unwrap());

    // The dialling side drops its endless stream: the serving side sees the cancellation.
    let mut numbers = client
        .count(CountRequest { n: 0 })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(numbers.message().await.unwrap().unwrap().value, 1);
    drop(numbers);
    assert_eq!(state.wait_for_cancelled(1, DEADLINE).await, 1);

    // The serving side stops mid-stream: the dialling side's stream ends with an error.
    let mut numbers = client
        .count(CountRequest { n: 0 })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(numbers.message().await.unwrap().unwrap().value, 1);
    served.stop().await;
    let ended = tokio::time::timeout(DEADLINE, async {
        loop {
            match numbers.message().await {
                Ok(Some(_)) => {} // Numbers already in flight.
                other => return other,
            }
        }
    })
    .await
    .expect("the stream ended after its server stopped");
    assert!(ended.is_err(), "the stream ended as if complete: {ended:?}");
}
