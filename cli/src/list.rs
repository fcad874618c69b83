//! `tether list`: the catalog's plugins, one line each.

use crate::args::CatalogArgs;
use crate::error::CliError;
use crate::installation::Installation;
use crate::output::outln;

/// Prints one line per plugin; bad manifests go to stderr and make the exit status non-zero.
pub(crate) fn run(args: &CatalogArgs) -> Result<(), CliError> {
    let install = Installation::load(args)?;
    outln!("catalog {}", install.describe())?;
    for m in install.catalog.manifests() {
        let mut line = format!("{:<16} {}", m.name, m.command.display());
        for arg in &m.args {
            line.push(' ');
            line.push_str(arg);
        }
        if !m.secrets.is_empty() {
            line.push_str(&format!("  secrets: {}", m.secrets.join(", ")));
        }
        if !m.config.is_empty() {
            line.push_str(&format!("  config: {}", m.config.join(", ")));
        }
        line.push_str(&format!("  sandbox: {}", m.sandbox));
        outln!("{line}")?;
    }
    for bad in &install.bad_manifests {
        eprintln!("tether: bad manifest: {bad}");
    }
    if install.bad_manifests.is_empty() {
        Ok(())
    } else {
        Err(CliError::CatalogProblems {
            count: install.bad_manifests.len(),
        })
    }
}
