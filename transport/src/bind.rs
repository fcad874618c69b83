//! Binding listening sockets: a randomly named unix socket in a directory, or the first free
//! loopback TCP port of a range.

use std::io;
use std::path::Path;

use tempfile::TempPath;
use tokio::net::{TcpListener, UnixListener};

/// Binds a unix socket with a fresh random name (`plugin-XXXXXX.sock`) in `dir`; the returned
/// path deletes the socket file when dropped. Must run inside a tokio runtime.
///
/// # Errors
/// The error from `bind`.
pub fn unix_in(dir: &Path) -> io::Result<(UnixListener, TempPath)> {
    let socket = tempfile::Builder::new()
        .prefix("plugin-")
        .suffix(".sock")
        .make_in(dir, |path| UnixListener::bind(path))?;
    Ok(socket.into_parts())
}

/// Binds the first free port of `min..=max` on 127.0.0.1, in order, as go-plugin does. Must
/// run inside a tokio runtime.
///
/// # Errors
/// The last `bind` error when every port is taken.
pub fn tcp_in_range(min: u16, max: u16) -> io::Result<TcpListener> {
    let mut last_error = None;
    for port in min..=max {
        let bound = std::net::TcpListener::bind(("127.0.0.1", port))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .and_then(TcpListener::from_std);
        match bound {
            Ok(listener) => return Ok(listener),
            Err(e) => last_error = Some(e),
        }
    }
    Err(last_error.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("empty port range {min}..={max}"),
        )
    }))
}
