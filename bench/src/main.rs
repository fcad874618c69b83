//! `tether-bench`: runs tether and go-plugin side by side in alternating rounds and writes
//! `bench/BENCHMARKS.md` (its generated section) and `bench/bench-results.json`.
//!
//! Normally started by `bash bench/run.sh [--quick]`, which builds the programs first.
//!
//! ```text
//! tether-bench [--quick] [--rounds N] [--bin-dir DIR] [--go-peers DIR] [--no-go101]
//!              [--markdown FILE] [--json FILE] [--timeout SECONDS]
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::Parser;
use tether_bench::machine::{self, Machine};
use tether_bench::report::runners::RunnerReport;
use tether_bench::report::{self, Context, Results};
use tether_bench::rounds::{self, record};
use tether_bench::suite::{
    CounterPrograms, Counts, Measurement, RunnerCounts, RunnerMeasurement, RunnerPrograms, System,
    SystemKind,
};

#[derive(Debug, Parser)]
#[command(
    name = "tether-bench",
    about = "Benchmarks tether against go-plugin in alternating rounds; writes bench/BENCHMARKS.md and bench/bench-results.json"
)]
struct Cli {
    /// Smoke run: one round with tiny counts (for CI; the numbers mean nothing).
    #[arg(long)]
    quick: bool,
    /// Rounds (default 3; 1 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: Option<u32>,
    /// Where `kv-bench`, `counter-bench` and `pingpong` are (release builds).
    #[arg(long, default_value = "target/release")]
    bin_dir: PathBuf,
    /// Where `kv-plugin` and `counter-plugin` are [default: the --bin-dir]. `bench/run.sh`
    /// passes the plugins built as the SDK recommends: the `plugin` profile, statically linked.
    #[arg(long)]
    plugin_dir: Option<PathBuf>,
    /// Where `tests/go/build.sh` put the Go peers.
    #[arg(long, default_value = "target/go-peers")]
    go_peers: PathBuf,
    /// Leave out Debian's go-plugin 1.0.1 column.
    #[arg(long)]
    no_go101: bool,
    /// The Markdown file whose generated section is replaced [default: bench/BENCHMARKS.md, or
    /// target/bench-quick/BENCHMARKS.md with --quick, so a smoke run never overwrites real
    /// numbers].
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// The JSON file to write [default: bench/bench-results.json, or
    /// target/bench-quick/bench-results.json with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
    /// Seconds one measurement run may take before it is killed.
    #[arg(long, default_value_t = tether_bench::run::DEFAULT_RUN_TIMEOUT.as_secs())]
    timeout: u64,
    /// `tests/go/go.mod`, read for the go-plugin and grpc-go versions.
    #[arg(long, default_value = "tests/go/go.mod")]
    go_mod: PathBuf,
}

