//! One use of a running plugin: a [`Lease`], and how a call through it fails when the plugin
//! crashes, hangs or keeps running out its deadline.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tether_transport::internal::lock;

use tether_transport::telemetry::TracedChannel;

use crate::supervisor::error::{UseError, UseErrorKind};
use crate::supervisor::{Ended, Running};

/// After a call fails, how long to wait for the plugin's exit to be noticed before reporting the
/// call's own error instead of a crash. Longer than [`CRASH_STDERR_TIMEOUT`].
pub const CRASH_SETTLE_TIMEOUT: Duration = Duration::from_secs(1);

/// After a crash, how long to wait for the last bytes of the plugin's stderr before reporting
/// the crash with the tail read so far.
pub const CRASH_STDERR_TIMEOUT: Duration = Duration::from_millis(300);

/// How long [`Lease::call`] waits for a call's answer before failing it with
/// [`UseErrorKind::DeadlineExceeded`]. A host-side deadline: it holds even when the plugin ignores
/// the gRPC deadline (`grpc-timeout`) a request carries. Give a call a shorter deadline with
/// [`tonic::Request::set_timeout`]; override for all calls with [`SupervisorBuilder::call_timeout`](crate::supervisor::SupervisorBuilder::call_timeout).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Thirty years, in seconds: the deadline of a call whose timeout an instant cannot hold.
const THIRTY_YEARS_SECS: u64 = 30 * 365 * 24 * 60 * 60;

/// The recycling policy for hung handlers: after this many calls in a row on one plugin process
/// ran out their deadline — [`DEFAULT_CALL_TIMEOUT`] (or [`SupervisorBuilder::call_timeout`](crate::supervisor::SupervisorBuilder::call_timeout)), or
/// a gRPC status `DEADLINE_EXCEEDED` (grpc-go) or `CANCELLED: Timeout expired` (tonic) — the
/// plugin counts as hung: it is killed (its whole process group) and started afresh on the next
/// [`Supervisor::acquire`](crate::Supervisor::acquire). A call that ends any other way resets the count. Health checks cannot
/// see this kind of hang: the health service answers while a handler is stuck. Override with
/// [`SupervisorBuilder::recycle_after_deadlines`](crate::supervisor::SupervisorBuilder::recycle_after_deadlines) (`0` never recycles).
pub const DEFAULT_RECYCLE_AFTER_DEADLINES: u32 = 3;

/// One use of a running plugin: keeps it from being stopped as idle while held.
#[derive(Debug)]
pub struct Lease {
    pub(super) plugin: String,
    pub(super) channel: TracedChannel,
    pub(super) pid: u32,
    pub(super) running: Arc<Running>,
}

pub(super) fn lease(plugin: &str, running: &Arc<Running>) -> Lease {
    running.leases.send_modify(|n| *n += 1);
    Lease {
        plugin: plugin.to_owned(),
        channel: running.channel.clone(),
        pid: running.pid,
        running: Arc::clone(running),
    }
}

impl Lease {
    /// The gRPC channel to the plugin. Prefer [`call`](Self::call), which turns a crash during
    /// the call into [`UseErrorKind::Crashed`].
    #[must_use]
    pub fn channel(&self) -> TracedChannel {
        self.channel.clone()
    }

    /// The plugin's callback broker (go-plugin's `GRPCBroker`), as
    /// [`PluginClient::broker`](crate::PluginClient::broker): serve a service to the plugin
    /// for one call under a fresh id and send the id in the call, or dial a service the plugin
    /// serves under an id it sent. It belongs to this run of the plugin: closed when the
    /// plugin ends (a restarted plugin has a new one).
    ///
    /// ```no_run
    /// # async fn f(lease: tether_broker::Lease) -> Result<(), Box<dyn std::error::Error>> {
    /// # let adder = tonic_health::server::health_reporter().1;
    /// let broker = lease.broker();
    /// let id = broker.next_id();
    /// let served = broker.accept_and_serve(id, adder).await?; // e.g. `AddHelperServer::new(..)`
    /// // … a call through `lease.call(..)` carries `id`; the plugin dials it (go-plugin:
    /// // `broker.Dial(id)`) while the call runs …
    /// drop(served); // stops serving `id`
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn broker(&self) -> crate::callbacks::GrpcBroker {
        self.running.broker.clone()
    }

    /// The plugin's process id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// What limits the number of the plugin's processes (see
    /// [`PluginClient::process_limit`](crate::PluginClient::process_limit)).
    #[must_use]
    pub fn process_limit(&self) -> &crate::confine::ProcessLimit {
        &self.running.process_limit
    }

    /// How the plugin is isolated from the host's world (see
    /// [`PluginClient::world_mechanism`](crate::PluginClient::world_mechanism)).
    #[must_use]
    pub fn world_mechanism(&self) -> crate::confine::WorldMechanism {
        self.running.world
    }

