//! Reading a plugin's pipes line by line with bounded memory: a [`LineReader`] never holds
//! more than its limit of one line, and hands out an overlong line in fragments.

use std::io;

use tokio::io::{AsyncBufReadExt as _, AsyncRead, BufReader};

/// One piece of output read by a [`LineReader`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Line {
    /// A whole line, without its `\n` (a `\r` before it is kept). The last line of a stream may
    /// lack the newline.
    Complete(Vec<u8>),
    /// The first `max` bytes of a line that goes on: no newline came within the limit. The
    /// next read continues with the rest of the line.
    Fragment(Vec<u8>),
}

impl Line {
    /// The bytes read, whole or not.
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Self::Complete(b) | Self::Fragment(b) => b,
        }
    }
}

/// Reads lines of at most `max` bytes from a byte stream.
#[derive(Debug)]
pub(crate) struct LineReader<R> {
    inner: BufReader<R>,
    max: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// Reads `inner` in lines of at most `max` bytes (newline excluded; `max` ≥ 1).
    pub(crate) fn new(inner: R, max: usize) -> Self {
        Self {
            inner: BufReader::new(inner),
            max: max.max(1),
        }
    }

    /// Sets a new line limit for the following reads.
    pub(crate) fn set_max(&mut self, max: usize) {
        self.max = max.max(1);
    }

    /// The next line, `None` at end of stream.
    ///
    /// Not cancel-safe: dropping the future part-way loses the part of the line read so far.
    pub(crate) async fn next_line(&mut self) -> io::Result<Option<Line>> {
        let mut line = Vec::new();
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                return Ok((!line.is_empty()).then_some(Line::Complete(line)));
            }
            let room = self.max - line.len();
            // A newline right after `room` bytes still ends a line of exactly `max` bytes.
            let window = &available[..available.len().min(room + 1)];
            if let Some(newline) = window.iter().position(|&b| b == b'\n') {
                line.extend_from_slice(&window[..newline]);
                self.inner.consume(newline + 1);
                return Ok(Some(Line::Complete(line)));
            }
            if room == 0 {
                return Ok(Some(Line::Fragment(line)));
            }
            let take = available.len().min(room);
            line.extend_from_slice(&available[..take]);
            self.inner.consume(take);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Line> {
        let mut reader = LineReader::new(input, max);
        let mut out = Vec::new();
        while let Some(line) = reader.next_line().await.unwrap() {
            out.push(line);
        }
        out
    }

    fn complete(s: &str) -> Line {
        Line::Complete(s.as_bytes().to_vec())
    }

    #[tokio::test]
    async fn the_line_reader_splits_on_newlines_and_keeps_a_last_unterminated_line() {
        assert_eq!(
            lines(b"one\ntwo\r\n\nthree", 16).await,
            [
                complete("one"),
                complete("two\r"),
                complete(""),
                complete("three")
            ]
        );
        assert_eq!(lines(b"", 16).await, []);
    }

    #[tokio::test]
    async fn the_line_reader_accepts_a_line_of_exactly_the_limit() {
        assert_eq!(
            lines(b"abcd\nef\n", 4).await,
            [complete("abcd"), complete("ef")]
        );
    }

    #[tokio::test]
    async fn the_line_reader_returns_fragments_of_an_overlong_line() {
        assert_eq!(
            lines(b"abcdefghij\nk\n", 4).await,
            [
                Line::Fragment(b"abcd".to_vec()),
                Line::Fragment(b"efgh".to_vec()),
                complete("ij"),
                complete("k")
            ]
        );
    }

    #[tokio::test]
    async fn the_line_reader_buffers_no_more_than_its_limit_of_an_endless_line() {
        // A writer that never sends a newline: the reader must return after `max` bytes
        // instead of waiting for more.
        let (mut writer, reader) = tokio::io::duplex(64 * 1024);
        let feeder = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt as _;
            for _ in 0..64 {
                if writer.write_all(&[b'x'; 1024]).await.is_err() {
                    break;
                }
            }
            writer
        });
        let mut reader = LineReader::new(reader, 1000);
        match reader.next_line().await.unwrap() {
            Some(Line::Fragment(bytes)) => assert_eq!(bytes.len(), 1000),
            other => panic!("expected a fragment, got {other:?}"),
        }
        drop(reader);
        let _ = feeder.await;
    }
}
