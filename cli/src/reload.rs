//! `tether run`'s catalog reload: on `SIGHUP` the catalog directory is read again and every
//! plugin whose manifest or program file changed is upgraded without a failed call
//! ([`Supervisor::reload`]); the outcome, plugin by plugin, goes to stderr.

use tether_broker::Supervisor;
use tether_broker::error::UpgradeError;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use crate::args::CatalogArgs;
use crate::installation::Installation;

/// Reloads the catalog on each `SIGHUP` until [`stop`](Self::stop)ped.
pub(crate) struct Reloads {
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Reloads {
    /// Listens for `SIGHUP`: each one reloads `catalog` into `supervisor`. Without a signal
    /// handler (it cannot be installed) there is no reload, and a warning says so.
    pub(crate) fn on_sighup(supervisor: Supervisor, catalog: CatalogArgs) -> Self {
        let (stop, mut stopped) = watch::channel(false);
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(hangups) => hangups,
            Err(e) => {
                tracing::warn!(error = %e, "cannot handle SIGHUP: the catalog is not reloaded");
                return Self { stop, task: None };
            }
        };
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stopped.changed() => return,
                    Some(()) = hangups.recv() => reload(&supervisor, &catalog).await,
                }
            }
        });
        Self {
            stop,
            task: Some(task),
        }
    }

    /// Stops listening; a reload under way finishes first (its upgrades are not cut short).
    pub(crate) async fn stop(mut self) {
        self.stop.send_replace(true);
        if let Some(task) = self.task.take()
            && let Err(e) = task.await
        {
            tracing::warn!(error = %e, "the catalog reload ended abnormally");
        }
    }
}

/// Reads the catalog again and upgrades what changed, saying what became of each plugin.
async fn reload(supervisor: &Supervisor, catalog: &CatalogArgs) {
    eprintln!("tether: SIGHUP: reloading the catalog");
    let install = match Installation::load(catalog) {
        Ok(install) => install,
        Err(e) => {
            eprintln!("tether: the catalog was not reloaded, the plugins run as they were: {e}");
            return;
        }
    };
    for bad in install.bad_manifests() {
        eprintln!("tether: bad manifest, its plugin runs as it was: {bad}");
    }
    let report = supervisor.reload(&install.catalog).await;
    for upgraded in &report.upgraded {
        eprintln!("tether: {upgraded}");
    }
    for failed in &report.failed {
        eprintln!("tether: {}", one_line(failed));
    }
    eprintln!("tether: {report}");
}

/// `failed` on one line: what a plugin printed is already escaped, its line breaks included.
fn one_line(failed: &UpgradeError) -> String {
    failed.to_string().replace('\n', " ")
}
