//! Driving the example hosts as a user would: tether's `kv-host` / `counter-host` and
//! go-plugin's `kvhost` / `counterhost` (go-plugin's `examples/grpc` and
//! `examples/bidirectional` contracts), each command in a launch of its own.
//!
//! The round trips assert the contract end to end — what the host prints, what the plugin
//! stored in its working directory — and that nothing is left running afterwards.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::peers::{self, GoPlugin};
use crate::{bins, procs};

/// Both kinds of host exit with this status for `get` of a missing key.
pub const EXIT_NOT_FOUND: i32 = 3;

/// The contract an example host and plugin speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contract {
    /// go-plugin's `examples/grpc`: `put KEY VALUE`, `get KEY`.
    Kv,
    /// go-plugin's `examples/bidirectional`: `put KEY N` adds through a callback, `get KEY`.
    Counter,
}

impl Contract {
    /// The environment variable that gives the host its plugin's command line.
    fn plugin_var(self) -> &'static str {
        match self {
            Self::Kv => "KV_PLUGIN",
            Self::Counter => "COUNTER_PLUGIN",
        }
    }
}

/// Which side of a round trip a go-plugin peer plays; tether's example plays the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoSide {
    /// go-plugin's plugin under tether's example host.
    Plugin,
    /// go-plugin's host launching tether's example plugin.
    Host,
}

/// An example host program and the plugin it is told to launch.
#[derive(Debug, Clone)]
pub struct ExampleHost {
    program: PathBuf,
    contract: Contract,
    plugin: OsString,
    options: Vec<String>,
}

impl ExampleHost {
    /// A KV host launching `plugin` (a command line: `KV_PLUGIN`).
    #[must_use]
    pub fn kv(program: impl Into<PathBuf>, plugin: impl Into<OsString>) -> Self {
        Self::new(Contract::Kv, program, plugin)
    }

    /// A counter host launching `plugin` (a command line: `COUNTER_PLUGIN`).
    #[must_use]
    pub fn counter(program: impl Into<PathBuf>, plugin: impl Into<OsString>) -> Self {
        Self::new(Contract::Counter, program, plugin)
    }

    /// A `contract` host launching `plugin` (a command line).
    #[must_use]
    pub fn new(
        contract: Contract,
        program: impl Into<PathBuf>,
        plugin: impl Into<OsString>,
    ) -> Self {
        Self {
            program: program.into(),
            contract,
            plugin: plugin.into(),
            options: Vec::new(),
        }
    }

    /// AutoMTLS on (the hosts' default) or off (`--plaintext`).
    #[must_use]
    pub fn tls(self, on: bool) -> Self {
        if on {
            self
        } else {
            self.options(["--plaintext"])
        }
    }

    /// Host options, given before the command (Go's `flag` package wants them first).
    #[must_use]
    pub fn options<S: Into<String>>(mut self, options: impl IntoIterator<Item = S>) -> Self {
        self.options.extend(options.into_iter().map(Into::into));
        self
    }

