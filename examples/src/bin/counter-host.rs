//! Counter host: go-plugin's `examples/bidirectional` host, written with `tether-broker`.
//!
//! ```text
//! COUNTER_PLUGIN="<command> [args]" counter-host [--plaintext] [--multiplex] put KEY N   # adds N to KEY
//! COUNTER_PLUGIN="<command> [args]" counter-host [--plaintext] [--multiplex] get KEY     # prints the number
//! COUNTER_PLUGIN="<command> [args]" counter-host [--plaintext] [--multiplex] bench --calls N [--compare-modes]
//! COUNTER_PLUGIN="<command> [args]" counter-host [--plaintext] [--multiplex] measure callback --calls N [--warmup W]
//! ```
//!
//! `put` serves `AddHelper` on a fresh broker id for the duration of the call and passes the id
//! as `add_server`; the plugin dials it and asks the host to add. With `--host-service` the
//! host instead registers `AddHelper` once as a host service and sends `add_server` 0: the
//! (tether) plugin reaches it without an id. AutoMTLS unless
//! `--plaintext` (needed for go-plugin ≤ 1.4.3 plugins, including Debian's 1.0.1, whose broker
//! dials back to the host fail under AutoMTLS). A script plugin whose interpreter is outside the
//! system paths (pyenv, virtualenv) needs `--allow-exec DIR` (and `--allow-read DIR` for its
//! sources) to run under the default confinement. `--multiplex` offers go-plugin's multiplexed
//! broker (one connection for the main calls and all callbacks; plugins that do not accept it
//! run in the default mode). `COUNTER_HOST_LOG` sets the log filter
//! (default `warn`). Exit status: 0 ok, 1 error, 2 usage.
//!
//! `bench` prints `broker=… unary_us_p50=… unary_us_p99=… callback_us_p50=… callback_us_p99=…
//! [host_service_us_p50=… host_service_us_p99=…]`: a plain `Get`; a `Put` whose `AddHelper` is
//! served on a fresh id per call, as go-plugin's example does (host→plugin→host→plugin→host,
//! including the listener, the ConnInfo exchange and the plugin's dial with its TLS handshake);
//! and (with `--host-service`) a `Put` through the host service, whose connection the plugin
//! keeps (the round trip without connection set-up). The three are interleaved. `broker=` says
//! which broker mode was negotiated. With `--compare-modes` a second plugin is started with
//! multiplexing offered and measured interleaved with the first, in the same run; its keys
//! start with `mux_`.
//!
//! `measure callback` prints raw samples for the `tether-bench` harness (issue 6) in one line,
//! `unary_ns=… callback_ns=…` (comma-separated nanoseconds): after W untimed pairs, N timed
//! pairs of a plain `Get` and a `Put` whose `AddHelper` is served on a fresh broker id (as
//! `bench`), interleaved so both see the same load. `tests/go/counterhost measure callback`
//! takes the same arguments, makes the same calls and prints the same keys.

use std::error::Error;
use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use tether_broker::{GrpcBroker, HandshakeConfig, PluginClient};
use tether_examples::counter::add_helper_server::{AddHelper, AddHelperServer};
use tether_examples::counter::counter_client::CounterClient;
use tether_examples::counter::{GetRequest, PutRequest, SumRequest, SumResponse};
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

#[derive(Debug, Parser)]
#[command(
    name = "counter-host",
    about = "Runs the counter plugin named by $COUNTER_PLUGIN (go-plugin's examples/bidirectional host)"
)]
struct Cli {
    /// Turn AutoMTLS off (for go-plugin ≤ 1.4.3 plugins).
    #[arg(long, global = true)]
    plaintext: bool,
    /// Serve AddHelper as a host service and send `add_server` 0 (tether plugins only).
    #[arg(long, global = true)]
    host_service: bool,
    /// Offer go-plugin's multiplexed broker (PLUGIN_MULTIPLEX_GRPC).
    #[arg(long, global = true)]
    multiplex: bool,
    /// Let the confined plugin read and execute below DIR too: an interpreter outside the
    /// system paths, e.g. a pyenv or virtualenv Python (repeatable).
    #[arg(long = "allow-exec", value_name = "DIR", global = true)]
    allow_exec: Vec<std::path::PathBuf>,
    /// Let the confined plugin read below DIR too, e.g. a script plugin's sources (repeatable).
    #[arg(long = "allow-read", value_name = "DIR", global = true)]
    allow_read: Vec<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Add N to the number stored under KEY (the plugin calls back to add).
    Put {
        /// The key.
        key: String,
        /// The number to add.
        #[arg(allow_negative_numbers = true)]
        value: i64,
    },
    /// Print the number stored under KEY.
    Get {
        /// The key.
        key: String,
    },
    /// Measure a callback round trip against a plain call; prints one line.
    Bench {
        /// Calls per measurement.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        calls: u64,
        /// Also start a plugin with multiplexing offered and measure both, interleaved.
        #[arg(long)]
        compare_modes: bool,
    },
    /// Print raw measurements of one metric for the `tether-bench` harness (one line).
    Measure {
        #[command(subcommand)]
        metric: Metric,
    },
}

