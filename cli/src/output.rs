//! Standard output, where a reader that goes away (`tether inspect … | head -1`) ends the
//! command quietly instead of a panic.
//!
//! `println!` panics when stdout is a closed pipe (Rust ignores `SIGPIPE`, so the write fails
//! with `EPIPE`). Restoring `SIGPIPE` would also kill the host when a plugin's socket breaks;
//! so every line goes through [`line()`] (the [`outln!`] macro), whose error the command
//! returns like any other: the plugin is still shut down, then `tether` exits with
//! [`EXIT_BROKEN_PIPE`](crate::error::EXIT_BROKEN_PIPE) and prints nothing.

use std::io::Write as _;

use crate::error::CliError;

/// `println!`, returning [`CliError::Output`] instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}
pub(crate) use outln;

/// Writes one line to stdout (line-buffered, so an error shows at this line).
pub(crate) fn line(args: std::fmt::Arguments<'_>) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_fmt(format_args!("{args}\n"))
        .and_then(|()| stdout.flush())
        .map_err(CliError::Output)
}
