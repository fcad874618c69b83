//! Capturing what the plugin writes to fd 1 after the handshake — Rust's `print!`, C
//! libraries, child processes alike — and serving it as go-plugin's `plugin.GRPCStdio`.
//!
//! After the handshake line is printed, fd 1 is replaced (`dup2`) by a pipe. A thread reads
//! it: while a host has `StreamStdio` open, each chunk goes to the host through a bounded queue
//! (a host that stops reading slows the writer down instead of growing memory); otherwise
//! (after waiting up to [`STDIO_OPEN_WAIT`] for the stream to open) the chunk is written to the
//! original fd, so hosts without `GRPCStdio` (go-plugin 1.0.x) still see it on the pipe they
//! drain.
//!
//! fd 2 is deliberately left alone: it is the host's stderr pipe, which every host (tether's and
//! go-plugin's) drains and parses as log lines, and which survives a crash. Output captured
//! in-process dies with the process, so a panic message or a last `eprintln!` before
//! `exit` would be lost exactly when the host needs it for its crash report.

use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::os::fd::AsFd as _;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tether_transport::internal::lock;

use tether_proto::plugin::StdioData;
use tether_proto::plugin::grpc_stdio_server::{GrpcStdio, GrpcStdioServer};
use tether_proto::plugin::stdio_data::Channel;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::ReceiverStream;

/// Bytes read from a captured fd at a time (one `StdioData` message at most).
pub const STDIO_CHUNK_LEN: usize = 32 * 1024;

/// Chunks queued toward the host before writers to fd 1 wait.
pub const STDIO_QUEUE_LEN: usize = 64;

/// How long after the handshake output waits for the host to open `StreamStdio` before it
/// goes to the original fds instead. Hosts open the stream right after connecting (tether
/// hosts and go-plugin ≥ 1.1, within milliseconds), so output printed early is not lost to
/// them; hosts without `GRPCStdio` (go-plugin 1.0.x) get early output this much later.
pub const STDIO_OPEN_WAIT: Duration = Duration::from_secs(1);

/// At shutdown, how long the plugin waits for output still in the capture pipe (its last
/// `print!`s) to be handed to the host's stream before it stops serving. Short, because a
/// child process that inherited fd 1 keeps the pipe open and the wait then runs out. Override
/// with
/// [`ServeOptions::stdio_drain_timeout`](crate::ServeOptions::stdio_drain_timeout).
pub const DEFAULT_STDIO_DRAIN_TIMEOUT: Duration = Duration::from_millis(250);

/// The host's open `StreamStdio`, if any.
#[derive(Clone, Default)]
pub(crate) struct StdioHub(Arc<(Mutex<Slot>, Condvar)>);

#[derive(Default)]
struct Slot {
    sender: Option<mpsc::Sender<StdioData>>,
    /// Resolves (with an error) when the open stream has been dropped by the server, that
    /// is after its last message and end went to the connection.
    ended: Option<oneshot::Receiver<()>>,
    /// Set once the stream is opened or closed, or the open wait is over.
    settled: bool,
}

