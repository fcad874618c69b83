//! `tether call`'s limits: how long a call may take and how much of its answer is printed,
//! with the byte counts its flags are written in.

use std::time::Duration;

/// How long `tether call` lets a call take by default (`--max-time`), a stream's every
/// response included: long enough for any request/response method, short enough that a
/// plugin that never ends a stream does not hold a script forever.
pub(crate) const DEFAULT_MAX_TIME: Duration = Duration::from_secs(5 * 60);

/// How many bytes of JSON lines `tether call` prints by default (`--max-bytes`) before it
/// cancels a call that answers more: the responses are printed as they arrive and not kept,
/// so this bounds the output, not the host's memory (one response is at most
/// [`DEFAULT_MAX_MESSAGE_SIZE`], `--max-message-size`).
pub(crate) const DEFAULT_MAX_OUTPUT: ByteCount = ByteCount(256 << 20);

/// The largest response message `tether call` decodes by default (`--max-message-size`):
/// tonic's own default, 4 MiB, is smaller than real Terraform providers' schemas
/// (`GetProviderSchema`), for which Terraform itself accepts 64 MiB and terraform-plugin-go's
/// servers send up to 256 MiB; so does this.
pub(crate) const DEFAULT_MAX_MESSAGE_SIZE: ByteCount = ByteCount(256 << 20);

/// A number of bytes, written `N`, `NKiB`, `NMiB` or `NGiB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ByteCount(pub(crate) u64);

/// The units `ByteCount` reads and writes, largest first.
const BYTE_UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];

impl std::str::FromStr for ByteCount {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let (digits, unit) = BYTE_UNITS
            .iter()
            .find_map(|&(suffix, size)| Some((text.strip_suffix(suffix)?, size)))
            .unwrap_or((text, 1));
        digits
            .trim()
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(unit))
            .map(Self)
            .ok_or_else(|| format!("`{text}` is not a number of bytes (e.g. 1048576, 64MiB, 2GiB)"))
    }
}

impl std::fmt::Display for ByteCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match BYTE_UNITS
            .iter()
            .find(|&&(_, size)| self.0 >= size && self.0.is_multiple_of(size))
        {
            Some((suffix, size)) => write!(f, "{}{suffix}", self.0 / size),
            None => write!(f, "{}", self.0),
        }
    }
}
