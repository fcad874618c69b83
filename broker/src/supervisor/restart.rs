//! The restart policy: crashes within the manifest's window, exponential backoff, and giving up
//! ([`UseErrorKind::KeepsCrashing`]).

use std::time::Instant;

use crate::supervisor::error::{UseError, UseErrorKind};
use crate::supervisor::{Slot, SlotState};

impl crate::supervisor::Supervisor {
    pub(super) async fn wait_for_restart(
        &self,
        slot: &Slot,
        state: &mut SlotState,
    ) -> Result<(), UseError> {
        let policy = state.version.manifest.restart;
        let now = Instant::now();
        while state
            .crashes
            .front()
            .is_some_and(|c| now.duration_since(c.at) > policy.window)
        {
            state.crashes.pop_front();
        }
        let Some(last) = state.crashes.back().cloned() else {
            return Ok(());
        };
        let crashes = state.crashes.len();
        if crashes > usize::try_from(policy.max_restarts).unwrap_or(usize::MAX) {
            return Err(UseError::new(
                &slot.name,
                UseErrorKind::KeepsCrashing {
                    crashes,
                    window: policy.window,
                    max_restarts: policy.max_restarts,
                    last_status: last.status,
                    stderr_tail: last.stderr_tail,
                },
            ));
        }
        let backoff = policy.backoff(u32::try_from(crashes).unwrap_or(u32::MAX));
        let wait = backoff.saturating_sub(last.at.elapsed());
        if !wait.is_zero() {
            tracing::info!(plugin = %slot.name, ?wait, crashes, "restarting a crashed plugin after backoff");
            tokio::time::sleep(wait).await;
        }
        Ok(())
    }
}