    /// Runs `args` (e.g. `["get", "c"]`) in `work` and returns what the host did.
    ///
    /// # Panics
    /// When the program cannot be started.
    #[must_use]
    pub fn run(&self, work: &Path, args: &[&str]) -> Output {
        Command::new(&self.program)
            .args(&self.options)
            .args(args)
            .env(self.contract.plugin_var(), &self.plugin)
            .current_dir(work)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.program.display()))
    }

    /// The round trip of the host's contract: [`kv_round_trip`](Self::kv_round_trip) or
    /// [`counter_round_trip`](Self::counter_round_trip).
    ///
    /// # Panics
    /// When it does not hold.
    pub fn round_trip(&self) {
        match self.contract {
            Contract::Kv => self.kv_round_trip(),
            Contract::Counter => self.counter_round_trip(),
        }
    }

    /// `put` in one launch, `get` in another, then `get` of a missing key (`NotFound`, exit
    /// [`EXIT_NOT_FOUND`]); the plugin stores the value in `kv_<key>`; nothing left running.
    ///
    /// # Panics
    /// When any of that does not hold.
    pub fn kv_round_trip(&self) {
        let work = tempfile::tempdir().expect("a temporary directory");
        // A value no earlier run can have left behind.
        let value = unique_value();

        let put = self.run(work.path(), &["put", "greeting", &value]);
        assert!(put.status.success(), "put failed: {}", describe(&put));
        assert_eq!(
            std::fs::read_to_string(work.path().join("kv_greeting")).ok(),
            Some(value.clone()),
            "the plugin stores the value in kv_<key> in its working directory"
        );

        let get = self.run(work.path(), &["get", "greeting"]);
        assert!(get.status.success(), "get failed: {}", describe(&get));
        assert_eq!(String::from_utf8_lossy(&get.stdout), format!("{value}\n"));

        let missing = self.run(work.path(), &["get", "no-such-key"]);
        assert_eq!(
            missing.status.code(),
            Some(EXIT_NOT_FOUND),
            "a missing key is NotFound: {}",
            describe(&missing)
        );
        assert!(missing.stdout.is_empty(), "{}", describe(&missing));
        assert_nothing_left(work.path());
    }

    /// `put c 5`, `put c 7` (each launch: the plugin calls the host's `AddHelper` back through
    /// the broker), then `get c` prints `12`; the plugin stores go-plugin's JSON in `kv_c`;
    /// nothing left running.
    ///
    /// # Panics
    /// When any of that does not hold.
    pub fn counter_round_trip(&self) {
        let work = tempfile::tempdir().expect("a temporary directory");
        for n in ["5", "7"] {
            let put = self.run(work.path(), &["put", "c", n]);
            assert!(put.status.success(), "put c {n} failed: {}", describe(&put));
        }
        assert_eq!(
            std::fs::read_to_string(work.path().join("kv_c"))
                .ok()
                .as_deref(),
            Some(r#"{"Value":12}"#),
            "the plugin stores go-plugin's JSON in kv_<key>"
        );
        let get = self.run(work.path(), &["get", "c"]);
        assert!(get.status.success(), "get failed: {}", describe(&get));
        assert_eq!(String::from_utf8_lossy(&get.stdout), "12\n");
        assert_nothing_left(work.path());
    }
}

/// `contract`'s round trip between go-plugin `variant`'s peer on `go_side` and tether's
/// example on the other, with AutoMTLS on or off (`tls`) and host `options`; skipped (or failed) as
/// [`peers::go_or_skip`] says when the peers are unavailable. [`go_interop_tests!`](crate::go_interop_tests!) writes the
/// tests.
///
/// # Panics
/// When the round trip does not hold.
pub fn go_round_trip(
    contract: Contract,
    variant: GoPlugin,
    go_side: GoSide,
    tls: bool,
    options: &[&str],
    test: &str,
) {
    let Some(go) = peers::go_or_skip(variant, test) else {
        return;
    };
    let (go_host, go_plugin, host, plugin) = match contract {
        Contract::Kv => (&go.host, &go.plugin, &bins::KV_HOST, &bins::KV_PLUGIN),
        Contract::Counter => (
            &go.counter_host,
            &go.counter_plugin,
            &bins::COUNTER_HOST,
            &bins::COUNTER_PLUGIN,
        ),
    };
    let example = match go_side {
        GoSide::Plugin => ExampleHost::new(contract, host.path(), go_plugin),
        GoSide::Host => ExampleHost::new(contract, go_host, plugin.path()),
    };
    example
        .tls(tls)
        .options(options.iter().copied())
        .round_trip();
}

/// One `#[test]` per line, each a [`go_round_trip`] of the contract named first (host options
/// last, when there are any):
///
/// ```ignore
/// go_interop_tests! { Contract::Counter;
///     tether_broker_serves_callbacks_to_a_go_plugin_v1_8: GoPlugin::V18, GoSide::Plugin, true;
///     go_host_v1_8_multiplexes_callbacks: GoPlugin::V18, GoSide::Host, true, &["--multiplex"];
/// }
/// ```
#[macro_export]
macro_rules! go_interop_tests {
    ($contract:expr; $($name:ident: $variant:expr, $go_side:expr, $tls:expr $(, $options:expr)?;)*) => {$(
        #[test]
        fn $name() {
            let options: &[&str] = &[];
            $(let options: &[&str] = $options;)?
            $crate::example_host::go_round_trip(
                $contract,
                $variant,
                $go_side,
                $tls,
                options,
                stringify!($name),
            );
        }
    )*};
}

/// A host's exit status and output, for assertion messages.
#[must_use]
pub fn describe(out: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A value no earlier run can have left behind (process id and the clock).
#[must_use]
pub fn unique_value() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("value-{}-{nanos}", std::process::id())
}

fn assert_nothing_left(work: &Path) {
    let left = procs::in_dir(work);
    assert!(left.is_empty(), "processes left behind: {left:?}");
}
