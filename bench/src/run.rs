//! Running one measurement of one system: the command line, and reading its output.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use wait_timeout::ChildExt as _;

use crate::line::{Line, LineError};
use crate::suite::{
    Counts, Measurement, Pinned, RunnerCounts, RunnerMeasurement, RunnerPrograms, System,
    SystemKind, Value,
};

/// Why a measurement run produced no values.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The program could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The program exited unsuccessfully.
    #[error("{program} exited with {status}: {stderr}")]
    Exit {
        /// The program.
        program: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The end of its stderr.
        stderr: String,
    },
    /// Its output line was unusable.
    #[error("{program} printed {stdout:?}: {source}")]
    Output {
        /// The program.
        program: String,
        /// What it printed (truncated).
        stdout: String,
        /// The parse error.
        source: LineError,
    },
    /// The program ran longer than the timeout and was killed.
    #[error("{program} took longer than {timeout:?} and was killed (raise it with --timeout)")]
    Timeout {
        /// The program.
        program: String,
        /// The limit.
        timeout: Duration,
    },
    /// A path cannot go into `KV_PLUGIN`/`COUNTER_PLUGIN`, which go-plugin's hosts split on
    /// whitespace.
    #[error("{0} contains whitespace or is not UTF-8; KV_PLUGIN/COUNTER_PLUGIN cannot carry it")]
    UnusablePath(String),
}

/// Most bytes of a failed program's stderr quoted in a [`RunError`].
pub const MAX_QUOTED_STDERR: usize = 2_000;

/// How long one measurement run may take before it is killed, so a hung plugin or host
/// cannot stall the whole benchmark. The slowest full-size run (100 go-plugin launches for the
/// host-RSS measurement) takes well under a minute. Override with `tether-bench --timeout`.
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(600);

