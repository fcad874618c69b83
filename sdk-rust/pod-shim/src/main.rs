//! `tether-pod-shim`: the first process of a plugin's container under tether's Pod runner.
//!
//! A plugin listens where its Pod's network cannot reach it: go-plugin plugins on a unix socket,
//! tether's SDKs on a unix socket or `127.0.0.1`. The shim runs the plugin as its child with the
//! Pod's environment, reads its handshake line, listens on one TCP address of the Pod
//! (`--listen`) and relays each connection to the plugin's socket — so the host reaches every
//! plugin, in any language, on one port: at the Pod's IP from inside the cluster, or through the
//! API server's port-forward from outside. Only one port is reachable, which is why the Pod
//! runner requires go-plugin's multiplexed broker. TLS runs end to end through the relay: the
//! host pins the plugin's certificate from the handshake, which the shim passes on unchanged.
//!
//! ```text
//! tether-pod-shim install DIR                            copy this binary to DIR (an init container)
//! tether-pod-shim run --listen ADDR -- COMMAND [ARG...]  run the plugin, relay ADDR to it
//! ```
//!
//! Exit status of `run`: the plugin's, or 128 + the signal that ended it; 125 when the shim
//! itself failed (its reason on stderr), 127 when COMMAND cannot be started; 2 for usage errors.

mod announce;
mod child;
mod relay;

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;

/// The exit status when the shim itself failed.
const SHIM_FAILED: u8 = 125;

/// The installed binary's name in `install`'s directory.
const INSTALLED_NAME: &str = "tether-pod-shim";

const USAGE: &str = "usage: tether-pod-shim install DIR\n       \
     tether-pod-shim run --listen ADDR -- COMMAND [ARG...]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["install", dir] => install(Path::new(dir)),
        ["run", "--listen", listen, "--", command @ ..] if !command.is_empty() => {
            match listen.parse::<SocketAddr>() {
                Ok(listen) => child::run(listen, command),
                Err(e) => usage(&format!("--listen {listen}: {e}")),
            }
        }
        _ => usage("unrecognised arguments"),
    }
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("tether-pod-shim: {problem}\n{USAGE}");
    ExitCode::from(2)
}

/// Copies the running binary to `dir` (made read-and-execute only), by a rename so a reader
/// never sees half a file.
fn install(dir: &Path) -> ExitCode {
    let result = (|| -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt as _;
        let me = std::env::current_exe()?;
        let partial = dir.join(format!(".{INSTALLED_NAME}.partial"));
        std::fs::copy(&me, &partial)?;
        std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o555))?;
        std::fs::rename(&partial, dir.join(INSTALLED_NAME))
    })();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "tether-pod-shim: cannot install into {}: {e}",
                dir.display()
            );
            ExitCode::from(SHIM_FAILED)
        }
    }
}
