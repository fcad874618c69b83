//! Misbehaving plugin: explains on stderr why it cannot start and exits with status 3 before
//! printing a handshake. The host must report the exit status and the stderr tail.

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!("fatal: cannot open the plugin database at /nonexistent/db");
    ExitCode::from(3)
}