/// One metric of `counter-host measure`.
#[derive(Debug, Subcommand)]
enum Metric {
    /// Interleaved plain `Get`s and `Put`s carrying one callback: `unary_ns=… callback_ns=…`.
    Callback {
        /// Timed pairs.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        calls: u64,
        /// Untimed pairs first (connection and allocator warm-up).
        #[arg(long, default_value_t = DEFAULT_WARMUP_PAIRS)]
        warmup: u64,
    },
}

/// Untimed `Get` + `Put` pairs before `measure callback` starts timing.
const DEFAULT_WARMUP_PAIRS: u64 = 20;

type BoxError = Box<dyn Error + Send + Sync>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("COUNTER_HOST_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    // Current-thread, as kv-host (measured faster for one plugin connection).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("counter-host: error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err((error, code)) => {
            eprintln!(
                "counter-host: error: {}",
                tether_examples::error_chain(&*error)
            );
            ExitCode::from(code)
        }
    }
}

/// The host's adder, served to the plugin on broker ids.
struct Adder;

#[tonic::async_trait]
impl AddHelper for Adder {
    async fn sum(&self, request: Request<SumRequest>) -> Result<Response<SumResponse>, Status> {
        let SumRequest { a, b } = request.into_inner();
        let r = a
            .checked_add(b)
            .ok_or_else(|| Status::out_of_range(format!("{a} + {b} overflows a 64-bit integer")))?;
        Ok(Response::new(SumResponse { r }))
    }
}

/// `Put` as go-plugin's example does it: `AddHelper` served on a fresh id for this call only.
async fn put(
    broker: &GrpcBroker,
    counter: &mut CounterClient<Channel>,
    key: &str,
    value: i64,
) -> Result<(), BoxError> {
    let id = broker.next_id();
    let served = broker
        .accept_and_serve(id, AddHelperServer::new(Adder))
        .await?;
    let result = counter
        .put(PutRequest {
            add_server: id,
            key: key.to_owned(),
            value,
        })
        .await;
    drop(served);
    result.map_err(|status| format!("put {key:?} failed (plugin answered {status})"))?;
    Ok(())
}

async fn run(cli: Cli) -> Result<(), (BoxError, u8)> {
    let (program, args) = plugin_command().map_err(|e| (e, 2))?;
    let start = |multiplex: bool| {
        let mut builder = PluginClient::builder(&program)
            .args(&args)
            .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1]))
            .multiplex(multiplex);
        if cli.plaintext {
            builder = builder.plaintext();
        }
        if cli.host_service {
            builder = builder.host_service(AddHelperServer::new(Adder));
        }
        for dir in &cli.allow_exec {
            builder = builder.sandbox_allow_exec(dir);
        }
        for dir in &cli.allow_read {
            builder = builder.sandbox_allow_read(dir);
        }
        builder.start()
    };
    let plugin = start(cli.multiplex).await.map_err(|e| (e.into(), 1))?;
    let (result, other) = match cli.command {
        Command::Bench {
            calls,
            compare_modes: true,
        } => match start(true).await {
            Ok(muxed) => (
                bench(&[&plugin, &muxed], calls, cli.host_service).await,
                Some(muxed),
            ),
            Err(e) => (Err(e.into()), None),
        },
        command => (call(&plugin, command, cli.host_service).await, None),
    };
    let stopped = plugin.shutdown().await;
    let other_stopped = match other {
        Some(p) => p.shutdown().await.map(|_| ()),
        None => Ok(()),
    };
    result.map_err(|e| (e, 1))?;
    stopped.map_err(|e| (e.into(), 1))?;
    other_stopped.map_err(|e| (e.into(), 1))?;
    Ok(())
}

