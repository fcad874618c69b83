//! `tether check`: every problem of a catalog, listed.

use std::os::unix::fs::PermissionsExt as _;
use tether_broker::launch::{RUNSC_INSTALL_HINT, Runner};

use tether_broker::{Manifest, PluginClient, ValueSource as _, confine::sha256_file};
use tether_proto::ValueKind;

use crate::args::CatalogArgs;
use crate::error::CliError;
use crate::installation::Installation;
use crate::output::outln;
use crate::privileges;

/// Prints `ok NAME` or `problem: …` lines, and each plugin's effective privileges (its
/// runtime resolved as a launch would); fails if there is a problem.
pub(crate) async fn run(args: &CatalogArgs) -> Result<(), CliError> {
    let install = Installation::load(args)?;
    outln!("catalog {}", install.describe())?;
    let mut problems: Vec<String> = install
        .bad_manifests
        .iter()
        .map(ToString::to_string)
        .collect();
    for manifest in install.catalog.manifests() {
        let mut found = check_plugin(&install, manifest);
        let mut facts = privileges::facts(manifest, &install.grants);
        match runtime_of(manifest).await {
            Ok(Some(resolved)) => {
                if let Some(fact) = facts.iter_mut().find(|(k, _)| *k == "runtime") {
                    fact.1 = privileges::runtime(&resolved);
                }
            }
            Ok(None) => {}
            Err(e) => found.push(format!(
                "{}: plugin `{}`: {e}",
                manifest.file.display(),
                manifest.name
            )),
        }
        if found.is_empty() {
            outln!("ok       {} (runner {})", manifest.name, manifest.runner)?;
        } else {
            outln!("problem  {} (runner {})", manifest.name, manifest.runner)?;
        }
        outln!("         {}", privileges::line(&facts))?;
        problems.extend(found);
    }
    for problem in &problems {
        outln!("problem: {problem}")?;
    }
    let warnings = grants_for_strangers(&install);
    for warning in &warnings {
        outln!("warning: {warning}")?;
    }
    if !tether_broker::confine::pathname_sockets_blocked() {
        outln!(
            "note:    this kernel's Landlock (before ABI 9) cannot refuse connect(2) on a pathname unix socket: one a plugin can reach (in a directory it may read; anywhere without namespaces, e.g. /run/docker.sock) is protected only by its file permissions"
        )?;
    }
    if problems.is_empty() {
        let warned = match warnings.len() {
            0 => String::new(),
            1 => ", 1 warning".to_owned(),
            n => format!(", {n} warnings"),
        };
        outln!(
            "catalog {}: {} plugins, no problems{warned}",
            install.dir.display(),
            install.catalog.len()
        )?;
        Ok(())
    } else {
        Err(CliError::CatalogProblems {
            count: problems.len(),
        })
    }
}

/// A warning for each plugin the grants file grants something although the catalog has no
/// manifest for it ([`Grants::strangers`](tether_broker::Grants::strangers): a misspelt name
/// grants nothing, and a removed plugin's grants linger). A plugin whose manifest is broken is
/// in the catalog: its problems are listed already.
fn grants_for_strangers(install: &Installation) -> Vec<String> {
    install
        .grants
        .strangers(&install.catalog)
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// What `m`'s runtime resolves to here (the interpreter is asked, confined, as at launch).
async fn runtime_of(
    m: &Manifest,
) -> Result<Option<tether_broker::launch::ResolvedRuntime>, tether_broker::launch::RuntimeError> {
    let mut builder = PluginClient::builder(&m.command)
        .args(&m.args)
        .sandbox(m.confinement.sandbox)
        .runtime(m.runtime);
    for name in &m.confinement.env_allow {
        builder = builder.env_allow(name);
    }
    // A pinned binary is not run to ask; the Pod runner's program is in its image.
    if m.sha256.is_some() || m.runner.name() == "kubernetes" {
        return Ok(None);
    }
    builder.resolve_runtime().await
}

/// The problems of one plugin.
fn check_plugin(install: &Installation, m: &Manifest) -> Vec<String> {
    let mut problems = Vec::new();
    let file = m.file.display();
    problems.extend(privileges::refusals(install.grants.refusals(m)));
    problems.extend(privileges::host_problems(m, &install.grants));
    for (kind, names, source) in [
        (ValueKind::Secret, &m.secrets, &install.secrets),
        (ValueKind::Config, &m.config, &install.config),
    ] {
        for name in names {
            match source.fetch(name) {
                Ok(Some(_)) => {}
                Ok(None) => problems.push(format!(
                    "{file}: plugin `{}` needs {kind} `{name}`, which is not in {}",
                    m.name,
                    source.describe()
                )),
                Err(e) => problems.push(format!(
                    "{file}: plugin `{}`: cannot read {kind} `{name}` from {}: {e}",
                    m.name,
                    source.describe()
                )),
            }
        }
    }
    for (key, paths) in [
        ("sandbox_allow_exec", &m.confinement.sandbox_allow_exec),
        ("sandbox_allow_read", &m.confinement.sandbox_allow_read),
    ] {
        for path in paths {
            if !path.is_dir() {
                problems.push(format!(
                    "{file}: plugin `{}`: {key} names {}, which is not a directory here; the plugin would not start confined",
                    m.name,
                    path.display()
                ));
            }
        }
    }
    if let Runner::Gvisor(options) = &m.runner
        && options.installed_runsc().is_none()
    {
        problems.push(format!(
            "{file}: plugin `{}` runs under the gvisor runner, but {} is not installed: {RUNSC_INSTALL_HINT}",
            m.name,
            options.runsc_program().display()
        ));
    }
    if m.runner.name() == "kubernetes" {
        // Its program is a path in the image the manifest pins; nothing of it is on this host.
        return problems;
    }
    match std::fs::metadata(&m.command) {
        Err(e) => problems.push(match install.check_binary(&m.name) {
            Err(CliError::MissingBinary { searched, .. }) => format!(
                "{file}: plugin `{}`: its program is in none of the places searched: {searched}; build or install it there",
                m.name
            ),
            _ => format!(
                "{file}: plugin `{}`: binary {} is missing ({e}); build or install it",
                m.name,
                m.command.display()
            ),
        }),
        Ok(meta) if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 => {
            problems.push(format!(
                "{file}: plugin `{}`: {} is not an executable file",
                m.name,
                m.command.display()
            ));
        }
        Ok(_) => {
            if let Some(expected) = &m.sha256 {
                match sha256_file(&m.command) {
                    Ok(actual) if &actual == expected => {}
                    Ok(actual) => problems.push(format!(
                        "{file}: plugin `{}`: binary {} has SHA-256 {actual}, the manifest expects {expected}",
                        m.name,
                        m.command.display()
                    )),
                    Err(e) => problems.push(format!(
                        "{file}: plugin `{}`: cannot hash {}: {e}",
                        m.name,
                        m.command.display()
                    )),
                }
            }
        }
    }
    problems
}