    /// Runs one call (`f` gets the channel); if the plugin crashes or hangs meanwhile the call
    /// fails at once with [`UseErrorKind::Crashed`] (exit status or signal and the tail of its
    /// stderr) or [`UseErrorKind::Hung`]. `f` may hold a whole streaming conversation (open the
    /// stream, read and write it, return the result): a crash ends it the same way.
    ///
    /// The call may take [`DEFAULT_CALL_TIMEOUT`] (see [`SupervisorBuilder::call_timeout`](crate::supervisor::SupervisorBuilder::call_timeout)); calls
    /// that keep running out their deadline get the plugin recycled
    /// ([`DEFAULT_RECYCLE_AFTER_DEADLINES`]).
    ///
    /// # Errors
    /// As described, [`UseErrorKind::DeadlineExceeded`], or [`UseErrorKind::Call`] with the plugin's
    /// own error status.
    pub async fn call<T, F, Fut>(&self, f: F) -> Result<T, UseError>
    where
        F: FnOnce(TracedChannel) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let mut ended = self.running.ended.subscribe();
        let timeout = self.running.call_timeout;
        let now = Instant::now();
        // A timeout beyond what an instant can hold (`Duration::MAX`) never runs out.
        let deadline = now
            .checked_add(timeout)
            .unwrap_or_else(|| now + Duration::from_secs(THIRTY_YEARS_SECS));
        let result = tokio::select! {
            biased;
            // The channel knows the deadline: a call abandoned at it is measured and traced as
            // `DEADLINE_EXCEEDED`, not cancelled.
            result = tokio::time::timeout_at(deadline.into(), f(self.channel.clone().deadline(deadline))) => result,
            Ok(end) = ended.wait_for(Option::is_some) => {
                return Err(self.ended_error(end.clone()));
            }
        };
        let result = match result {
            Ok(result) => result,
            Err(_elapsed) => {
                let recycled = self.count_deadline(true);
                return Err(UseError::new(
                    &self.plugin,
                    UseErrorKind::DeadlineExceeded { timeout, recycled },
                ));
            }
        };
        match result {
            Ok(response) => {
                self.count_deadline(false);
                Ok(response.into_inner())
            }
            Err(status) => {
                if self.count_deadline(ran_out_of_time(&status)) {
                    return Err(UseError::new(
                        &self.plugin,
                        UseErrorKind::Call {
                            status: Box::new(status),
                        },
                    ));
                }
                // A transport error may arrive before the exit is noticed.
                let end =
                    tokio::time::timeout(CRASH_SETTLE_TIMEOUT, ended.wait_for(Option::is_some))
                        .await;
                match end {
                    Ok(Ok(end)) => Err(self.ended_error(end.clone())),
                    _ => Err(UseError::new(
                        &self.plugin,
                        UseErrorKind::Call {
                            status: Box::new(status),
                        },
                    )),
                }
            }
        }
    }

    /// Counts a call that ran out of time (`true`) or resets the count; whether this call
    /// completed the run after which the plugin is recycled.
    fn count_deadline(&self, ran_out: bool) -> bool {
        let running = &self.running;
        if !ran_out {
            running.deadlines_in_a_row.store(0, Ordering::Relaxed);
            return false;
        }
        let in_a_row = running.deadlines_in_a_row.fetch_add(1, Ordering::Relaxed) + 1;
        let recycle =
            running.recycle_after_deadlines > 0 && in_a_row == running.recycle_after_deadlines;
        if recycle {
            tracing::warn!(
                plugin = self.plugin,
                in_a_row,
                "calls keep running out their deadline; recycling the plugin"
            );
            running.recycle.notify_one();
        }
        recycle
    }

    fn ended_error(&self, ended: Option<Ended>) -> UseError {
        let kind = match ended {
            Some(Ended::Crashed(status, stderr_tail)) => UseErrorKind::Crashed {
                status,
                stderr_tail,
            },
            Some(Ended::Hung(reason)) => UseErrorKind::Hung { reason },
            Some(Ended::Replaced(grace)) => UseErrorKind::Replaced { grace },
            Some(Ended::Stopped) | None => UseErrorKind::ShutDown,
        };
        UseError::new(&self.plugin, kind)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        *lock(&self.running.last_release) = Instant::now();
        self.running
            .leases
            .send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Whether `status` says the call ran out its deadline: `DEADLINE_EXCEEDED` (grpc-go and the
/// gRPC spec) or tonic's `CANCELLED: Timeout expired` (its server enforcing `grpc-timeout`).
fn ran_out_of_time(status: &tonic::Status) -> bool {
    match status.code() {
        tonic::Code::DeadlineExceeded => true,
        tonic::Code::Cancelled => status.message() == TONIC_TIMEOUT_MESSAGE,
        _ => false,
    }
}

/// The message of tonic's `TimeoutExpired` error, which its server and client turn into
/// `CANCELLED` when a `grpc-timeout` runs out.
const TONIC_TIMEOUT_MESSAGE: &str = "Timeout expired";