/// Where a `--quick` run writes its reports unless told otherwise.
const QUICK_OUTPUT_DIR: &str = "target/bench-quick";

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tether-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> Result<(), String> {
    let mut counts = if cli.quick {
        Counts::QUICK
    } else {
        Counts::FULL
    };
    if let Some(rounds) = cli.rounds {
        counts.rounds = rounds;
    }
    let go_mod = std::fs::read_to_string(&cli.go_mod).unwrap_or_default();
    let go_plugin_version = module_version(&go_mod, "github.com/hashicorp/go-plugin");
    let grpc_version = module_version(&go_mod, "google.golang.org/grpc");
    let systems = systems(cli, go_plugin_version.as_deref())?;

    // Plugins write their `kv_*` files here; tmpfs keeps disk speed out of the numbers.
    let shm = Path::new("/dev/shm");
    let work = tempfile::Builder::new()
        .prefix("tether-bench-")
        .tempdir_in(if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        })
        .map_err(|e| format!("cannot make a work directory: {e}"))?;

    let machine = Machine::read();
    let load_before = machine::current_load();
    eprintln!(
        "tether-bench: {} rounds on {} (load {:?})",
        counts.rounds,
        machine.summary(),
        load_before
    );
    let mut results = Results::default();
    let runners = runner_setup(cli, &work)?;
    let allowed = tether_bench::affinity::allowed_cpus()
        .map_err(|e| format!("reading this process's CPUs: {e}"))?;
    let pinned = rounds::Pinning {
        tether: rounds::find(&systems, report::TETHER)?,
        floor: rounds::find(&systems, report::FLOOR)?,
        allowed: &allowed,
        timeout: std::time::Duration::from_secs(cli.timeout),
        work: work.path(),
        counts: &counts,
    };
    let measurements = Measurement::all();
    for round in 0..counts.rounds {
        // Rotate the systems' order so no system always runs first (or right after another).
        let mut order: Vec<&System> = systems.iter().collect();
        order.rotate_left(round as usize % systems.len());
        for &measurement in &measurements {
            for system in order.iter().filter(|s| measurement.applies_to(&s.kind)) {
                eprint!(
                    "round {}/{}: {:<16} {:<8} ",
                    round + 1,
                    counts.rounds,
                    measurement.name(),
                    system.id
                );
                let timeout = std::time::Duration::from_secs(cli.timeout);
                let outcome =
                    tether_bench::run::run(system, measurement, &counts, work.path(), timeout);
                record(&mut results, system.id, round, outcome);
            }
        }
        runner_round(cli, &runners, round, counts.rounds, &mut results);
        rounds::placements(&pinned, round, &mut results);
        rounds::telemetry(&pinned, round, &mut results);
    }
    let placement_report = rounds::placement_report(&allowed, &counts);
    let telemetry_report = rounds::telemetry_report(&allowed, &counts);

    let ctx = Context {
        date: now_utc(),
        machine: machine.summary(),
        load_before,
        load_after: machine::current_load(),
        tools: tools(go_plugin_version.as_deref(), grpc_version.as_deref()),
        counts,
        quick: cli.quick,
        systems,
    };
    let quick_dir = Path::new(QUICK_OUTPUT_DIR);
    let (markdown, json_path) = match (&cli.markdown, &cli.json, cli.quick) {
        (md, js, true) => (
            md.clone()
                .unwrap_or_else(|| quick_dir.join("BENCHMARKS.md")),
            js.clone()
                .unwrap_or_else(|| quick_dir.join("bench-results.json")),
        ),
        (md, js, false) => (
            md.clone().unwrap_or_else(|| "bench/BENCHMARKS.md".into()),
            js.clone()
                .unwrap_or_else(|| "bench/bench-results.json".into()),
        ),
    };
    for path in [&markdown, &json_path] {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        }
    }
    let sections = [
        report::runners::markdown(&results, &runners.report),
        report::placement::markdown(&results, &placement_report),
        report::telemetry::markdown(&results, &telemetry_report),
    ]
    .concat();
    let generated = report::runners::insert(&report::markdown(&results, &ctx), &sections);
    let existing = std::fs::read_to_string(&markdown).unwrap_or_default();
    std::fs::write(&markdown, report::splice(&existing, &generated))
        .map_err(|e| format!("writing {}: {e}", markdown.display()))?;
    let mut json = report::json(&results, &ctx);
    json["runners"] = report::runners::json(&results, &runners.report);
    json["placements"] = report::placement::json(&results, &placement_report);
    json["telemetry"] = report::telemetry::json(&results, &telemetry_report);
    let json =
        serde_json::to_string_pretty(&json).map_err(|e| format!("encoding the results: {e}"))?;
    std::fs::write(&json_path, json + "\n")
        .map_err(|e| format!("writing {}: {e}", json_path.display()))?;
    eprintln!(
        "tether-bench: wrote {} and {}",
        markdown.display(),
        json_path.display()
    );
    print!("{generated}");
    if results.errors().is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} measurement runs failed (listed in {})",
            results.errors().len(),
            markdown.display()
        ))
    }
}

/// The runners' rows: their programs, counts, and whether they can run here.
struct Runners {
    programs: RunnerPrograms,
    report: RunnerReport,
    /// Each workflow's state directory (its steps' files).
    state: PathBuf,
}

