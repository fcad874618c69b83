//! `kv-bench measure catalog`: a lazy catalog of many plugins, of which a few are used.
//!
//! Writes `--manifests M` manifests (`plugin-0000.toml` …, each naming the `KV_PLUGIN` program,
//! linked or copied to `bin/` beside them because a manifest's command is relative to its
//! directory, with the KV handshake and this host's `--sandbox` mode) into a temporary
//! directory (not timed), then `--repeat R` times: [`Catalog::load_dir`] (timed: `load_ns`), a [`Supervisor`] over
//! it, and one 64-byte `Put` on each of `--use U` plugins spread over the catalog (timed from
//! the start of the load: `use_ns`), then the broker's shutdown (not timed). `started` is the
//! number of plugin processes the broker started, counted over every plugin of the catalog by
//! [`Supervisor::starts`]: a lazy broker starts exactly U.
//!
//! Output: `load_ns=… use_ns=… started=…` (one comma-separated value per repeat).

use std::path::Path;
use std::time::{Duration, Instant};

use tether_broker::{Catalog, Supervisor};
use tether_examples::kv::PutRequest;

use crate::launcher::{BENCH_KEY, BENCH_VALUE, Failure, Launcher, interruptible, kv_client};
use crate::samples::join;

/// The measurement's parameters.
pub(crate) struct CatalogRun {
    /// Manifests in the catalog.
    pub(crate) manifests: u64,
    /// Plugins used per repeat.
    pub(crate) used: u64,
    /// Repeats (each loads the catalog afresh and starts `used` plugins).
    pub(crate) repeat: u64,
}

/// Runs the measurement and returns its output line.
pub(crate) async fn run(launcher: &Launcher, params: CatalogRun) -> Result<String, Failure> {
    if params.used > params.manifests {
        return Err(format!(
            "--use {} is more than --manifests {}",
            params.used, params.manifests
        )
        .into());
    }
    let work = tempfile::Builder::new()
        .prefix("kv-bench-catalog-")
        .tempdir()?;
    let dir = work.path().join("plugins");
    std::fs::create_dir(&dir)?;
    write_manifests(launcher, &dir, params.manifests)?;
    let names = spread(params.manifests, params.used);

    let (mut load, mut used, mut started) = (Vec::new(), Vec::new(), Vec::new());
    for repeat in 0..params.repeat {
        let t0 = Instant::now();
        let catalog = Catalog::load_dir(&dir)?;
        load.push(t0.elapsed());
        if let Some(error) = catalog.errors().first() {
            return Err(format!("a generated manifest was refused: {error}").into());
        }
        if catalog.len() as u64 != params.manifests {
            return Err(format!(
                "loaded {} manifests, wrote {}",
                catalog.len(),
                params.manifests
            )
            .into());
        }
        let all: Vec<String> = catalog.manifests().map(|m| m.name.clone()).collect();
        let broker =
            Supervisor::builder(catalog, work.path().join(format!("state-{repeat}"))).build();
        let result = interruptible(use_plugins(&broker, &names)).await;
        let elapsed = t0.elapsed();
        let starts: u64 = all.iter().map(|name| broker.starts(name)).sum();
        broker.shutdown().await;
        result??;
        used.push(elapsed);
        started.push(starts);
    }
    Ok(format!(
        "load_ns={} use_ns={} started={}",
        join(load.iter().map(Duration::as_nanos)),
        join(used.iter().map(Duration::as_nanos)),
        join(started.iter().copied()),
    ))
}

/// Where the plugin program goes, relative to the catalog directory.
const PLUGIN_PROGRAM: &str = "bin/kv-plugin";

/// `plugin-0000.toml` … for the KV plugin (hard-linked, or copied, to [`PLUGIN_PROGRAM`]), with
/// this host's handshake and sandbox mode.
fn write_manifests(launcher: &Launcher, dir: &Path, count: u64) -> Result<(), Failure> {
    let program = which(&launcher.program)?;
    let target = dir.join(PLUGIN_PROGRAM);
    std::fs::create_dir_all(dir.join("bin"))?;
    if std::fs::hard_link(&program, &target).is_err() {
        std::fs::copy(&program, &target)
            .map_err(|e| format!("copying {} into the catalog: {e}", program.display()))?;
    }
    let command = PLUGIN_PROGRAM;
    let mut args = String::new();
    for (i, arg) in launcher.args.iter().enumerate() {
        if i > 0 {
            args.push_str(", ");
        }
        args.push_str(&toml_string(arg));
    }
    for i in 0..count {
        let name = plugin_name(i);
        let text = format!(
            "name = {}\ncommand = {}\nargs = [{args}]\nsandbox = \"{}\"\n\n[handshake]\ncookie_key = \"BASIC_PLUGIN\"\ncookie_value = \"hello\"\napp_versions = [1]\n",
            toml_string(&name),
            toml_string(command),
            launcher.sandbox,
        );
        std::fs::write(dir.join(format!("{name}.toml")), text)?;
    }
    Ok(())
}

/// `program` as a path: as given when it names a file, else found on `PATH`.
fn which(program: &str) -> Result<std::path::PathBuf, Failure> {
    let given = Path::new(program);
    if given.components().count() > 1 || given.is_file() {
        return Ok(given.to_path_buf());
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("KV_PLUGIN program {program:?} is not a file nor on PATH").into())
}

/// A TOML basic string (JSON's escaping is valid TOML).
fn toml_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

fn plugin_name(i: u64) -> String {
    format!("plugin-{i:04}")
}

/// `used` plugin names spread evenly over `count` (the first, then every count/used-th).
fn spread(count: u64, used: u64) -> Vec<String> {
    (0..used)
        .map(|k| plugin_name(k * count / used.max(1)))
        .collect()
}

/// Acquires each plugin and makes one 64-byte `Put` on it.
async fn use_plugins(broker: &Supervisor, names: &[String]) -> Result<(), Failure> {
    for name in names {
        let lease = broker.acquire(name).await?;
        lease
            .call(|channel| async move {
                kv_client(channel)
                    .put(PutRequest {
                        key: BENCH_KEY.into(),
                        value: BENCH_VALUE.to_vec(),
                    })
                    .await
            })
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn used_plugins_are_spread_over_the_catalog_without_repeats() {
        assert_eq!(spread(1000, 2), ["plugin-0000", "plugin-0500"]);
        assert_eq!(spread(3, 3), ["plugin-0000", "plugin-0001", "plugin-0002"]);
    }
}
