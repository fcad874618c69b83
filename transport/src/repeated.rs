//! Warnings a peer can cause once per message it sends: at most one line per interval each,
//! the rest counted and reported as "… and N more" (issue 22: a flood of 20,000 broker ids
//! made 19,000 warning lines).

use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::internal::lock;

/// How often one kind of warning a peer causes is logged at most; the events in between are
/// counted, and the next line (or the end of the connection) says how many there were.
/// Override with [`GrpcBrokerConfig::repeated_warning_interval`](crate::GrpcBrokerConfig::repeated_warning_interval).
pub const DEFAULT_REPEATED_WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// One kind of warning about one peer, logged at most once per interval.
pub(crate) struct RepeatedWarning {
    /// What happened, as the warning says it (the summary repeats it).
    what: &'static str,
    /// The peer, as logs name it.
    peer: String,
    interval: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// When the last line was logged.
    last_line: Option<Instant>,
    /// Events since then that were counted, not logged.
    held: u64,
}

/// What to do with one event: log it (saying how many were held back before it), or count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Log a line; `held` events since the last line were only counted.
    Log { held: u64 },
    /// Counted; no line.
    Held,
}

/// ` (and N more since the last such line)`, or nothing when none were held back.
pub(crate) struct AndMore(pub(crate) u64);

impl fmt::Display for AndMore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            n => write!(f, " (and {n} more since the last such line)"),
        }
    }
}

impl RepeatedWarning {
    pub(crate) fn new(what: &'static str, peer: &str, interval: Duration) -> Self {
        Self {
            what,
            peer: peer.to_owned(),
            interval,
            state: Mutex::new(State::default()),
        }
    }

    /// What happened, for the warning's message.
    pub(crate) fn what(&self) -> &'static str {
        self.what
    }

    /// One more event at `now`.
    pub(crate) fn admit(&self, now: Instant) -> Admit {
        let mut state = lock(&self.state);
        match state.last_line {
            Some(last) if now.saturating_duration_since(last) < self.interval => {
                state.held += 1;
                Admit::Held
            }
            _ => {
                state.last_line = Some(now);
                Admit::Log {
                    held: std::mem::take(&mut state.held),
                }
            }
        }
    }

    /// Logs how many events were held back since the last line, if any (when the peer goes
    /// away: nothing later would say so).
    pub(crate) fn flush(&self) {
        let held = std::mem::take(&mut lock(&self.state).held);
        if held > 0 {
            tracing::warn!(peer = self.peer, held, "… and {held} more: {}", self.what);
        }
    }
}

impl Drop for RepeatedWarning {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_and_the_count_of_the_rest_with_the_next_line() {
        let warning = RepeatedWarning::new("dropped", "p", Duration::from_secs(10));
        let start = Instant::now();
        assert_eq!(warning.admit(start), Admit::Log { held: 0 });
        for i in 1..=19_999 {
            assert_eq!(warning.admit(start + Duration::from_micros(i)), Admit::Held);
        }
        assert_eq!(
            warning.admit(start + Duration::from_secs(10)),
            Admit::Log { held: 19_999 }
        );
        assert_eq!(warning.admit(start + Duration::from_secs(11)), Admit::Held);
        assert_eq!(lock(&warning.state).held, 1);
        warning.flush();
        assert_eq!(lock(&warning.state).held, 0);
    }

    #[test]
    fn and_more_says_nothing_when_nothing_was_held_back() {
        assert_eq!(AndMore(0).to_string(), "");
        assert_eq!(
            AndMore(7).to_string(),
            " (and 7 more since the last such line)"
        );
    }
}
