//! Misbehaving plugin: fails before printing a handshake, in the way its first argument says:
//!
//! - none: explains on stderr why it cannot start and exits with status 3;
//! - `exit-1`: the same explanation, exit status 1 (what go-plugin uses for a wrong cookie);
//! - `panic`: panics (Rust's exit status 101 and panic message).
//!
//! The host must report the exit status and the stderr tail, and blame none of them on the
//! magic cookie.

use std::process::ExitCode;

fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        Some("panic") => panic!("the plugin's configuration is inconsistent"),
        Some("exit-1") => {
            eprintln!("fatal: cannot open the plugin database at /nonexistent/db");
            ExitCode::from(1)
        }
        _ => {
            eprintln!("fatal: cannot open the plugin database at /nonexistent/db");
            ExitCode::from(3)
        }
    }
}