async fn call(plugin: &PluginClient, command: Command, host_service: bool) -> Result<(), BoxError> {
    let broker = plugin.broker();
    let mut counter = CounterClient::new(plugin.channel());
    match command {
        Command::Put { key, value } if host_service => {
            counter
                .put(PutRequest {
                    add_server: 0,
                    key: key.clone(),
                    value,
                })
                .await
                .map_err(|status| format!("put {key:?} failed (plugin answered {status})"))?;
            Ok(())
        }
        Command::Put { key, value } => put(&broker, &mut counter, &key, value).await,
        Command::Get { key } => {
            let value = counter
                .get(GetRequest { key: key.clone() })
                .await
                .map_err(|status| format!("get {key:?} failed (plugin answered {status})"))?
                .into_inner()
                .value;
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{value}")?;
            stdout.flush()?;
            Ok(())
        }
        Command::Bench { calls, .. } => bench(&[plugin], calls, host_service).await,
        Command::Measure {
            metric: Metric::Callback { calls, warmup },
        } => measure_callback(&broker, &mut counter, calls, warmup).await,
    }
}

/// `measure callback`: `warmup` untimed, then `calls` timed (`Get`, callback `Put`) pairs.
async fn measure_callback(
    broker: &GrpcBroker,
    counter: &mut CounterClient<Channel>,
    calls: u64,
    warmup: u64,
) -> Result<(), BoxError> {
    // Not `bench`: the harness runs the KV measurements in the same directory, and the KV
    // plugins store `kv_bench` there too.
    const KEY: &str = "callback_bench";
    let mut unary = Vec::new();
    let mut callback = Vec::new();
    for i in 0..warmup + calls {
        let t0 = Instant::now();
        counter.get(GetRequest { key: KEY.into() }).await?;
        let t1 = Instant::now();
        put(broker, counter, KEY, 1).await?;
        let t2 = Instant::now();
        if i >= warmup {
            unary.push(t1 - t0);
            callback.push(t2 - t1);
        }
    }
    let ns = |samples: &[Duration]| {
        samples
            .iter()
            .map(|d| d.as_nanos().to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(
        stdout,
        "unary_ns={} callback_ns={}",
        ns(&unary),
        ns(&callback)
    )?;
    stdout.flush()?;
    Ok(())
}

/// One plugin's samples in [`bench`].
#[derive(Default)]
struct Samples {
    unary: Vec<Duration>,
    callback: Vec<Duration>,
    hosted: Vec<Duration>,
}

async fn bench(plugins: &[&PluginClient], calls: u64, host_service: bool) -> Result<(), BoxError> {
    const KEY: &str = "bench";
    let mut targets: Vec<_> = plugins
        .iter()
        .map(|p| {
            (
                p.broker(),
                CounterClient::new(p.channel()),
                Samples::default(),
            )
        })
        .collect();
    // Interleaved, so that all measurements (and all plugins) see the same machine load.
    for _ in 0..calls {
        for (broker, counter, samples) in &mut targets {
            let t0 = Instant::now();
            counter.get(GetRequest { key: KEY.into() }).await?;
            samples.unary.push(t0.elapsed());

            let t0 = Instant::now();
            put(broker, counter, KEY, 1).await?;
            samples.callback.push(t0.elapsed());

            if host_service {
                let t0 = Instant::now();
                counter
                    .put(PutRequest {
                        add_server: 0,
                        key: KEY.into(),
                        value: 1,
                    })
                    .await?;
                samples.hosted.push(t0.elapsed());
            }
        }
    }
    let mut line = Vec::new();
    for (i, (broker, _, samples)) in targets.iter_mut().enumerate() {
        let prefix = if i == 0 { "" } else { "mux_" };
        line.push(format!("{prefix}broker={}", broker.mode()));
        for (name, v) in [
            ("unary", &mut samples.unary),
            ("callback", &mut samples.callback),
            ("host_service", &mut samples.hosted),
        ] {
            if v.is_empty() {
                continue;
            }
            v.sort_unstable();
            line.push(format!(
                "{prefix}{name}_us_p50={:.1} {prefix}{name}_us_p99={:.1}",
                micros(percentile(v, 0.5)),
                micros(percentile(v, 0.99)),
            ));
        }
    }
    println!("{}", line.join(" "));
    Ok(())
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Nearest-rank percentile of sorted durations.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `$COUNTER_PLUGIN`, split into program and arguments.
fn plugin_command() -> Result<(String, Vec<String>), BoxError> {
    let command = std::env::var_os("COUNTER_PLUGIN").ok_or(
        "COUNTER_PLUGIN is not set; set it to the plugin command, e.g. COUNTER_PLUGIN=target/debug/counter-plugin",
    )?;
    let command = command
        .into_string()
        .map_err(|_| "COUNTER_PLUGIN is not valid UTF-8")?;
    let mut words = shell_words::split(&command)
        .map_err(|e| format!("COUNTER_PLUGIN={command:?} cannot be split into words: {e}"))?;
    if words.is_empty() {
        return Err("COUNTER_PLUGIN is empty; set it to the plugin command".into());
    }
    let program = words.remove(0);
    Ok((program, words))
}
