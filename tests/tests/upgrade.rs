//! Upgrading a running catalog plugin with `Supervisor::upgrade` (issue 24, item 4), with real
//! plugin processes: calls flowing at a steady rate through an upgrade all succeed and reach the
//! new version after the switch, while a lease taken before the switch keeps reaching the old
//! one until it is released; an upgrade to a broken binary or an ungranted manifest leaves the
//! old version serving, names the plugin, the phase and the cause, and leaves nothing behind;
//! the grace cuts a lease held too long; a plugin not running gets the new version at its next
//! start.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use prometheus::{Encoder as _, TextEncoder};
use tether_broker::error::{Phase, UpgradeErrorKind, UpgradePhase, UseErrorKind};
use tether_broker::supervisor::OldInstance;
use tether_broker::{Catalog, Grants, Manifest, Supervisor};
use tether_tests::lease::get;
use tether_tests::procs;
use tether_tests::world::{PluginSpec, World};
use tokio::sync::{mpsc, watch};

const VERSIONED: &str = env!("CARGO_BIN_EXE_versioned-plugin");
const BROKEN: &str = env!("CARGO_BIN_EXE_exit-before-handshake");
const PLUGIN: &str = "versioned";

/// The steady load's rate: one call every this long.
const PERIOD: Duration = Duration::from_millis(5);
/// Calls of the steady load before the upgrade begins, and after it has ended.
const CALLS_BEFORE: usize = 40;
const CALLS_AFTER: usize = 40;
/// How long a replaced instance may take to exit once stopped.
const EXIT_DEADLINE: Duration = Duration::from_secs(10);

/// A world whose catalog has `versioned` at version `v1`.
fn world_at_v1() -> World {
    let world = World::new();
    world.add_plugin(&PluginSpec::new(PLUGIN, VERSIONED).extra("args = [\"v1\"]"));
    world
}

/// Rewrites `versioned`'s manifest to run `binary` (linked as `bin/versioned-TAG`) with
/// `args` and the top-level TOML `extra`, and reads it back as a catalog reload would.
fn new_manifest(world: &World, tag: &str, binary: &str, args: &[&str], extra: &str) -> Manifest {
    let command = format!("bin/{PLUGIN}-{tag}");
    std::os::unix::fs::symlink(binary, world.catalog().join(&command)).unwrap();
    let text = format!(
        "name = \"{PLUGIN}\"\ncommand = \"{command}\"\nargs = {args:?}\n{extra}\n\
         [handshake]\ncookie_key = \"BASIC_PLUGIN\"\ncookie_value = \"hello\"\napp_versions = [1]\n"
    );
    std::fs::write(world.catalog().join(format!("{PLUGIN}.toml")), text).unwrap();
    let catalog = Catalog::load_dir(&world.catalog()).unwrap();
    assert!(catalog.errors().is_empty(), "{:?}", catalog.errors());
    catalog.get(PLUGIN).unwrap().clone()
}

async fn version(supervisor: &Supervisor) -> Result<String, String> {
    let lease = supervisor
        .acquire(PLUGIN)
        .await
        .map_err(|e| e.to_string())?;
    let value = get(&lease, "version:").await.map_err(|e| e.to_string())?;
    Ok(String::from_utf8(value).unwrap())
}

/// Calls `Get "version:"` through a fresh lease every [`PERIOD`] until `stop`, sending each
/// answer (the version, or the error's text).
fn steady_load(
    supervisor: Supervisor,
    answers: mpsc::UnboundedSender<Result<String, String>>,
    stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while !*stop.borrow() {
            tick.tick().await;
            if answers.send(version(&supervisor).await).is_err() {
                return;
            }
        }
    })
}

/// Receives answers into `into` until `done` says so of the last one.
async fn collect(
    answers: &mut mpsc::UnboundedReceiver<Result<String, String>>,
    into: &mut Vec<Result<String, String>>,
    done: impl Fn(&[Result<String, String>]) -> bool,
) {
    while !done(into) {
        into.push(answers.recv().await.unwrap());
    }
}

