//! `pingpong`: the raw two-process unix-socket floor for the benchmarks.
//!
//! It does what a plugin call does minus everything a plugin system adds: the parent binds a
//! unix socket in a private temporary directory, spawns itself as an echo child that connects
//! to it, and exchanges bytes with blocking reads and writes — no TLS, no HTTP/2, no protobuf,
//! no async runtime. Arguments and output lines match `kv-bench measure` / `kvhost measure`:
//!
//! ```text
//! pingpong launch --count L              samples_ns=…   spawn → connect → one 64 B exchange
//! pingpong unary --calls N [--warmup W] [--size B]  samples_ns=…   B-byte exchanges (default 64)
//! pingpong payload --size B --rounds K   bytes=… elapsed_ns=…   B bytes there, B bytes back
//! pingpong plugin-rss                    rss_kb=…       the echo child's VmRSS after one exchange
//! ```
//!
//! `--plugin-cpu N` (any mode) pins the echo child to CPU N before it connects, as
//! `kv-bench --plugin-cpu` pins its plugin; the parent's own placement is the caller's
//! (`taskset`, or the harness's `Placement`).

use std::io::{self, Read as _, Write as _};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};

/// Bytes per exchange for `launch`, `unary` and `plugin-rss`, like the KV hosts' 64-byte value.
const SMALL: usize = 64;

/// Untimed exchanges before `unary` starts timing, like the KV hosts' default.
const DEFAULT_WARMUP: u64 = 100;

#[derive(Debug, Parser)]
#[command(
    name = "pingpong",
    about = "Raw two-process unix-socket ping-pong (benchmark floor)"
)]
struct Cli {
    /// Pin the echo child to this CPU before it connects.
    #[arg(long, value_parser = tether_bench::affinity::parse_cpu, global = true)]
    plugin_cpu: Option<usize>,
    #[command(subcommand)]
    command: Mode,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Spawn → connect → one 64-byte exchange, COUNT times.
    Launch {
        /// Launches.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        count: u64,
    },
    /// Sequential SIZE-byte exchanges (64 bytes by default).
    Unary {
        /// Timed exchanges.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        calls: u64,
        /// Untimed exchanges first.
        #[arg(long, default_value_t = DEFAULT_WARMUP)]
        warmup: u64,
        /// Bytes each way.
        #[arg(long, default_value_t = SMALL as u64, value_parser = clap::value_parser!(u64).range(1..))]
        size: u64,
    },
    /// SIZE bytes to the child and SIZE bytes back, ROUNDS times after one untimed round.
    Payload {
        /// Bytes each way.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        size: u64,
        /// Timed rounds.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        rounds: u64,
    },
    /// The echo child's VmRSS after one 64-byte exchange.
    PluginRss,
    /// (internal) The echo child: connect to SOCKET, echo SIZE-byte messages until EOF.
    #[command(hide = true)]
    Echo {
        /// The parent's socket.
        socket: PathBuf,
        /// Message size.
        size: usize,
        /// The CPU to pin itself to first.
        #[arg(long)]
        cpu: Option<usize>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command, cli.plugin_cpu) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pingpong: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(mode: Mode, plugin_cpu: Option<usize>) -> io::Result<()> {
    let start = |size| Pair::start(size, plugin_cpu);
    let line = match mode {
        Mode::Echo { socket, size, cpu } => {
            if let Some(cpu) = cpu {
                tether_bench::affinity::pin_thread(0, &[cpu])?;
            }
            return echo(&socket, size);
        }
        Mode::Launch { count } => {
            let mut samples = Vec::new();
            for _ in 0..count {
                let t0 = Instant::now();
                let mut pair = start(SMALL)?;
                pair.exchange(&mut [0x5a; SMALL])?;
                samples.push(t0.elapsed());
                pair.finish()?;
            }
            format!("samples_ns={}", join_ns(&samples))
        }
        Mode::Unary {
            calls,
            warmup,
            size,
        } => {
            let size = usize::try_from(size).map_err(io::Error::other)?;
            let mut pair = start(size)?;
            let mut buf = vec![0x5a; size];
            for _ in 0..warmup {
                pair.exchange(&mut buf)?;
            }
            let mut samples = Vec::new();
            for _ in 0..calls {
                let t0 = Instant::now();
                pair.exchange(&mut buf)?;
                samples.push(t0.elapsed());
            }
            pair.finish()?;
            format!("samples_ns={}", join_ns(&samples))
        }
        Mode::Payload { size, rounds } => {
            let size = usize::try_from(size).map_err(io::Error::other)?;
            let mut pair = start(size)?;
            let mut buf = vec![0x5a; size];
            pair.exchange(&mut buf)?;
            let t0 = Instant::now();
            for _ in 0..rounds {
                pair.exchange(&mut buf)?;
            }
            let elapsed = t0.elapsed();
            pair.finish()?;
            let bytes = 2 * size as u128 * u128::from(rounds);
            format!("bytes={bytes} elapsed_ns={}", elapsed.as_nanos())
        }
        Mode::PluginRss => {
            let mut pair = start(SMALL)?;
            pair.exchange(&mut [0x5a; SMALL])?;
            let status = std::fs::read_to_string(format!("/proc/{}/status", pair.child.id()))?;
            let rss = status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().strip_suffix("kB"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| io::Error::other("no VmRSS line for the child"))?;
            pair.finish()?;
            format!("rss_kb={rss}")
        }
    };
    println!("{line}");
    Ok(())
}

/// The parent's end: a connected echo child.
struct Pair {
    child: Child,
    stream: UnixStream,
    /// Keeps the socket's directory until the pair is finished.
    _dir: tempfile::TempDir,
}

impl Pair {
    /// Binds a socket, spawns the echo child for `size`-byte messages (pinned to `cpu`, if
    /// given), accepts its connection.
    fn start(size: usize, cpu: Option<usize>) -> io::Result<Self> {
        let dir = tempfile::Builder::new().prefix("pingpong-").tempdir()?;
        let socket = dir.path().join("s");
        let listener = UnixListener::bind(&socket)?;
        let mut command = Command::new(std::env::current_exe()?);
        command.arg("echo").arg(&socket).arg(size.to_string());
        if let Some(cpu) = cpu {
            command.arg("--cpu").arg(cpu.to_string());
        }
        let child = command.stdin(Stdio::null()).spawn()?;
        let (stream, _) = listener.accept()?;
        Ok(Self {
            child,
            stream,
            _dir: dir,
        })
    }

    /// Sends `buf` and reads the echo back into it.
    fn exchange(&mut self, buf: &mut [u8]) -> io::Result<()> {
        self.stream.write_all(buf)?;
        self.stream.read_exact(buf)
    }

    /// Closes the connection (the child exits on EOF) and reaps the child.
    fn finish(self) -> io::Result<()> {
        let Self {
            mut child, stream, ..
        } = self;
        drop(stream);
        let status = child.wait()?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "the echo child exited with {status}"
            )))
        }
    }
}

/// The echo child: connects, then echoes `size`-byte messages until the parent closes.
fn echo(socket: &Path, size: usize) -> io::Result<()> {
    let mut stream = UnixStream::connect(socket)?;
    let mut buf = vec![0; size];
    loop {
        match stream.read_exact(&mut buf) {
            Ok(()) => stream.write_all(&buf)?,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// Durations as comma-separated nanoseconds.
fn join_ns(samples: &[Duration]) -> String {
    samples
        .iter()
        .map(|d| d.as_nanos().to_string())
        .collect::<Vec<_>>()
        .join(",")
}
