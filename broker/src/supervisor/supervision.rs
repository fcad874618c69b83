//! Watching a running plugin: its exit, periodic health checks, idle stop, and killing it when
//! hung.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tether_transport::internal::lock;

use crate::launch::client::PluginClient;
use crate::launch::health::{self, HealthFailure};
use crate::supervisor::lease::CRASH_STDERR_TIMEOUT;
use crate::supervisor::{Crash, Ended, Inner, Running, Slot};
use crate::telemetry::metrics::CrashReason;

/// How often a running plugin's health is checked. Override with
/// [`SupervisorBuilder::health_interval`](crate::supervisor::SupervisorBuilder::health_interval).
pub const DEFAULT_HEALTH_INTERVAL: Duration = Duration::from_secs(10);

/// How long a periodic health check may take before the plugin counts as hung and is killed.
/// Override with [`SupervisorBuilder::health_timeout`](crate::supervisor::SupervisorBuilder::health_timeout).
pub const DEFAULT_HUNG_TIMEOUT: Duration = Duration::from_secs(5);

/// Watches one running plugin until it crashes, hangs or idles out.
pub(super) async fn supervise(inner: Arc<Inner>, slot: Arc<Slot>, running: Arc<Running>) {
    let plugin = slot.name.clone();
    let Some(exited) = lock(&running.client).as_ref().map(PluginClient::exited) else {
        return;
    };
    tokio::pin!(exited);
    let mut leases = running.leases.subscribe();
    let mut health = tokio::time::interval(inner.options.health_interval);
    health.tick().await; // The first tick is immediate; the start just checked health.
    let idle_timeout = running.version.manifest.idle_timeout;
    loop {
        let idle_deadline = {
            let in_use = *leases.borrow_and_update() > 0;
            (!in_use).then(|| *lock(&running.last_release) + idle_timeout)
        };
        tokio::select! {
            status = &mut exited => {
                if running.ended.borrow().is_some() {
                    return; // We ended it.
                }
                let Some(client) = running.take_client() else {
                    return; // Being ended by a shutdown.
                };
                let stderr_tail = client.final_stderr_tail(CRASH_STDERR_TIMEOUT).await;
                tracing::warn!(plugin, %status, stderr_tail = %tether_proto::text::escape(&stderr_tail), "plugin crashed");
                let mut state = slot.state.lock().await;
                // A replaced instance's crash does not count against its successor.
                if state.running.as_ref().is_some_and(|r| Arc::ptr_eq(r, &running)) {
                    state.running = None;
                    state.crashes.push_back(Crash { at: Instant::now(), status, stderr_tail: stderr_tail.clone() });
                    state.restart_due = true;
                }
                drop(state);
                running.process_ended();
                if let Some(metrics) = &running.version.metrics {
                    metrics.crashed(CrashReason::Exit);
                }
                running.ended.send_replace(Some(Ended::Crashed(status, stderr_tail)));
                drop(client);
                return;
            }
            _ = health.tick() => {
                let Err(failure) = health::check(running.channel.inner().clone(), inner.options.health_timeout).await else {
                    continue;
                };
                let exited_meanwhile = lock(&running.client)
                    .as_ref()
                    .is_none_or(|c| c.exit_status().is_some());
                if exited_meanwhile {
                    continue; // A crash, not a hang: the exit branch reports it next.
                }
                let reason = match failure {
                    HealthFailure::Timeout => format!("no answer to a health check within {:?}", inner.options.health_timeout),
                    HealthFailure::Rpc(status) => format!("the health check failed: {status}"),
                    HealthFailure::NotServing(s) => format!("it reports {s}"),
                };
                kill_hung(&slot, &running, reason).await;
                return;
            }
            () = running.recycle.notified() => {
                let reason = format!(
                    "{} calls in a row ran out their deadline",
                    running.recycle_after_deadlines
                );
                kill_hung(&slot, &running, reason).await;
                return;
            }
            () = sleep_until_opt(idle_deadline) => {
                let mut state = slot.state.lock().await;
                if *leases.borrow() > 0 {
                    continue; // Acquired again meanwhile.
                }
                if state.running.as_ref().is_some_and(|r| Arc::ptr_eq(r, &running)) {
                    state.running = None;
                }
                drop(state);
                tracing::info!(plugin, ?idle_timeout, "stopping idle plugin");
                running.process_ended();
                if let Some(metrics) = &running.version.metrics {
                    metrics.idle_stopped();
                }
                stop(&plugin, &running, Ended::Stopped).await;
                return;
            }
            Ok(()) = leases.changed() => {}
        }
    }
}

/// Ends a hung plugin: no new leases get it, calls in flight fail with [`UseErrorKind::Hung`](crate::error::UseErrorKind::Hung), and
/// its process group is killed.
async fn kill_hung(slot: &Slot, running: &Arc<Running>, reason: String) {
    let plugin = &slot.name;
    tracing::warn!(plugin, reason, "plugin hung; killing it");
    {
        let mut state = slot.state.lock().await;
        if state
            .running
            .as_ref()
            .is_some_and(|r| Arc::ptr_eq(r, running))
        {
            state.running = None;
            state.restart_due = true;
        }
    }
    running.process_ended();
    if let Some(metrics) = &running.version.metrics {
        metrics.crashed(CrashReason::Hang);
    }
    running.ended.send_replace(Some(Ended::Hung(reason)));
    if let Some(client) = running.take_client()
        && let Err(e) = client.kill().await
    {
        tracing::warn!(plugin, error = %e, "killing the hung plugin failed");
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

pub(super) async fn stop(plugin: &str, running: &Running, why: Ended) {
    running.ended.send_replace(Some(why));
    if let Some(client) = running.take_client()
        && let Err(e) = client.shutdown().await
    {
        tracing::warn!(plugin, error = %e, "stopping the plugin failed");
    }
}
