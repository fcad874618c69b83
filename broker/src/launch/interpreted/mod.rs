//! The start-up stages of interpreted plugins: the interpreter resolved and fed into the
//! plan (stage 2b, between the pure plan and the confinement), and a confined plugin's early
//! exit mapped to a sandbox denial when it looks like one.

pub(crate) mod denial;
pub(crate) mod query;
pub(crate) mod runtime;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::Path;

use crate::confine::sandbox::SandboxMode;
use crate::confine::world::NamespacesMode;
use crate::launch::builder::PluginClientBuilder;
use crate::launch::env;
use crate::launch::error::{Failure, PluginOutput, StartErrorKind};
use crate::launch::interpreted::runtime::{ResolvedRuntime, RuntimeError};
use crate::launch::plan::LaunchPlan;
use crate::launch::runner::options::Runner;
use crate::launch::runner::process::spawn;
use crate::launch::settings::Settings;
use crate::launch::world;

/// Stage 2b: an interpreted plugin's interpreter, asked where it lives (outside the pure
/// plan), fed into the plan, the interpreter run as `ids` (the plugin's, when not the host's
/// user; `in_world`: keeping `CAP_DAC_READ_SEARCH`, see [`query::Query::read_search`]).
/// Skipped when a digest is configured: then the verified file itself is executed.
pub(crate) async fn interpreter(
    settings: &Settings,
    plan: &mut LaunchPlan,
    plugin: &str,
    (ids, in_world): (Option<(u32, u32)>, bool),
) -> Result<Option<ResolvedRuntime>, Failure> {
    // The gVisor runner builds its own file view of the program (its ELF closure and the
    // allowed paths); a digest means the verified file itself is executed.
    if settings.sha256.is_some() || !matches!(settings.runner, Runner::Process) {
        return Ok(None);
    }
    let resolved = resolve_with_env(settings, &plan.env.vars, plugin, (ids, in_world))
        .await
        .map_err(|e| StartErrorKind::Runtime(Box::new(e)))?;
    if let Some(runtime) = &resolved {
        tracing::debug!(plugin, interpreter = %runtime.program.display(), prefixes = ?runtime.read_exec, read = ?runtime.read, "runtime resolved");
        plan.allow_runtime(runtime);
    }
    Ok(resolved)
}

/// What [`PluginClientBuilder::resolve_runtime`] returns: the runtime resolved with the plugin's environment as a launch would build it
/// (without the protocol's variables, which the query does not need).
async fn resolve_runtime(
    settings: &Settings,
    plugin: &str,
) -> Result<Option<ResolvedRuntime>, RuntimeError> {
    let env = env::build_env(
        std::env::vars_os(),
        env::allowed_names(&settings.confinement),
        &settings.env,
        Vec::new(),
        "",
    );
    // As a launch would: the plugin's ids (never a root host's uid 0), reading as its world
    // would where it gets one.
    let ids = world::plugin_ids(settings, None, plugin).map_err(RuntimeError::PluginIds)?;
    let in_world = settings.confinement.sandbox != SandboxMode::Off
        && settings.confinement.namespaces != NamespacesMode::Off
        && rustix::process::geteuid().is_root();
    resolve_with_env(settings, &env.vars, plugin, (ids, in_world)).await
}

async fn resolve_with_env(
    settings: &Settings,
    env: &BTreeMap<OsString, OsString>,
    plugin: &str,
    (run_as, read_search): (Option<(u32, u32)>, bool),
) -> Result<Option<ResolvedRuntime>, RuntimeError> {
    let path_var = env.get(OsStr::new("PATH"));
    let lookup = |program: &Path| spawn::resolve_program(program, path_var);
    let resolved = lookup(&settings.program);
    let host_cwd = std::env::current_dir().ok();
    query::resolve(query::Query {
        runtime: settings.runtime,
        sandbox: settings.confinement.sandbox,
        seccomp: settings.confinement.seccomp,
        run_as,
        read_search,
        program: &settings.program,
        resolved: &resolved,
        args: &settings.args,
        env,
        // What the user typed is relative to the host's directory, as the program is.
        cwd: host_cwd.as_deref(),
        timeout: settings.timeouts.interpreter_query,
        plugin,
        lookup: &lookup,
    })
    .await
}

/// A confined plugin that exited before its handshake with signs of a sandbox denial gets an
/// error saying so and what to allow, instead of the generic exit (and its cookie hint).
pub(crate) fn diagnose(
    settings: &Settings,
    failure: Failure,
    output: &PluginOutput,
    resolved: Option<&ResolvedRuntime>,
) -> Failure {
    let StartErrorKind::Exited { status } = &failure.kind else {
        return failure;
    };
    let status = *status;
    // Landlock's denials only: the gVisor runner diagnoses its own failures.
    if settings.confinement.sandbox == SandboxMode::Off
        || !matches!(settings.runner, Runner::Process)
    {
        return failure;
    }
    match denial::diagnose(status, &output.stderr_tail, resolved.map(|r| r.interpreter)) {
        Some(denial) => Failure {
            phase: failure.phase,
            kind: StartErrorKind::SandboxDenied {
                status,
                mode: settings.confinement.sandbox,
                denial,
            },
        },
        None => failure,
    }
}

impl<H> PluginClientBuilder<H> {
    /// What the launch's [`runtime`](PluginClientBuilder::runtime) resolves to here and now: the interpreter
    /// that would be executed and the directories the sandbox would allow for it (`None`: the
    /// program runs natively). Runs the interpreter's query as [`start`](PluginClientBuilder::start)
    /// does; `tether check` shows it.
    ///
    /// # Errors
    /// A [`RuntimeError`] when the interpreter cannot be asked or its answer is unusable.
    pub async fn resolve_runtime(&self) -> Result<Option<ResolvedRuntime>, RuntimeError> {
        resolve_runtime(&self.settings, &self.settings.display_name()).await
    }
}

/// The directory of the binary executed (a bare name is looked up in the plugin's PATH, as
/// exec does) is readable and executable.
pub(crate) fn allow_program(plan: &mut LaunchPlan) {
    plan.program = spawn::resolve_program(&plan.program, plan.path_var());
    if let Some(bin_dir) = plan
        .program
        .canonicalize()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        plan.allow_program(bin_dir);
    }
}
