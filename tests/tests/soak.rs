//! A bounded soak run: 100 plugins cycled through start, call and stop for a while, checking
//! that the host's descriptors, memory, private-directory base and process table stay flat.
//!
//! Ignored by default (CI skips it); run it with
//!
//! ```sh
//! cargo test -p tether-tests --test soak -- --ignored soak            # 2 minutes
//! TETHER_SOAK_SECS=600 cargo test -p tether-tests --test soak -- --ignored soak --nocapture
//! ```

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::time::{Duration, Instant};

use tether_broker::{Catalog, Supervisor};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};
use tether_tests::bins;
use tether_tests::procs;
use tether_tests::world::{PluginSpec, World};

/// Plugins in the catalog; every round starts, calls and stops each of them.
const PLUGINS: usize = 100;

/// How many plugins start at the same time (the machine has few cores).
const CONCURRENT_STARTS: usize = 10;

/// How long the soak runs unless `TETHER_SOAK_SECS` says otherwise.
const DEFAULT_SOAK_DURATION: Duration = Duration::from_secs(120);

/// Open descriptors the host may gain over the run (tokio's blocking pool, allocator arenas
/// and tracing may open a few lazily).
const FD_TOLERANCE: usize = 16;

/// Resident memory the host may gain over the run, after a warm-up round: allocator caches
/// and tokio worker stacks settle within this.
const RSS_TOLERANCE_KIB: u64 = 32 * 1024;

/// How long an exited child of the host may stay a zombie before the soak fails.
const ZOMBIE_REAP_LIMIT: Duration = Duration::from_secs(5);

fn soak_duration() -> Duration {
    std::env::var("TETHER_SOAK_SECS").map_or(DEFAULT_SOAK_DURATION, |s| {
        Duration::from_secs(s.parse().expect("TETHER_SOAK_SECS is whole seconds"))
    })
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Children of this process that have exited but were not reaped.
fn zombie_children() -> Vec<u32> {
    let me = std::process::id().to_string();
    let mut zombies = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid …
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") && fields.get(1) == Some(&me.as_str()) {
            zombies.push(pid);
        }
    }
    zombies
}

/// Starts every plugin (a few at a time), puts and gets a value, and shuts the supervisor down.
async fn round(world: &World, round: usize) {
    let catalog = Catalog::load_dir(&world.catalog()).unwrap();
    let (delivery, run) = (world.delivery(), world.run());
    let supervisor = Supervisor::builder(catalog, world.state())
        .customize(move |b| b.delivery_dir(&delivery).private_dir_base(&run))
        .build();
    let names: Vec<String> = (0..PLUGINS).map(|i| format!("p{i:03}")).collect();
    for chunk in names.chunks(CONCURRENT_STARTS) {
        let calls = chunk.iter().map(|name| {
            let supervisor = supervisor.clone();
            let name = name.clone();
            tokio::spawn(async move {
                let lease = supervisor.acquire(&name).await.unwrap();
                let value = format!("{name} round {round}").into_bytes();
                let put = PutRequest {
                    key: "k".into(),
                    value: value.clone(),
                };
                lease
                    .call(|ch| async move { KvClient::new(ch).put(put).await })
                    .await
                    .unwrap();
                let got = lease
                    .call(|ch| async move {
                        KvClient::new(ch).get(GetRequest { key: "k".into() }).await
                    })
                    .await
                    .unwrap();
                assert_eq!(got.value, value);
            })
        });
        for call in calls.collect::<Vec<_>>() {
            call.await.unwrap();
        }
    }
    supervisor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "soak run: minutes long; run with `-- --ignored soak`"]
async fn soak_100_plugins_cycled_through_start_call_stop_keep_the_host_flat() {
    let world = World::new();
    for i in 0..PLUGINS {
        world.add_plugin(&PluginSpec::new(
            &format!("p{i:03}"),
            bins::KV_PLUGIN.path(),
        ));
    }
    let duration = soak_duration();

    // Warm-up: the first round allocates what the host keeps (pools, caches).
    round(&world, 0).await;
    let (fds, rss) = (open_fds(), rss_kib());
    eprintln!("after warm-up: {fds} descriptors, {rss} KiB resident");

    let began = Instant::now();
    let mut rounds = 0;
    let mut peak_fds = fds;
    let mut peak_rss = rss;
    while began.elapsed() < duration {
        rounds += 1;
        let t = Instant::now();
        round(&world, rounds).await;
        let (now_fds, now_rss) = (open_fds(), rss_kib());
        peak_fds = peak_fds.max(now_fds);
        peak_rss = peak_rss.max(now_rss);
        eprintln!(
            "round {rounds}: {PLUGINS} plugins in {:?}; {now_fds} descriptors, {now_rss} KiB resident",
            t.elapsed()
        );
        assert!(
            World::leftovers(&world.run()).is_empty(),
            "private-directory base not empty after round {rounds}: {:?}",
            World::leftovers(&world.run())
        );
        assert!(World::leftovers(&world.delivery()).is_empty());
        assert!(
            now_fds <= fds + FD_TOLERANCE,
            "descriptors grew from {fds} to {now_fds} by round {rounds}"
        );
        assert!(
            now_rss <= rss + RSS_TOLERANCE_KIB,
            "resident memory grew from {rss} KiB to {now_rss} KiB by round {rounds}"
        );
        // Children exiting around the shutdown are reaped in the background (tokio, on the
        // next SIGCHLD): zombies may appear briefly, but none may stay.
        let reaped_by = Instant::now() + ZOMBIE_REAP_LIMIT;
        let mut seen_zombies = 0;
        loop {
            let zombies = zombie_children();
            if zombies.is_empty() {
                break;
            }
            seen_zombies = seen_zombies.max(zombies.len());
            assert!(
                Instant::now() < reaped_by,
                "zombies after round {rounds}: {zombies:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if seen_zombies > 0 {
            eprintln!("round {rounds}: {seen_zombies} zombies, reaped in the background");
        }
        for i in 0..PLUGINS {
            let dir = world.state().join(format!("p{i:03}"));
            let left = procs::in_dir(&dir);
            assert!(left.is_empty(), "left behind by p{i:03}: {left:?}");
        }
    }
    eprintln!(
        "soak: {rounds} rounds ({} plugin starts) in {:?}; descriptors {fds} -> peak {peak_fds}, resident {rss} -> peak {peak_rss} KiB",
        rounds * PLUGINS,
        began.elapsed()
    );
    assert!(rounds > 0);
}