impl StdioHub {
    /// The host's stream; before one was ever opened, waits for it until `deadline`.
    fn sender(&self, deadline: Instant) -> Option<mpsc::Sender<StdioData>> {
        let (lock, opened) = &*self.0;
        let mut slot = self::lock(lock);
        while !slot.settled {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                slot.settled = true;
                break;
            }
            slot = opened
                .wait_timeout(slot, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        slot.sender.clone()
    }

    fn set(&self, sender: Option<mpsc::Sender<StdioData>>) {
        let (lock, opened) = &*self.0;
        let mut slot = self::lock(lock);
        slot.sender = sender;
        slot.settled = true;
        opened.notify_all();
    }

    /// Ends the host's stream (at shutdown, so the server's graceful stop need not wait for
    /// it) and waits up to `timeout` for the server to have sent its last messages and its
    /// end; later output goes to the original fds.
    pub(crate) async fn close(&self, timeout: Duration) {
        let ended = {
            let mut slot = self::lock(&self.0.0);
            slot.ended.take()
        };
        self.set(None);
        if let Some(ended) = ended {
            let _ = tokio::time::timeout(timeout, ended).await;
        }
    }

    /// The `plugin.GRPCStdio` service.
    pub(crate) fn service(&self) -> GrpcStdioServer<StdioService> {
        GrpcStdioServer::new(StdioService(self.clone()))
    }
}

/// Replaces fd 1 by a pipe drained as described in the module docs; returns a copy of the
/// (untouched) stderr for log lines, and the capture to [`finish`](Capture::finish) at
/// shutdown.
pub(crate) fn capture(hub: &StdioHub) -> io::Result<(File, Capture)> {
    let original_out = File::from(rustix::io::fcntl_dupfd_cloexec(io::stdout().as_fd(), 3)?);
    let restore = original_out.try_clone()?;
    let log = File::from(rustix::io::fcntl_dupfd_cloexec(io::stderr().as_fd(), 3)?);
    io::stdout().flush()?;
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    rustix::stdio::dup2_stdout(&write)?;
    // fd 1 now holds the pipe (without CLOEXEC, so child processes inherit it).
    drop(write);
    let hub = hub.clone();
    let (done_tx, done) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("tether-stdout".to_owned())
        .spawn(move || {
            pump(File::from(read), Channel::Stdout, original_out, &hub);
            drop(done_tx);
        })?;
    Ok((log, Capture { restore, done }))
}

/// A running capture of fd 1.
#[derive(Debug)]
pub(crate) struct Capture {
    /// The original fd 1, put back by [`finish`](Self::finish).
    restore: File,
    /// Disconnects when the pump thread has ended.
    done: std::sync::mpsc::Receiver<()>,
}

impl Capture {
    /// Puts the original fd 1 back (closing the pipe's write end, unless child processes
    /// still hold it) and waits up to `timeout` for the pump to hand everything still in the
    /// pipe to the host's stream. Blocking.
    pub(crate) fn finish(self, timeout: Duration) {
        let _ = io::stdout().flush();
        if let Err(error) = rustix::stdio::dup2_stdout(&self.restore) {
            tracing::debug!(%error, "cannot restore stdout; its last output may be lost");
            return;
        }
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = self.done.recv_timeout(timeout) {
            tracing::debug!(
                ?timeout,
                "stdout was not drained within the timeout (a child process may hold it)"
            );
        }
    }
}

/// Moves chunks from a captured fd to the host's stream, or to the original fd.
fn pump(mut pipe: File, channel: Channel, mut original: File, hub: &StdioHub) {
    let mut buf = vec![0; STDIO_CHUNK_LEN];
    let deadline = Instant::now() + STDIO_OPEN_WAIT;
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        let data = StdioData {
            channel: channel as i32,
            data: buf[..n].to_vec(),
        };
        let undelivered = match hub.sender(deadline) {
            Some(sender) => match sender.blocking_send(data) {
                Ok(()) => None,
                Err(mpsc::error::SendError(data)) => {
                    // The host closed its stream: back to the original fd.
                    hub.set(None);
                    Some(data)
                }
            },
            None => Some(data),
        };
        if let Some(data) = undelivered {
            // Nothing sensible to do if the original fd is gone too.
            let _ = original.write_all(&data.data);
        }
    }
}

/// `plugin.GRPCStdio`: the host's stream of the plugin's output. A new stream replaces an
/// older one.
pub(crate) struct StdioService(StdioHub);

#[tonic::async_trait]
impl GrpcStdio for StdioService {
    type StreamStdioStream = std::pin::Pin<
        Box<dyn tokio_stream::Stream<Item = Result<StdioData, tonic::Status>> + Send + 'static>,
    >;

    async fn stream_stdio(
        &self,
        _request: tonic::Request<()>,
    ) -> Result<tonic::Response<Self::StreamStdioStream>, tonic::Status> {
        let (tx, rx) = mpsc::channel(STDIO_QUEUE_LEN);
        let (end, ended) = oneshot::channel();
        lock(&(self.0).0.0).ended = Some(ended);
        self.0.set(Some(tx));
        Ok(tonic::Response::new(Box::pin(UntilDropped {
            stream: Box::pin(ReceiverStream::new(rx).map(Ok)),
            _end: end,
        })))
    }
}

/// A stream that tells, by dropping `_end`, when the server is done with it.
struct UntilDropped<S> {
    stream: std::pin::Pin<Box<S>>,
    _end: oneshot::Sender<()>,
}

impl<S: tokio_stream::Stream> tokio_stream::Stream for UntilDropped<S> {
    type Item = S::Item;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.stream.as_mut().poll_next(cx)
    }
}
