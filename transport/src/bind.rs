//! Binding listening sockets: a randomly named unix socket in a directory, or the first free
//! loopback TCP port of a range.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

use tempfile::TempPath;
use tokio::net::{TcpListener, UnixListener};

/// Binds a unix socket with a fresh random name (`plugin-XXXXXX.sock`) in `dir`; the returned
/// path deletes the socket file when dropped. Must run inside a tokio runtime.
///
/// The socket file is made connectable by any user (`0666`): `dir` is what guards it (a
/// host's private directory is `0700`; a plugin's world is its own). A plugin that runs as
/// another user than the host (a root host's plugins do) must be able to connect to the
/// host's brokered sockets.
///
/// # Errors
/// The error from `bind` or `chmod`.
pub fn unix_in(dir: &Path) -> io::Result<(UnixListener, TempPath)> {
    unix_in_with(dir, &UnixBinder::default())
}

/// [`unix_in`], the socket file made by `binder` (e.g. as another user).
///
/// # Errors
/// The error from `binder`, or from registering the socket with the runtime.
pub fn unix_in_with(dir: &Path, binder: &UnixBinder) -> io::Result<(UnixListener, TempPath)> {
    let socket = tempfile::Builder::new()
        .prefix("plugin-")
        .suffix(".sock")
        .make_in(dir, |path| (binder.0)(path))?;
    let (listener, path) = socket.into_parts();
    listener.set_nonblocking(true)?;
    Ok((UnixListener::from_std(listener)?, path))
}

/// Binds a listening unix socket at `path` and makes its file connectable by any user
/// (`0666`): what [`UnixBinder::default`] does, on the calling thread.
///
/// # Errors
/// The error from `bind` or `chmod`.
pub fn connectable_unix(path: &Path) -> io::Result<std::os::unix::net::UnixListener> {
    use std::os::unix::fs::PermissionsExt as _;
    let listener = std::os::unix::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(listener)
}

/// How a listening unix socket's file is made at a path: [`connectable_unix`] by default, as
/// the calling thread's user. A host whose peer's directory takes only files of other users
/// passes one that makes it as such a user: a world's tmpfs (a file system of the plugin's
/// user namespace) refuses files of an id that namespace does not map — a root host's uid 0
/// — with `EOVERFLOW`.
#[derive(Clone)]
pub struct UnixBinder(Arc<BindFn>);

/// What a [`UnixBinder`] calls: binds a listening socket at a path.
type BindFn = dyn Fn(&Path) -> io::Result<std::os::unix::net::UnixListener> + Send + Sync;

impl UnixBinder {
    /// A binder that makes the socket at a path with `bind` (which must leave it connectable
    /// by the peer, as [`connectable_unix`] does).
    pub fn new(
        bind: impl Fn(&Path) -> io::Result<std::os::unix::net::UnixListener> + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(bind))
    }
}

impl Default for UnixBinder {
    fn default() -> Self {
        Self::new(connectable_unix)
    }
}

impl fmt::Debug for UnixBinder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixBinder").finish_non_exhaustive()
    }
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
