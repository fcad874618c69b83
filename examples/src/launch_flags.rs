//! How the KV and counter hosts launch their plugin, and the command-line options that change
//! it: written once for the example hosts (`kv-host`, `counter-host`) and the benchmark's
//! drivers of the same contracts (`kv-bench`, `counter-bench` in `tether-bench`), so that the
//! benchmark launches a plugin exactly as the examples do.

use std::path::PathBuf;

use tether_broker::launch::{GvisorOptions, Runner};
use tether_broker::{HandshakeConfig, PluginClient, PluginClientBuilder};

/// The handshake of go-plugin's `examples/grpc` and `examples/bidirectional`, which both
/// example contracts keep: cookie `BASIC_PLUGIN=hello`, app version 1.
#[must_use]
pub fn handshake() -> HandshakeConfig {
    HandshakeConfig::new("BASIC_PLUGIN", "hello").app_versions([1])
}

/// The launch options of the example hosts, as `clap` arguments (`#[command(flatten)]`),
/// given before the subcommand (`kv-host --plaintext get KEY`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LaunchFlags {
    /// Turn AutoMTLS off (for plugins that cannot do it; go-plugin ≤ 1.4.3 plugins' callbacks
    /// fail under AutoMTLS).
    #[arg(long)]
    pub plaintext: bool,
    /// Offer go-plugin's multiplexed broker (PLUGIN_MULTIPLEX_GRPC).
    #[arg(long)]
    pub multiplex: bool,
    /// Run the plugin in a gVisor sandbox (`runsc`); the working directory is its state.
    #[arg(long)]
    pub gvisor: bool,
    /// Let the confined plugin read and execute below DIR too: an interpreter outside the
    /// system paths, e.g. a pyenv or virtualenv Python (repeatable).
    #[arg(long = "allow-exec", value_name = "DIR")]
    pub allow_exec: Vec<PathBuf>,
    /// Let the confined plugin read below DIR too, e.g. a script plugin's sources (repeatable).
    #[arg(long = "allow-read", value_name = "DIR")]
    pub allow_read: Vec<PathBuf>,
}

impl LaunchFlags {
    /// A builder for `program args` with the examples' [`handshake`] and these options.
    ///
    /// # Errors
    /// With `--gvisor`, when the current directory (the sandbox's state) cannot be read.
    pub fn builder(
        &self,
        program: &str,
        args: &[String],
    ) -> std::io::Result<PluginClientBuilder<HandshakeConfig>> {
        let mut builder = PluginClient::builder(program)
            .args(args)
            .handshake(handshake())
            .multiplex(self.multiplex);
        if self.plaintext {
            builder = builder.plaintext();
        }
        for dir in &self.allow_exec {
            builder = builder.sandbox_allow_exec(dir);
        }
        for dir in &self.allow_read {
            builder = builder.sandbox_allow_read(dir);
        }
        if self.gvisor {
            builder = builder
                .runner(Runner::Gvisor(GvisorOptions::new()))
                .current_dir(std::env::current_dir()?);
        }
        Ok(builder)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        launch: LaunchFlags,
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Debug, clap::Subcommand)]
    enum Command {
        Get { key: String },
    }

    #[test]
    fn the_launch_options_are_read_before_the_subcommand_and_refused_after_it() {
        let cli = Cli::try_parse_from([
            "host",
            "--plaintext",
            "--allow-exec",
            "/opt/py",
            "--multiplex",
            "--allow-read",
            "/src",
            "--allow-exec",
            "/opt/node",
            "get",
            "k",
        ])
        .unwrap();
        assert!(cli.launch.plaintext && cli.launch.multiplex && !cli.launch.gvisor);
        assert_eq!(
            cli.launch.allow_exec,
            [PathBuf::from("/opt/py"), PathBuf::from("/opt/node")]
        );
        assert_eq!(cli.launch.allow_read, [PathBuf::from("/src")]);
        let Command::Get { key } = cli.command;
        assert_eq!(key, "k");

        let after = Cli::try_parse_from(["host", "get", "k", "--gvisor"]).unwrap_err();
        assert_eq!(after.kind(), clap::error::ErrorKind::UnknownArgument);
    }
}
