//! Nothing of a launch is left when its host or its plugin dies at any moment (issue 22, item
//! 7): no process, file or directory, unix socket, pids cgroup or secret file. A secret file
//! delivered under `/dev/shm` was found 20 minutes after a library host had exited: a launch
//! wrote its secrets before the janitor knew their directory, and asked a Python plugin's
//! interpreter where it lives (up to its query timeout) in between. Here a host built on the
//! library (`secret-host`) is killed (`SIGKILL`) the moment the secret it delivers is written,
//! and then at random points of launch, call and shutdown, the host or its plugin — for a root
//! host and a non-root host.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tether_tests::bins::KV_PLUGIN;
use tether_tests::host_user::root_and_unprivileged;
use tether_tests::leftovers::{self, Workspace};

const SECRET_HOST: &str = env!("CARGO_BIN_EXE_secret-host");
/// The length of the secret `secret-host` delivers (`leftover-4e1f`).
const SECRET_LEN: u64 = 13;
/// How long a host may take to write its secret, to say an event, or to exit, and its
/// janitor to clean up.
const DEADLINE: Duration = Duration::from_secs(30);
/// How many launches the chaos test kills something in, per host user (override:
/// `TETHER_CHAOS_ITERATIONS`).
const CHAOS_ITERATIONS: u64 = 40;
/// The chaos test starts no iteration after this long, per host user.
const CHAOS_TIME: Duration = Duration::from_secs(60);
/// Set to replay the chaos test with a seed it printed (`TETHER_CHAOS_SEED=N`).
const CHAOS_SEED_ENV: &str = "TETHER_CHAOS_SEED";
/// A system Python any user can run (the interpreter query is what keeps a launch between its
/// secret's write and its spawn longest).
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

/// A plugin for `secret-host`: its sandbox allowances (`--allow-exec DIR`, `--allow-read
/// DIR`) and its command.
struct Plugin {
    name: &'static str,
    allow: Vec<String>,
    command: Vec<String>,
}

