//! `tether list`: the catalog's plugins, two lines each: the command, then its effective
//! privileges.

use crate::args::CatalogArgs;
use crate::error::CliError;
use crate::installation::Installation;
use crate::output::outln;
use crate::privileges;

/// Prints two lines per plugin; bad manifests go to stderr and make the exit status non-zero.
pub(crate) fn run(args: &CatalogArgs) -> Result<(), CliError> {
    let install = Installation::load(args)?;
    outln!("catalog {}", install.describe())?;
    for m in install.catalog.manifests() {
        let mut line = format!("{:<16} {}", m.name, m.command.display());
        for arg in &m.args {
            line.push(' ');
            line.push_str(arg);
        }
        line.push_str(&format!("  runner: {}", m.runner));
        outln!("{line}")?;
        let facts = privileges::facts(m, &install.grants);
        outln!("{:<16} {}", "", privileges::line(&facts))?;
    }
    for bad in install.bad_manifests() {
        eprintln!("tether: bad manifest: {bad}");
    }
    if install.bad_manifests().is_empty() {
        Ok(())
    } else {
        Err(CliError::CatalogProblems {
            count: install.bad_manifests().len(),
        })
    }
}
