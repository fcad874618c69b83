//! Measures the startup cost of confinement: launch → first completed call of the probe
//! plugin with sandbox `enforce` and `off`, interleaved in one run.
//!
//! `startup-bench [LAUNCHES]` (default 30 per mode). Build with `--release`; it runs the
//! `probe-plugin` next to its own executable. Prints one line per mode:
//! `mode=enforce launches=30 p50_ms=… p90_ms=… min_ms=…`.

use std::time::{Duration, Instant};

use tether_broker::{HandshakeConfig, PluginClient, SandboxMode};
use tether_examples::kv::GetRequest;
use tether_examples::kv::kv_client::KvClient;

/// Launches per mode when no argument is given.
const DEFAULT_LAUNCHES: usize = 30;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let launches: usize = std::env::args().nth(1).map_or(DEFAULT_LAUNCHES, |a| {
        a.parse().expect("LAUNCHES is a number")
    });
    let probe = std::env::current_exe()
        .expect("own path")
        .with_file_name("probe-plugin");
    let work = tempfile::tempdir().expect("temporary directory");
    let modes = [SandboxMode::Enforce, SandboxMode::Off];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); modes.len()];
    for _ in 0..launches {
        for (i, mode) in modes.iter().enumerate() {
            let t0 = Instant::now();
            let plugin = PluginClient::builder(&probe)
                .current_dir(work.path())
                .sandbox(*mode)
                .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
                .start()
                .await
                .expect("probe plugin starts");
            KvClient::new(plugin.channel())
                .get(GetRequest { key: "pid:".into() })
                .await
                .expect("first call");
            times[i].push(t0.elapsed());
            plugin.shutdown().await.expect("shutdown");
        }
    }
    for (mode, mut t) in modes.iter().zip(times) {
        t.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "mode={mode} launches={} p50_ms={:.2} p90_ms={:.2} min_ms={:.2}",
            t.len(),
            ms(t[t.len() / 2]),
            ms(t[t.len() * 9 / 10]),
            ms(t[0])
        );
    }
}