/// Starts `secret-host` in `work` with `plugin`.
fn secret_host(work: &Workspace, plugin: &Plugin) -> Child {
    Command::new(SECRET_HOST)
        .args(&plugin.allow)
        .arg(&work.delivery)
        .arg(&work.private_dir_base)
        .args(&plugin.command)
        .current_dir(work.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for every janitor of a host to finish and for the processes it killed to end (a
/// killed process takes a moment to exit; the janitor does not wait for it unless it empties
/// a cgroup), then asserts that nothing is left.
fn assert_nothing_left(
    work: &Workspace,
    host: u32,
    janitors: &[OwnedFd],
    processes: &[(u32, OwnedFd)],
    what: &str,
) {
    for janitor in janitors {
        assert!(
            leftovers::exited(janitor, DEADLINE),
            "{what}: a janitor did not finish within {DEADLINE:?}"
        );
    }
    for (pid, process) in processes {
        assert!(
            leftovers::exited(process, DEADLINE),
            "{what}: process {pid} of the launch still runs {DEADLINE:?} after its janitor finished"
        );
    }
    let left = work.left(host);
    assert!(left.is_empty(), "{what}: left behind: {left:#?}");
}

#[test]
fn a_host_killed_after_writing_a_secret_and_before_its_plugin_runs_leaves_nothing() {
    let _run = root_and_unprivileged(
        "a_host_killed_after_writing_a_secret_and_before_its_plugin_runs_leaves_nothing",
    );
    assert!(
        Path::new(SYSTEM_PYTHON).is_file(),
        "{SYSTEM_PYTHON} is needed (apt-get install python3)"
    );
    let work = Workspace::new();
    let script = work.path().join("plugin.py");
    std::fs::write(&script, "import time\ntime.sleep(60)\n").unwrap();
    // Without a world: in one, the secret is written into the world's own tmpfs, never on a
    // host path, so there is no host file to be left (the layers are the fallback this guards).
    let plugin = Plugin {
        name: "python",
        allow: vec!["--no-world".to_owned()],
        command: vec![SYSTEM_PYTHON.to_owned(), script.display().to_string()],
    };
    for attempt in 0..3 {
        let mut host = secret_host(&work, &plugin);
        let secret = leftovers::wait_for_secret(&work.delivery, "token", SECRET_LEN, DEADLINE);
        let pid = host.id();
        let killed = leftovers::kill_host(&mut host);
        // The moment aimed at: the secret is written and the plugin does not run yet (its
        // interpreter is being asked where it lives). Else try again.
        let plugin_ran = killed
            .children
            .iter()
            .any(|(_, cmdline)| cmdline.contains("plugin.py") && !cmdline.contains(" -c "));
        assert_nothing_left(
            &work,
            pid,
            &killed.janitors,
            &killed.processes,
            &format!(
                "the host was killed with {} written and {:?} running",
                secret.display(),
                killed.children
            ),
        );
        if !plugin_ran {
            return;
        }
        eprintln!("attempt {attempt}: the plugin ran already; again");
    }
    panic!("the host was never caught between its secret's write and its plugin's spawn");
}

/// A small, seeded generator (`SplitMix64`): the same seed replays the same kills.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Where in a host's life the chaos test kills.
#[derive(Debug, Clone, Copy)]
enum Point {
    /// While it starts its plugin (after the host process started).
    Launch,
    /// While it makes call number `n` (0-based).
    Call(u64),
    /// While it shuts its plugin down (after its stdin closed).
    Shutdown,
}

/// What the chaos test kills.
#[derive(Debug, Clone, Copy)]
enum Victim {
    Host,
    Plugin,
}

/// One iteration of the chaos test, drawn from the seed.
#[derive(Debug)]
struct Plan {
    plugin: usize,
    calls: u64,
    point: Point,
    victim: Victim,
    /// How long after the point's event the kill comes.
    delay: Duration,
}

impl Plan {
    fn draw(rng: &mut Rng, plugins: usize) -> Self {
        let plugin = usize::try_from(rng.below(plugins as u64)).unwrap();
        let calls = rng.below(3);
        let point = match rng.below(3) {
            0 => Point::Launch,
            1 if calls > 0 => Point::Call(rng.below(calls)),
            _ => Point::Shutdown,
        };
        let victim = if rng.below(2) == 0 {
            Victim::Host
        } else {
            Victim::Plugin
        };
        // A launch takes tens of milliseconds, a call or a shutdown a few.
        let max_micros = match point {
            Point::Launch => 150_000,
            Point::Call(_) => 3_000,
            Point::Shutdown => 10_000,
        };
        Self {
            plugin,
            calls,
            point,
            victim,
            delay: Duration::from_micros(rng.below(max_micros)),
        }
    }
}

/// A running `secret-host` and the lines it said.
struct Driven {
    host: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    plugin: Option<u32>,
    janitors: Vec<OwnedFd>,
    /// The launch's processes: its plugin, what was killed.
    processes: Vec<(u32, OwnedFd)>,
}

impl Driven {
    fn start(work: &Workspace, plugin: &Plugin) -> Self {
        let mut host = secret_host(work, plugin);
        let stdin = host.stdin.take();
        let stdout = host.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self {
            host,
            stdin,
            lines,
            plugin: None,
            janitors: Vec::new(),
            processes: Vec::new(),
        }
    }

    /// Waits for the next line; `None` when the host ended without saying more.
    fn said(&mut self) -> Option<String> {
        let line = self.lines.recv_timeout(DEADLINE).ok()?;
        if let Some(pid) = line.strip_prefix("started ") {
            self.plugin = pid.parse().ok();
            if let Some(pid) = self.plugin
                && let Some(pidfd) = leftovers::pidfd(pid)
            {
                self.processes.push((pid, pidfd));
            }
        }
        Some(line)
    }

    fn send(&mut self, line: &str) {
        if let Some(stdin) = &mut self.stdin {
            // A host that died reads nothing: that is what some iterations are about.
            let _ = writeln!(stdin, "{line}");
        }
    }

    /// Notes the host's janitors (they clean up once it is gone, however it ends).
    fn note_janitors(&mut self) {
        for (pid, cmdline) in leftovers::children(self.host.id()) {
            if leftovers::is_janitor(&cmdline)
                && let Some(pidfd) = leftovers::pidfd(pid)
            {
                self.janitors.push(pidfd);
            }
        }
    }
}

/// Runs one iteration: drives the host to the plan's point, kills the victim, lets the host
/// end, waits for its janitors and asserts that nothing is left.
fn chaos_iteration(work: &Workspace, plugin: &Plugin, plan: &Plan, what: &str) {
    let mut driven = Driven::start(work, plugin);
    let pid = driven.host.id();
    let mut calls_made = 0;
    match plan.point {
        Point::Launch => {}
        Point::Call(n) => {
            if driven.said().is_some_and(|l| l.starts_with("started")) {
                while calls_made <= n {
                    driven.send("call");
                    calls_made += 1;
                    if calls_made <= n && driven.said().is_none() {
                        break;
                    }
                }
            }
        }
        Point::Shutdown => {
            if driven.said().is_some_and(|l| l.starts_with("started")) {
                while calls_made < plan.calls {
                    driven.send("call");
                    calls_made += 1;
                    if driven.said().is_none() {
                        break;
                    }
                }
            }
            driven.stdin = None;
        }
    }
    // The random point: this long after the event (not a synchronisation — any moment must
    // leave nothing).
    std::thread::sleep(plan.delay);
    match plan.victim {
        Victim::Host => {
            let killed = leftovers::kill_host(&mut driven.host);
            driven.janitors.extend(killed.janitors);
            driven.processes.extend(killed.processes);
        }
        Victim::Plugin => {
            driven.note_janitors();
            // Before its handshake the plugin's pid is not said: its host's other children
            // (the plugin, or an interpreter asked where it lives) are the victims then.
            let victims: Vec<u32> = match driven.plugin {
                Some(plugin) => vec![plugin],
                None => leftovers::children(pid)
                    .into_iter()
                    .filter(|(_, cmdline)| !leftovers::is_janitor(cmdline))
                    .map(|(pid, _)| pid)
                    .collect(),
            };
            for victim in victims {
                if let Some(pidfd) = leftovers::pidfd(victim) {
                    driven.processes.push((victim, pidfd));
                }
                let _ = leftovers::kill(victim);
            }
            // The host goes on: the rest of its calls, then its shutdown.
            if driven.plugin.is_none() && matches!(plan.point, Point::Launch) {
                let _ = driven.said();
            }
            while driven.plugin.is_some() && calls_made < plan.calls && driven.stdin.is_some() {
                driven.send("call");
                calls_made += 1;
                let _ = driven.said();
            }
            driven.note_janitors();
            driven.stdin = None;
            let host = leftovers::pidfd(pid);
            assert!(
                host.as_ref()
                    .is_none_or(|pidfd| leftovers::exited(pidfd, DEADLINE)),
                "{what}: the host did not end within {DEADLINE:?} after its plugin was killed"
            );
            driven.host.wait().unwrap();
        }
    }
    let mut stderr = String::new();
    if let Some(mut pipe) = driven.host.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    assert_nothing_left(
        work,
        pid,
        &driven.janitors,
        &driven.processes,
        &format!("{what}; the host's stderr: {stderr}"),
    );
}

/// The plugins the chaos test launches: the Rust KV plugin, and the Python one where the
/// Python peer is usable by this user.
fn chaos_plugins() -> Vec<Plugin> {
    let mut plugins = vec![Plugin {
        name: "rust",
        allow: Vec::new(),
        command: vec![KV_PLUGIN.path().to_owned()],
    }];
    if let Ok(python) = tether_tests::python::python() {
        let mut allow = Vec::new();
        for prefix in &python.prefixes {
            allow.extend(["--allow-exec".to_owned(), prefix.display().to_string()]);
        }
        allow.extend(["--allow-read".to_owned(), python.sdk.display().to_string()]);
        plugins.push(Plugin {
            name: "python",
            allow,
            command: vec![
                python.interpreter.display().to_string(),
                python.kv_plugin.display().to_string(),
            ],
        });
    }
    plugins
}

#[test]
fn hosts_and_plugins_killed_at_random_points_of_launch_call_and_shutdown_leave_nothing() {
    let run = root_and_unprivileged(
        "hosts_and_plugins_killed_at_random_points_of_launch_call_and_shutdown_leave_nothing",
    );
    let seed = std::env::var(CHAOS_SEED_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let iterations = std::env::var("TETHER_CHAOS_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(CHAOS_ITERATIONS);
    let plugins = chaos_plugins();
    eprintln!(
        "chaos ({:?} host): seed {seed} ({CHAOS_SEED_ENV}={seed} replays it), plugins {:?}",
        run.host,
        plugins.iter().map(|p| p.name).collect::<Vec<_>>()
    );
    let started = Instant::now();
    let mut done = 0;
    for iteration in 0..iterations {
        if started.elapsed() > CHAOS_TIME {
            break;
        }
        let mut rng = Rng(seed ^ iteration.wrapping_mul(0xA24B_AED4_963E_E407));
        let plan = Plan::draw(&mut rng, plugins.len());
        let plugin = &plugins[plan.plugin];
        let what = format!(
            "chaos iteration {iteration} of seed {seed} ({CHAOS_SEED_ENV}={seed}, {:?} host): {} plugin, {plan:?}",
            run.host, plugin.name
        );
        let work = Workspace::new();
        chaos_iteration(&work, plugin, &plan, &what);
        done += 1;
    }
    eprintln!(
        "chaos ({:?} host): {done} iterations in {:?}, nothing left",
        run.host,
        started.elapsed()
    );
    assert!(done > 0, "no iteration ran");
}
