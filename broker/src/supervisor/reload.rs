//! Reloading a catalog: [`Supervisor::reload`] upgrades every plugin whose manifest or program
//! file changed, and says what it left as it was.

use std::fmt;

use crate::catalog::Catalog;
use crate::supervisor::Supervisor;
use crate::supervisor::error::UpgradeError;
use crate::supervisor::upgrade::UpgradeReport;

/// What [`Supervisor::reload`] did, plugin by plugin (each list sorted by name).
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ReloadReport {
    /// Plugins upgraded to their new manifest or program.
    pub upgraded: Vec<UpgradeReport>,
    /// Plugins whose upgrade failed: their running version keeps serving.
    pub failed: Vec<UpgradeError>,
    /// Plugins left as they were, and why.
    pub unchanged: Vec<(String, Unchanged)>,
}

/// Why [`Supervisor::reload`] left a plugin as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unchanged {
    /// Neither its manifest nor its program file changed.
    Same,
    /// It is new in the catalog: a supervisor runs the plugins it was built with, so running
    /// it takes a restart of the host.
    Added,
    /// It is missing from the new catalog (removed, or its manifest is now broken: see
    /// [`Catalog::errors`]); the version the supervisor has stays.
    Missing,
}

impl Supervisor {
    /// Upgrades ([`upgrade`](Self::upgrade)) every plugin of `catalog` whose manifest differs
    /// from the one the supervisor runs, or whose program file was replaced since (another
    /// device, inode, size or modification time) — all at once, each as `upgrade` does it — and
    /// returns when every one is done.
    ///
    /// ```no_run
    /// # async fn f(supervisor: tether_broker::Supervisor) -> std::io::Result<()> {
    /// let catalog = tether_broker::Catalog::load_dir("/etc/tether/plugins".as_ref())?;
    /// let report = supervisor.reload(&catalog).await;
    /// println!("{report}");
    /// for failed in &report.failed {
    ///     eprintln!("{failed}"); // its running version keeps serving
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn reload(&self, catalog: &Catalog) -> ReloadReport {
        let mut report = ReloadReport::default();
        let mut upgrades = tokio::task::JoinSet::new();
        for manifest in catalog.manifests() {
            let name = manifest.name.clone();
            let Some(slot) = self.inner.slots.get(&name) else {
                report.unchanged.push((name, Unchanged::Added));
                continue;
            };
            if !slot.state.lock().await.version.differs_from(manifest) {
                report.unchanged.push((name, Unchanged::Same));
                continue;
            }
            let (supervisor, manifest) = (self.clone(), manifest.clone());
            upgrades.spawn(async move { supervisor.upgrade(manifest).await });
        }
        for name in self.inner.slots.keys() {
            if catalog.get(name).is_none() {
                report.unchanged.push((name.clone(), Unchanged::Missing));
            }
        }
        while let Some(done) = upgrades.join_next().await {
            match done {
                Ok(Ok(upgraded)) => report.upgraded.push(upgraded),
                Ok(Err(failed)) => report.failed.push(failed),
                // An upgrade panicked: the panic is the caller's, as if it had run inline.
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            }
        }
        report.upgraded.sort_by(|a, b| a.plugin.cmp(&b.plugin));
        report.failed.sort_by(|a, b| a.plugin().cmp(b.plugin()));
        report.unchanged.sort_by(|a, b| a.0.cmp(&b.0));
        report
    }
}

impl fmt::Display for ReloadReport {
    /// One line: how many plugins were upgraded, failed, unchanged, added and missing, with the
    /// names of all but the unchanged.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = |which: Unchanged| -> Vec<&str> {
            self.unchanged
                .iter()
                .filter(|(_, why)| *why == which)
                .map(|(name, _)| name.as_str())
                .collect()
        };
        let upgraded: Vec<&str> = self.upgraded.iter().map(|r| r.plugin.as_str()).collect();
        let failed: Vec<&str> = self.failed.iter().map(UpgradeError::plugin).collect();
        let (added, missing) = (names(Unchanged::Added), names(Unchanged::Missing));
        write!(
            f,
            "catalog reloaded: {} upgraded {upgraded:?}, {} failed {failed:?} (still serving their running version), {} unchanged",
            upgraded.len(),
            failed.len(),
            names(Unchanged::Same).len()
        )?;
        if !added.is_empty() {
            write!(
                f,
                ", {} new {added:?} (restart the host to run them)",
                added.len()
            )?;
        }
        if !missing.is_empty() {
            write!(
                f,
                ", {} missing from the catalog {missing:?} (kept as they were)",
                missing.len()
            )?;
        }
        Ok(())
    }
}
