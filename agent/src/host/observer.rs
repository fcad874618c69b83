//! What a run tells its caller as it goes: steps done and the plugins' progress reports, for a
//! progress bar or log lines. Every method has an empty default.

use std::fmt;

use tether_proto::text::escape;

use super::workflow::Step;

/// A progress report a plugin sent through `tether.agent.v1.Host/ReportProgress`.
#[derive(Debug, Clone, Copy)]
pub struct ProgressEvent<'a> {
    /// The plugin that reported.
    pub plugin: &'a str,
    /// The step it reported for (as the plugin said).
    pub step: &'a str,
    /// Units of work done.
    pub done: u64,
    /// Units of work in all; 0 when unknown.
    pub total: u64,
    /// What it is doing.
    pub message: &'a str,
}

impl ProgressEvent<'_> {
    /// `done/total`, or `done` when the total is unknown.
    #[must_use]
    pub fn amount(&self) -> String {
        match self.total {
            0 => format!("{}", self.done),
            total => format!("{}/{total}", self.done),
        }
    }
}

/// `STEP (PLUGIN): MESSAGE AMOUNT`, what the plugin sent [escaped](tether_proto::text) for a
/// terminal.
impl fmt::Display for ProgressEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {} {}",
            escape(self.step),
            self.plugin,
            escape(self.message),
            self.amount()
        )
    }
}

/// Told about a run as it goes; shared with the host services, so `Send + Sync`.
pub trait Observer: Send + Sync {
    /// `step` ran and succeeded; `message` is its one-line summary.
    fn step_done(&self, step: &Step, message: &str) {
        let _ = (step, message);
    }

    /// A plugin reported progress.
    fn progress(&self, event: &ProgressEvent<'_>) {
        let _ = event;
    }
}

/// Tells nothing to nobody.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Observer for Silent {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_event_shows_its_amount_with_the_total_when_known() {
        let mut event = ProgressEvent {
            plugin: "checksum",
            step: "sum",
            done: 3,
            total: 10,
            message: "fetching x",
        };
        assert_eq!(event.to_string(), "sum (checksum): fetching x 3/10");
        event.total = 0;
        assert_eq!(event.amount(), "3");
    }
}
