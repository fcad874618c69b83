//! `tether check`: every problem of a catalog, listed.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use tether_broker::launch::{RUNSC_INSTALL_HINT, ResolvedRuntime, Runner, RuntimeError};
use tether_broker::{Manifest, PluginClient, SandboxMode, ValueSource as _, confine::sha256_file};
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
        .bad_manifests()
        .iter()
        .map(ToString::to_string)
        .collect();
    for manifest in install.catalog.manifests() {
        let mut facts = privileges::facts(manifest, &install.grants);
        let runtime = runtime_of(manifest).await;
        let mut found = check_plugin(&install, manifest, &Exec::of(manifest, &runtime));
        match runtime {
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
async fn runtime_of(m: &Manifest) -> Result<Option<ResolvedRuntime>, RuntimeError> {
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

/// What a launch executes of a manifest's program file.
enum Exec {
    /// The file itself: it must be executable. Why the host executes it (no interpreter, a
    /// pinned digest, a runner that resolves none).
    Directly(&'static str),
    /// An interpreter, which reads the file (and the script it runs, when that is another
    /// file): they must be readable, not executable.
    Interpreter { script: Option<PathBuf> },
}

impl Exec {
    /// How `m`'s program runs, given its runtime as [`runtime_of`] resolved it, as a launch
    /// decides (`launch::interpreted::interpreter`): an interpreter only under the process
    /// runner, without a pinned digest, with the sandbox on and an interpreter detected.
    fn of(m: &Manifest, runtime: &Result<Option<ResolvedRuntime>, RuntimeError>) -> Self {
        if m.sha256.is_some() {
            return Self::Directly(
                "its SHA-256 is pinned, so the verified file itself is executed",
            );
        }
        if !matches!(m.runner, Runner::Process) {
            return Self::Directly("its runner executes the file itself");
        }
        match runtime {
            Ok(Some(resolved)) => Self::Interpreter {
                script: resolved.script.clone(),
            },
            // An interpreter was detected but cannot be resolved: that problem is listed.
            Err(_) => Self::Interpreter { script: None },
            Ok(None) if m.confinement.sandbox == SandboxMode::Off => Self::Directly(
                "with `sandbox = \"off\"` the host resolves no interpreter and executes the file itself",
            ),
            Ok(None) => Self::Directly(
                "no interpreter runs it (a Python or Node script needs a `#!` line naming its interpreter, or `runtime = \"python\"` or `\"node\"`)",
            ),
        }
    }
}

/// The problems of one plugin, whose program runs as `exec` says.
fn check_plugin(install: &Installation, m: &Manifest, exec: &Exec) -> Vec<String> {
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
        Ok(meta) if !meta.is_file() => problems.push(format!(
            "{}: plugin `{}`: {} is not a file; make `command` name the plugin's program",
            command_at(m),
            m.name,
            m.command.display()
        )),
        Ok(meta) => {
            match exec {
                Exec::Directly(why) if meta.permissions().mode() & 0o111 == 0 => {
                    problems.push(format!(
                        "{}: plugin `{}`: {} is not executable, and {why}: make it executable (`chmod +x {}`)",
                        command_at(m),
                        m.name,
                        m.command.display(),
                        m.command.display()
                    ));
                }
                Exec::Directly(_) => {}
                Exec::Interpreter { script } => problems.extend(unreadable(m, script.as_deref())),
            }
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

/// `file:line` of `m`'s `command` (the file alone when the line is not known).
pub(crate) fn command_at(m: &Manifest) -> String {
    match m.line_of("command") {
        Some(line) => format!("{}:{line}", m.file.display()),
        None => m.file.display().to_string(),
    }
}

/// The problems of an interpreted plugin's files: its interpreter reads the program file and
/// the script (when that is another file), which need not be executable but must be readable.
fn unreadable(m: &Manifest, script: Option<&Path>) -> Vec<String> {
    let mut files = vec![m.command.as_path()];
    files.extend(script.filter(|s| *s != m.command));
    files
        .into_iter()
        .filter_map(|path| {
            std::fs::File::open(path).err().map(|e| {
                format!(
                    "{}: plugin `{}`: its interpreter reads {}, which cannot be read ({e}); make it readable (`chmod a+r {}`)",
                    command_at(m),
                    m.name,
                    path.display(),
                    path.display()
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(extra: &str) -> Manifest {
        let text = format!(
            "name = \"p\"\ncommand = \"bin/p\"\n{extra}\n[handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\n"
        );
        Manifest::parse(&text, Path::new("/cat/p.toml")).unwrap()
    }

    #[test]
    fn a_pinned_digest_a_sandbox_off_or_no_interpreter_mean_the_file_itself_is_executed() {
        let pinned = manifest(&format!("sha256 = \"{}\"", "0".repeat(64)));
        let off = manifest("sandbox = \"off\"");
        let native = manifest("runtime = \"native\"");
        for (m, why) in [
            (&pinned, "SHA-256 is pinned"),
            (&off, "sandbox = \"off\""),
            (&native, "no interpreter runs it"),
        ] {
            match Exec::of(m, &Ok(None)) {
                Exec::Directly(said) => assert!(said.contains(why), "{said}"),
                Exec::Interpreter { .. } => panic!("{why}: not executed directly"),
            }
        }
    }

    #[test]
    fn an_interpreted_plugins_files_must_be_readable_and_the_advice_names_the_command_line() {
        let m = manifest("");
        let problems = unreadable(&m, Some(Path::new("/nonexistent/kv.py")));
        // The program file and the script, neither of which exists here.
        assert_eq!(problems.len(), 2, "{problems:?}");
        for problem in &problems {
            assert!(
                problem.starts_with("/cat/p.toml:2: plugin `p`"),
                "{problem}"
            );
            assert!(problem.contains("cannot be read"), "{problem}");
            assert!(problem.contains("chmod a+r"), "{problem}");
        }
        assert!(problems[1].contains("/nonexistent/kv.py"), "{problems:?}");
        // The script that is the program itself is named once.
        assert_eq!(unreadable(&m, Some(&m.command)).len(), 1);
    }
}
