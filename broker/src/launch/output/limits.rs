//! [`OutputLimits`]: how much of what a plugin prints the host reads or keeps, as one value.

/// How many lines a plugin may print on stdout before its handshake line.
///
/// go-plugin hosts treat any such line as fatal; tether logs and skips them (a plugin's runtime
/// or a wrapper script may print a banner) but bounds them, because a plugin that prints
/// thousands of lines is not going to print a handshake. Override with
/// [`OutputLimits::max_stray_lines`].
pub const DEFAULT_MAX_STRAY_LINES: usize = 100;

/// How many bytes of stray stdout (lines before the handshake) a plugin may print in total.
/// Override with [`OutputLimits::max_stray_bytes`].
pub const DEFAULT_MAX_STRAY_BYTES: usize = 64 * 1024;

/// How many of the last bytes of a plugin's stderr are kept for error messages.
/// Override with [`OutputLimits::stderr_tail_len`].
pub const DEFAULT_STDERR_TAIL_LEN: usize = 4 * 1024;

/// How much of a plugin's output the host reads before its handshake and keeps for errors.
///
/// `OutputLimits::default()` holds this module's `DEFAULT_*` constants; hand a changed value to
/// [`PluginClientBuilder::output_limits`](crate::PluginClientBuilder::output_limits):
///
/// ```
/// use tether_broker::launch::OutputLimits;
/// let b = tether_broker::PluginClient::builder("/bin/plugin")
///     .output_limits(OutputLimits::default().stderr_tail_len(16 * 1024));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutputLimits {
    /// Lines on stdout before the handshake line ([`DEFAULT_MAX_STRAY_LINES`]).
    pub max_stray_lines: usize,
    /// Bytes on stdout before the handshake line ([`DEFAULT_MAX_STRAY_BYTES`]).
    pub max_stray_bytes: usize,
    /// Last bytes of stderr kept for error messages ([`DEFAULT_STDERR_TAIL_LEN`]).
    pub stderr_tail_len: usize,
}

impl Default for OutputLimits {
    fn default() -> Self {
        Self {
            max_stray_lines: DEFAULT_MAX_STRAY_LINES,
            max_stray_bytes: DEFAULT_MAX_STRAY_BYTES,
            stderr_tail_len: DEFAULT_STDERR_TAIL_LEN,
        }
    }
}

impl OutputLimits {
    /// Sets [`max_stray_lines`](Self::max_stray_lines).
    #[must_use]
    pub fn max_stray_lines(mut self, lines: usize) -> Self {
        self.max_stray_lines = lines;
        self
    }

    /// Sets [`max_stray_bytes`](Self::max_stray_bytes).
    #[must_use]
    pub fn max_stray_bytes(mut self, bytes: usize) -> Self {
        self.max_stray_bytes = bytes;
        self
    }

    /// Sets [`stderr_tail_len`](Self::stderr_tail_len).
    #[must_use]
    pub fn stderr_tail_len(mut self, bytes: usize) -> Self {
        self.stderr_tail_len = bytes;
        self
    }
}