/// The runners' rows' programs and counts; without `runsc` (or root) the rows say why, unless
/// `TETHER_REQUIRE_PEERS=1`, which makes that an error.
fn runner_setup(cli: &Cli, work: &tempfile::TempDir) -> Result<Runners, String> {
    let program = |name: &str| {
        std::path::absolute(cli.bin_dir.join(name)).map_err(|e| format!("{name}: {e}"))
    };
    let mut unavailable = tether_bench::suite::gvisor_unavailable();
    let step = program("kv-step")?;
    if unavailable.is_none() && !step.is_file() {
        unavailable = Some(format!(
            "{} is missing; bash bench/run.sh builds it",
            step.display()
        ));
    }
    if let Some(why) = &unavailable {
        if tether_bench::suite::peers_required() {
            return Err(format!(
                "the gVisor rows cannot run and TETHER_REQUIRE_PEERS=1: {why}"
            ));
        }
        eprintln!("tether-bench: the gVisor rows are not measured: {why}");
    }
    let state = work.path().join("workflow");
    std::fs::create_dir_all(&state).map_err(|e| format!("{}: {e}", state.display()))?;
    Ok(Runners {
        programs: RunnerPrograms {
            host: program("kv-bench")?,
            // The same plugin build as the other rows (the `plugin` profile from run.sh).
            plugin: std::path::absolute(
                cli.plugin_dir
                    .as_deref()
                    .unwrap_or(&cli.bin_dir)
                    .join("kv-plugin"),
            )
            .map_err(|e| format!("kv-plugin: {e}"))?,
            step,
        },
        report: RunnerReport {
            counts: if cli.quick {
                RunnerCounts::QUICK
            } else {
                RunnerCounts::FULL
            },
            unavailable,
        },
        state,
    })
}

/// One round of the runners' rows (if they can run), the order rotating with the round.
fn runner_round(cli: &Cli, runners: &Runners, round: u32, rounds: u32, results: &mut Results) {
    if runners.report.unavailable.is_some() {
        return;
    }
    let counts = &runners.report.counts;
    let timeout = std::time::Duration::from_secs(cli.timeout);
    // Rotate within each pair/triple so neither runner always goes first.
    let mut all = RunnerMeasurement::all();
    if round % 2 == 1 {
        for chunk in all.chunks_mut(2).take(2) {
            chunk.reverse();
        }
        for chunk in all[4..].chunks_mut(3) {
            chunk.rotate_left(1);
        }
    }
    for measurement in all {
        eprint!(
            "round {}/{rounds}: {:<16} {:<17} ",
            round + 1,
            measurement.name(counts),
            measurement.system()
        );
        let outcome = tether_bench::run::run_runner(
            measurement,
            &runners.programs,
            counts,
            &runners.state,
            timeout,
        );
        record(results, measurement.system(), round, outcome);
    }
}

