//! Reads that let the work they started run before the connection reads again.
//!
//! Both ends of a plugin connection drive HTTP/2 from one task on a current-thread runtime. Left
//! alone, that task reads every request (or response) the socket holds before the tasks those
//! frames wake get to run, and writes their answers only after all of them: under many
//! concurrent calls the two processes then take turns — one works through a whole batch while
//! the other waits for it — and each stays about half idle. [`ReadsYield`] makes the reading
//! task step aside once after every read that returned bytes (`Pending`, with itself woken
//! again at once), so that the calls those bytes started run and their frames go out with the
//! next write while the peer is still sending: the batches overlap. A read that finds nothing
//! waits as before, so a lone call costs no extra wake-up (bench/BENCHMARKS.md, Decisions: 64
//! concurrent callers 1.6×, unary and 64 MiB unchanged).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A byte stream whose reader yields to the runtime once after each read that returned bytes
/// (see the [module docs](self)). Writes pass through.
#[derive(Debug)]
pub(crate) struct ReadsYield<T> {
    inner: T,
    /// The last read returned bytes: the next one yields first.
    yield_next: bool,
}

impl<T> ReadsYield<T> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: T) -> Self {
        Self {
            inner,
            yield_next: false,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for ReadsYield<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.yield_next {
            self.yield_next = false;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let before = buf.filled().len();
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.yield_next = true;
        }
        read
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ReadsYield<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn a_read_that_returned_bytes_makes_the_next_one_yield_once_and_nothing_is_lost() {
        let (mut a, b) = tokio::io::duplex(64);
        let mut b = ReadsYield::new(b);
        a.write_all(b"hello").await.unwrap();
        let mut buf = [0_u8; 16];
        assert_eq!(b.read(&mut buf).await.unwrap(), 5);
        // The next read yields once (Pending, already woken), then reads.
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut rb = ReadBuf::new(&mut buf);
        assert!(Pin::new(&mut b).poll_read(&mut cx, &mut rb).is_pending());
        a.write_all(b" world").await.unwrap();
        assert_eq!(b.read(&mut buf).await.unwrap(), 6);
        assert_eq!(&buf[..6], b" world");
        drop(a);
        // End of stream (no bytes) after the yield.
        assert_eq!(b.read(&mut buf).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_read_that_found_nothing_waits_without_yielding() {
        let (_a, b) = tokio::io::duplex(64);
        let mut b = ReadsYield::new(b);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut buf = [0_u8; 16];
        let mut rb = ReadBuf::new(&mut buf);
        assert!(Pin::new(&mut b).poll_read(&mut cx, &mut rb).is_pending());
        assert!(!b.yield_next);
    }
}