fn scrape(registry: &prometheus::Registry) -> String {
    let mut text = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut text)
        .unwrap();
    String::from_utf8(text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_at_a_steady_rate_through_an_upgrade_all_succeed_and_reach_the_new_version_after_the_switch()
 {
    let world = world_at_v1();
    let registry = prometheus::Registry::new();
    let exporter = opentelemetry_prometheus::exporter()
        .with_registry(registry.clone())
        .build()
        .unwrap();
    let provider = SdkMeterProvider::builder().with_reader(exporter).build();
    let supervisor = world
        .supervisor(Grants::new())
        .meter(&provider.meter("tether"))
        .build();

    // A lease taken before the switch, held across it.
    let before = supervisor.acquire(PLUGIN).await.unwrap();
    assert_eq!(get(&before, "version:").await.unwrap(), b"v1");
    let old_pid = before.pid();
    let old_exit = procs::pidfd(old_pid);
    let private_dirs = World::leftovers(&world.run()).len();

    let (tx, mut rx) = mpsc::unbounded_channel();
    let (stop, stopped) = watch::channel(false);
    let load = steady_load(supervisor.clone(), tx, stopped);
    let mut answers = Vec::new();
    collect(&mut rx, &mut answers, |a| a.len() >= CALLS_BEFORE).await;

    let v2 = new_manifest(&world, "v2", VERSIONED, &["v2"], "");
    let upgrade = tokio::spawn({
        let supervisor = supervisor.clone();
        async move { supervisor.upgrade(v2).await }
    });
    // The switch: the load's first answer from the new version.
    collect(&mut rx, &mut answers, |a| {
        a.last().is_some_and(|last| last.as_deref() == Ok("v2"))
    })
    .await;
    // The lease from before the switch still reaches the old version, which drains, not stops.
    assert_eq!(get(&before, "version:").await.unwrap(), b"v1");
    assert!(
        !upgrade.is_finished(),
        "the upgrade waits for the old lease"
    );
    drop(before);
    let report = upgrade.await.unwrap().unwrap();
    assert!(
        matches!(report.old, OldInstance::Drained { pid, .. } if pid == old_pid),
        "{report:?}"
    );
    procs::exited(old_exit, EXIT_DEADLINE).await;
    let new_pid = report.new_pid.unwrap();
    assert_ne!(new_pid, old_pid);
    assert_eq!(supervisor.pid(PLUGIN).await, Some(new_pid));

    let at_switch = answers.len();
    collect(&mut rx, &mut answers, |a| {
        a.len() >= at_switch + CALLS_AFTER
    })
    .await;
    stop.send_replace(true);
    load.await.unwrap();
    while let Ok(answer) = rx.try_recv() {
        answers.push(answer);
    }

    let failed: Vec<&String> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
    assert!(
        failed.is_empty(),
        "calls failed during the upgrade: {failed:?}"
    );
    let versions: Vec<&str> = answers.iter().map(|a| a.as_deref().unwrap()).collect();
    let switch = versions.iter().position(|v| *v == "v2").unwrap();
    assert!(
        versions[..switch].iter().all(|v| *v == "v1"),
        "{versions:?}"
    );
    assert!(
        versions[switch..].iter().all(|v| *v == "v2"),
        "{versions:?}"
    );
    eprintln!(
        "upgrade under a steady load: {} calls answered by v1, {} by v2, 0 failed; the new instance was healthy after {:?}; {report}",
        switch,
        versions.len() - switch,
        report.start_duration.unwrap()
    );
    assert_eq!(supervisor.starts(PLUGIN), 2);
    // The old instance's private directory is gone; the new one's is there.
    assert_eq!(World::leftovers(&world.run()).len(), private_dirs);

    let text = scrape(&registry);
    let upgrades: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("tether_plugin_upgrades_total{"))
        .collect();
    assert!(
        matches!(upgrades.as_slice(), [line] if line.contains("tether_plugin_upgrade_outcome=\"success\"") && line.contains(&format!("tether_plugin_name=\"{PLUGIN}\"")) && line.ends_with(" 1")),
        "{text}"
    );

    supervisor.shutdown().await;
    assert!(World::leftovers(&world.run()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_to_a_broken_binary_keeps_the_old_version_serving_names_the_plugin_and_the_cause_and_leaves_nothing()
 {
    let world = world_at_v1();
    let supervisor = world.supervisor(Grants::new()).build();
    assert_eq!(version(&supervisor).await.unwrap(), "v1");
    let old_pid = supervisor.pid(PLUGIN).await.unwrap();
    // What this world's launches leave: private directories (socket, TMPDIR), delivery
    // directories, processes working in the plugin's state directory.
    let left = || {
        (
            World::leftovers(&world.run()),
            World::leftovers(&world.delivery()),
            procs::in_dir(&world.state().join(PLUGIN)).len(),
        )
    };
    let before = left();

    let (tx, mut rx) = mpsc::unbounded_channel();
    let (stop, stopped) = watch::channel(false);
    let load = steady_load(supervisor.clone(), tx, stopped);

    // A binary that exits before its handshake.
    let broken = new_manifest(&world, "broken", BROKEN, &[], "");
    let err = supervisor.upgrade(broken).await.unwrap_err();
    assert_eq!(err.plugin(), PLUGIN);
    assert_eq!(err.phase(), UpgradePhase::Start(Phase::Handshake), "{err}");
    let text = err.to_string();
    for cause in [
        "`versioned`",
        "exit status: 3",
        "cannot open the plugin database",
    ] {
        assert!(text.contains(cause), "{cause:?} not in: {text}");
    }
    assert!(
        matches!(err.kind(), UpgradeErrorKind::NotStarted(cause) if matches!(cause.kind(), UseErrorKind::Start(_))),
        "{err:?}"
    );

    // A manifest asking for a secret the grants do not give: refused before anything runs.
    let ungranted = new_manifest(
        &world,
        "ungranted",
        VERSIONED,
        &["v3"],
        "secrets = [\"db\"]",
    );
    let err = supervisor.upgrade(ungranted).await.unwrap_err();
    assert_eq!(
        (err.plugin(), err.phase()),
        (PLUGIN, UpgradePhase::Check),
        "{err}"
    );
    assert!(
        matches!(err.kind(), UpgradeErrorKind::NotStarted(cause) if matches!(cause.kind(), UseErrorKind::NotGranted(_))),
        "{err:?}"
    );

    // The old version kept serving every call, and is still the one running.
    let mut answers = Vec::new();
    collect(&mut rx, &mut answers, |a| a.len() >= CALLS_AFTER).await;
    stop.send_replace(true);
    load.await.unwrap();
    assert!(
        answers.iter().all(|a| a.as_deref() == Ok("v1")),
        "{answers:?}"
    );
    assert_eq!(supervisor.pid(PLUGIN).await, Some(old_pid));
    assert_eq!(supervisor.starts(PLUGIN), 1);
    assert_eq!(left(), before, "the failed upgrades left something behind");

    supervisor.shutdown().await;
    assert!(World::leftovers(&world.run()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_held_past_the_upgrade_grace_is_cut_and_its_calls_say_the_plugin_was_replaced() {
    let world = world_at_v1();
    let grace = Duration::from_millis(200);
    let supervisor = world.supervisor(Grants::new()).upgrade_grace(grace).build();
    let held = supervisor.acquire(PLUGIN).await.unwrap();
    let old_exit = procs::pidfd(held.pid());

    let v2 = new_manifest(&world, "v2", VERSIONED, &["v2"], "");
    let report = supervisor.upgrade(v2).await.unwrap();
    assert!(
        matches!(report.old, OldInstance::GraceExpired { leases: 1, .. }),
        "{report:?}"
    );
    procs::exited(old_exit, EXIT_DEADLINE).await;
    let err = get(&held, "version:").await.unwrap_err();
    assert!(
        matches!(err.kind(), UseErrorKind::Replaced { grace: g } if *g == grace),
        "{err}"
    );
    assert_eq!(version(&supervisor).await.unwrap(), "v2");
    supervisor.shutdown().await;
}

#[tokio::test]
async fn upgrading_a_plugin_that_is_not_running_starts_nothing_and_its_next_start_runs_the_new_version()
 {
    let world = world_at_v1();
    let supervisor = world.supervisor(Grants::new()).build();
    let v2 = new_manifest(&world, "v2", VERSIONED, &["v2"], "");
    let report = supervisor.upgrade(v2).await.unwrap();
    assert_eq!(
        (report.new_pid, report.old),
        (None, OldInstance::NotRunning)
    );
    assert_eq!(supervisor.starts(PLUGIN), 0);
    assert_eq!(version(&supervisor).await.unwrap(), "v2");
    supervisor.shutdown().await;
}