/// The systems under test; every program must exist.
fn systems(cli: &Cli, go_plugin_version: Option<&str>) -> Result<Vec<System>, String> {
    let need = |dir: &Path, name: &str| -> Result<PathBuf, String> {
        let path = std::path::absolute(dir.join(name))
            .map_err(|e| format!("{}: {e}", dir.join(name).display()))?;
        if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "{} is missing; bash bench/run.sh builds it",
                path.display()
            ))
        }
    };
    let plugin_dir = cli.plugin_dir.as_deref().unwrap_or(&cli.bin_dir);
    let mut systems = vec![
        System {
            id: report::TETHER,
            label: "tether".into(),
            kind: SystemKind::KvHost {
                host: need(&cli.bin_dir, "kv-bench")?,
                plugin: need(plugin_dir, "kv-plugin")?,
                counter: Some(CounterPrograms {
                    host: need(&cli.bin_dir, "counter-bench")?,
                    plugin: need(plugin_dir, "counter-plugin")?,
                    host_args: Vec::new(),
                    multiplex: true,
                }),
                tether: true,
                multiplex: true,
            },
        },
        System {
            id: report::BASELINE,
            label: format!("go-plugin {}", go_plugin_version.unwrap_or("v1.8")),
            kind: SystemKind::KvHost {
                host: need(&cli.go_peers, "kvhost-v18")?,
                plugin: need(&cli.go_peers, "kvplugin-v18")?,
                counter: Some(CounterPrograms {
                    host: need(&cli.go_peers, "counterhost-v18")?,
                    plugin: need(&cli.go_peers, "counterplugin-v18")?,
                    host_args: Vec::new(),
                    multiplex: true,
                }),
                tether: false,
                multiplex: true,
            },
        },
        System {
            id: report::FLOOR,
            label: "floor (raw socket)".into(),
            kind: SystemKind::Floor {
                pingpong: need(&cli.bin_dir, "pingpong")?,
            },
        },
    ];
    if !cli.no_go101 {
        systems.push(System {
            id: "go101",
            label: "go-plugin 1.0.1 (Debian)".into(),
            kind: SystemKind::KvHost {
                host: need(&cli.go_peers, "kvhost-v101")?,
                plugin: need(&cli.go_peers, "kvplugin-v101")?,
                // go-plugin ≤ 1.4.3's broker dial-backs fail under AutoMTLS.
                counter: Some(CounterPrograms {
                    host: need(&cli.go_peers, "counterhost-v101")?,
                    plugin: need(&cli.go_peers, "counterplugin-v101")?,
                    host_args: vec!["--plaintext".into()],
                    // go-plugin 1.0.1 predates the multiplexed broker (1.6).
                    multiplex: false,
                }),
                tether: false,
                multiplex: false,
            },
        });
    }
    Ok(systems)
}

/// The version a `go.mod` requires of `module`.
fn module_version(go_mod: &str, module: &str) -> Option<String> {
    go_mod.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        let first = words.next()?;
        let (name, version) = if first == "require" {
            (words.next()?, words.next()?)
        } else {
            (first, words.next()?)
        };
        (name == module).then(|| version.to_owned())
    })
}

/// Versions of the toolchains and libraries involved, best effort.
fn tools(go_plugin: Option<&str>, grpc: Option<&str>) -> Vec<String> {
    let first_line = |program: &str, arg: &str| -> Option<String> {
        let out = Command::new(program).arg(arg).output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines().next().map(str::to_owned)
    };
    let mut tools = Vec::new();
    tools.extend(first_line("rustc", "-V"));
    tools.push("tonic 0.14, rustls 0.23 (release build; plugins in the `plugin` profile, statically linked where run.sh can; current-thread runtimes)".into());
    tools.extend(first_line("go", "version"));
    tools.push(format!(
        "go-plugin {} with grpc-go {} (primary baseline)",
        go_plugin.unwrap_or("?"),
        grpc.unwrap_or("?")
    ));
    tools.extend(first_line("/usr/lib/go-1.19/bin/go", "version"));
    tools.push("Debian go-plugin 1.0.1 with grpc 1.33".into());
    tools
}

/// Now, as `2026-11-30 23:40 UTC`.
fn now_utc() -> String {
    let format = time::macros::format_description!("[year]-[month]-[day] [hour]:[minute] UTC");
    time::OffsetDateTime::now_utc()
        .format(&format)
        .unwrap_or_else(|_| "unknown date".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_versions_come_from_require_blocks_and_lines() {
        let go_mod = "module x\n\nrequire github.com/a/b v1.2.3\n\nrequire (\n\tgithub.com/hashicorp/go-plugin v1.8.0\n\tgoogle.golang.org/grpc v1.85.0 // indirect\n)\n";
        assert_eq!(
            module_version(go_mod, "github.com/hashicorp/go-plugin").as_deref(),
            Some("v1.8.0")
        );
        assert_eq!(
            module_version(go_mod, "google.golang.org/grpc").as_deref(),
            Some("v1.85.0")
        );
        assert_eq!(
            module_version(go_mod, "github.com/a/b").as_deref(),
            Some("v1.2.3")
        );
        assert_eq!(module_version(go_mod, "nothing"), None);
    }
}