/// The command that makes `measurement` on `system`, run in `work_dir`.
///
/// # Errors
/// [`RunError::UnusablePath`] for a plugin path `KV_PLUGIN` cannot carry.
pub fn command(
    system: &System,
    measurement: Measurement,
    counts: &Counts,
    work_dir: &Path,
) -> Result<Command, RunError> {
    let args = measurement.args(counts);
    let env_path = |plugin: &Path| -> Result<String, RunError> {
        plugin
            .to_str()
            .filter(|p| !p.chars().any(char::is_whitespace))
            .map(str::to_owned)
            .ok_or_else(|| RunError::UnusablePath(plugin.display().to_string()))
    };
    let mut cmd = match (&system.kind, measurement) {
        (
            SystemKind::KvHost {
                counter: Some(counter),
                ..
            },
            Measurement::Callback { .. },
        ) => {
            let mut cmd = Command::new(&counter.host);
            cmd.args(&counter.host_args)
                .args(measurement.host_args())
                .arg("measure")
                .args(&args)
                .env("COUNTER_PLUGIN", env_path(&counter.plugin)?);
            cmd
        }
        (SystemKind::KvHost { host, plugin, .. }, _) => {
            let mut cmd = Command::new(host);
            cmd.args(measurement.host_args())
                .arg("measure")
                .args(&args)
                .env("KV_PLUGIN", env_path(plugin)?);
            cmd
        }
        (SystemKind::Floor { pingpong }, _) => {
            let mut cmd = Command::new(pingpong);
            cmd.args(&args);
            cmd
        }
    };
    cmd.current_dir(work_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Ok(cmd)
}

/// Runs `measurement` on `system` and evaluates its output; kills the program after
/// `timeout`.
///
/// # Errors
/// A [`RunError`] when the program fails, hangs or prints an unusable line.
pub fn run(
    system: &System,
    measurement: Measurement,
    counts: &Counts,
    work_dir: &Path,
    timeout: Duration,
) -> Result<Vec<(&'static str, Value)>, RunError> {
    let cmd = command(system, measurement, counts, work_dir)?;
    let program = format!("{} {}", system.id, measurement.name());
    let stdout = output_of(cmd, &program, timeout)?;
    evaluated(program, &stdout, |line| measurement.evaluate(line))
}

/// Runs `measurement` on `system` pinned as `pinned` says — the program on its host CPU (set
/// between fork and exec, so everything it starts inherits it), its plugin moved to the
/// plugin CPU, if any — with `extra` driver options after the measurement's arguments; kills
/// it after `timeout`.
///
/// # Errors
/// A [`RunError`] when the program fails, hangs or prints an unusable line.
pub fn run_pinned(
    system: &System,
    measurement: Measurement,
    counts: &Counts,
    work_dir: &Path,
    timeout: Duration,
    pinned: &Pinned,
    extra: &[&str],
) -> Result<Vec<(&'static str, Value)>, RunError> {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = command(system, measurement, counts, work_dir)?;
    cmd.args(pinned.args()).args(extra);
    let host = pinned.host;
    // SAFETY: the hook makes one system call (sched_setaffinity on a stack-allocated set):
    // async-signal-safe, no allocation, no lock.
    unsafe { cmd.pre_exec(move || crate::affinity::pin_thread(0, &[host])) };
    let program = format!(
        "{} {} (host on CPU {host}, plugin on CPU {})",
        system.id,
        measurement.name(),
        pinned.plugin.unwrap_or(host)
    );
    let stdout = output_of(cmd, &program, timeout)?;
    evaluated(program, &stdout, |line| measurement.evaluate(line))
}

/// Runs one of the runners' measurements ([`RunnerMeasurement`]) and evaluates its output.
///
/// # Errors
/// A [`RunError`] when the program fails, hangs or prints an unusable line.
pub fn run_runner(
    measurement: RunnerMeasurement,
    programs: &RunnerPrograms,
    counts: &RunnerCounts,
    work_dir: &Path,
    timeout: Duration,
) -> Result<Vec<(&'static str, Value)>, RunError> {
    let cmd = measurement.command(programs, counts, work_dir);
    let program = format!("{} {}", measurement.system(), measurement.name(counts));
    let stdout = output_of(cmd, &program, timeout)?;
    evaluated(program, &stdout, |line| measurement.evaluate(line))
}

/// `program`'s one output line, evaluated; an unusable line is a [`RunError::Output`] quoting it.
fn evaluated(
    program: String,
    stdout: &str,
    evaluate: impl FnOnce(&Line) -> Result<Vec<(&'static str, Value)>, LineError>,
) -> Result<Vec<(&'static str, Value)>, RunError> {
    Line::parse(stdout)
        .and_then(|line| evaluate(&line))
        .map_err(|source| RunError::Output {
            program,
            stdout: stdout.chars().take(200).collect(),
            source,
        })
}

/// Runs `cmd` (called `program` in errors) and returns its stdout; kills it after `timeout`.
///
/// # Errors
/// A [`RunError`] when the program cannot start, fails or hangs.
pub fn output_of(mut cmd: Command, program: &str, timeout: Duration) -> Result<String, RunError> {
    let program = program.to_owned();
    let spawn_error = |source| RunError::Spawn {
        program: program.clone(),
        source,
    };
    let mut child = cmd.spawn().map_err(spawn_error)?;
    // Drain both pipes on threads so a chatty program never blocks on a full pipe.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let status = match child.wait_timeout(timeout).map_err(spawn_error)? {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(RunError::Timeout { program, timeout });
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    let stdout = String::from_utf8_lossy(&stdout).into_owned();
    if !status.success() {
        let stderr = String::from_utf8_lossy(&stderr);
        let start = stderr.len().saturating_sub(MAX_QUOTED_STDERR);
        let start = (start..=stderr.len())
            .find(|&i| stderr.is_char_boundary(i))
            .unwrap_or(stderr.len());
        return Err(RunError::Exit {
            program,
            status,
            stderr: stderr[start..].trim().replace('\n', " | "),
        });
    }
    Ok(stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_gets_measure_its_arguments_and_the_plugin_in_kv_plugin() {
        let system = System {
            id: "tether",
            label: "tether".into(),
            kind: SystemKind::KvHost {
                host: "/bin/kv-bench".into(),
                plugin: "/bin/kv-plugin".into(),
                counter: Some(crate::suite::CounterPrograms {
                    host: "/bin/counter-bench".into(),
                    plugin: "/bin/counter-plugin".into(),
                    host_args: vec!["--plaintext".into()],
                    multiplex: true,
                }),
                tether: true,
                multiplex: true,
            },
        };
        let cmd = command(
            &system,
            Measurement::Unary { size: 64 },
            &Counts::QUICK,
            Path::new("/tmp"),
        )
        .unwrap();
        let args: Vec<_> = cmd.get_args().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            args,
            [
                "measure", "unary", "--calls", "50", "--warmup", "5", "--size", "64"
            ]
        );
        let env: Vec<_> = cmd.get_envs().collect();
        assert_eq!(
            env,
            [(
                std::ffi::OsStr::new("KV_PLUGIN"),
                Some(std::ffi::OsStr::new("/bin/kv-plugin"))
            )]
        );
    }

    #[test]
    fn a_callback_runs_the_counter_host_with_its_options_and_the_plugin_in_counter_plugin() {
        let system = System {
            id: "go101",
            label: "go".into(),
            kind: SystemKind::KvHost {
                host: "/bin/kvhost".into(),
                plugin: "/bin/kvplugin".into(),
                counter: Some(crate::suite::CounterPrograms {
                    host: "/bin/counterhost".into(),
                    plugin: "/bin/counterplugin".into(),
                    host_args: vec!["--plaintext".into()],
                    multiplex: false,
                }),
                tether: false,
                multiplex: false,
            },
        };
        let mode = crate::suite::CallbackMode::Default;
        let cmd = command(
            &system,
            Measurement::Callback { mode },
            &Counts::QUICK,
            Path::new("/tmp"),
        )
        .unwrap();
        assert_eq!(cmd.get_program(), "/bin/counterhost");
        let args: Vec<_> = cmd.get_args().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            args,
            [
                "--plaintext",
                "measure",
                "callback",
                "--calls",
                "5",
                "--warmup",
                "1"
            ]
        );
        let env: Vec<_> = cmd.get_envs().collect();
        assert_eq!(
            env,
            [(
                std::ffi::OsStr::new("COUNTER_PLUGIN"),
                Some(std::ffi::OsStr::new("/bin/counterplugin"))
            )]
        );
    }

    #[test]
    fn launch_with_confinement_off_passes_the_sandbox_option_before_measure() {
        let system = System {
            id: "tether",
            label: "tether".into(),
            kind: SystemKind::KvHost {
                host: "/bin/kv-bench".into(),
                plugin: "/bin/kv-plugin".into(),
                counter: None,
                tether: true,
                multiplex: true,
            },
        };
        let cmd = command(
            &system,
            Measurement::LaunchConfinementOff,
            &Counts::QUICK,
            Path::new("/tmp"),
        )
        .unwrap();
        let args: Vec<_> = cmd.get_args().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            args,
            ["--sandbox", "off", "measure", "launch", "--count", "2"]
        );
    }

    #[test]
    fn a_plugin_path_with_a_space_is_refused_before_anything_runs() {
        let system = System {
            id: "go18",
            label: "go".into(),
            kind: SystemKind::KvHost {
                host: "/bin/kvhost".into(),
                plugin: "/my dir/kvplugin".into(),
                counter: None,
                tether: false,
                multiplex: false,
            },
        };
        assert!(matches!(
            command(
                &system,
                Measurement::Launch,
                &Counts::QUICK,
                Path::new("/tmp")
            ),
            Err(RunError::UnusablePath(_))
        ));
    }

    #[test]
    fn a_failing_program_is_reported_with_its_stderr() {
        let system = System {
            id: "floor",
            label: "floor".into(),
            kind: SystemKind::Floor {
                pingpong: "/bin/false".into(),
            },
        };
        let err = run(
            &system,
            Measurement::Unary { size: 64 },
            &Counts::QUICK,
            Path::new("/"),
            DEFAULT_RUN_TIMEOUT,
        )
        .unwrap_err();
        assert!(matches!(err, RunError::Exit { .. }), "{err}");
    }

    #[test]
    fn a_program_that_outlives_the_timeout_is_killed_and_reported() {
        let system = System {
            id: "floor",
            label: "floor".into(),
            kind: SystemKind::Floor {
                pingpong: "/bin/sh".into(),
            },
        };
        // The command becomes `sh plugin-rss` in the work dir: a script that hangs.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("plugin-rss"), "exec sleep 30\n").unwrap();
        let err = run(
            &system,
            Measurement::PluginRss,
            &Counts::QUICK,
            dir.path(),
            Duration::from_millis(200),
        )
        .unwrap_err();
        // `run` returns only after the killed program was reaped.
        assert!(matches!(err, RunError::Timeout { .. }), "{err}");
    }
}
