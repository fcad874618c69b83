//! The start-up stages of interpreted plugins: the interpreter resolved and fed into the
//! plan (stage 2b, between the pure plan and the confinement), and a confined plugin's early
//! exit mapped to a sandbox denial when it looks like one.

pub(crate) mod denial;
pub(crate) mod module;
pub(crate) mod network;
pub(crate) mod query;
pub(crate) mod runtime;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::Path;

use crate::confine::sandbox::SandboxMode;
use crate::confine::world::NamespacesMode;
use crate::confine::world::WorldMechanism;
use crate::launch::builder::PluginClientBuilder;
use crate::launch::env;
use crate::launch::error::{Failure, PluginOutput, StartErrorKind};
use crate::launch::interpreted::denial::Allowance;
use crate::launch::interpreted::module::MissingModule;
use crate::launch::interpreted::network::NetworkRefusal;
use crate::launch::interpreted::runtime::{
    Interpreter, ResolvedRuntime, RuntimeError, narrow_enough,
};
use crate::launch::launched::InForce;
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
    let env = readers_env(settings);
    resolve_with_env(settings, &env.vars, plugin, readers_ids(settings, plugin)?).await
}

/// The plugin's environment as a launch would build it, without the protocol's variables (the
/// query and the module lookup need none).
fn readers_env(settings: &Settings) -> env::PluginEnv {
    env::build_env(
        std::env::vars_os(),
        env::allowed_names(&settings.confinement),
        &settings.confinement.env,
        Vec::new(),
        "",
    )
}

/// The ids the plugin's interpreter runs as whenever the host runs it before the plugin (the
/// query, the module lookup), as a launch would: the plugin's ids (never a root host's uid 0),
/// and whether it reads as the plugin's world would show it (`CAP_DAC_READ_SEARCH` only).
fn readers_ids(
    settings: &Settings,
    plugin: &str,
) -> Result<(Option<(u32, u32)>, bool), RuntimeError> {
    let ids = world::plugin_ids(settings, None, plugin).map_err(RuntimeError::PluginIds)?;
    let in_world = settings.confinement.sandbox != SandboxMode::Off
        && settings.confinement.namespaces != NamespacesMode::Off
        && rustix::process::geteuid().is_root();
    Ok((ids, in_world))
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

/// A confined plugin that exited before its handshake gets an error that blames what
/// plausibly caused it, instead of the generic exit (and its cookie hint): a refused network
/// call under `network = "none"` is its network setting ([`StartErrorKind::NetworkDenied`]); a
/// module its interpreter cannot import outside the sandbox either is not installed
/// ([`StartErrorKind::NotInstalled`]); a file or directory the sandbox refused is a denial that
/// names what to allow ([`StartErrorKind::SandboxDenied`]). A refusal the sandbox did not cause
/// (a network call under `network = "host"`, a file that does not exist on the host either)
/// stays the plain exit. `in_force`: how the plugin was confined.
pub(crate) async fn diagnose(
    settings: &Settings,
    failure: Failure,
    output: &PluginOutput,
    resolved: Option<&ResolvedRuntime>,
    in_force: &InForce,
) -> Failure {
    let StartErrorKind::Exited { status } = &failure.kind else {
        return failure;
    };
    let status = *status;
    // Landlock's and the network policy's refusals only: the gVisor runner diagnoses its own
    // failures, and a Pod's are in its status.
    if !matches!(settings.runner, Runner::Process) {
        return failure;
    }
    let stderr = &output.stderr_tail;
    let file = denial::diagnose(status, stderr, resolved.map(|r| r.interpreter));
    if let Some(line) = network::refusal(stderr) {
        let file_line_later = file
            .as_ref()
            .and_then(|d| stderr.rfind(d.evidence.as_str()))
            .is_some_and(|at| stderr.rfind(line).is_some_and(|net| at > net));
        if !file_line_later {
            // Under the host's network, a refused connection is not the sandbox's doing.
            let Some(mechanism) = in_force.network_mechanism else {
                return failure;
            };
            let refusal = NetworkRefusal {
                evidence: line.to_owned(),
                mechanism,
                own_loopback: in_force.world == WorldMechanism::Namespaces,
            };
            let refusal = Box::new(refusal);
            let kind = StartErrorKind::NetworkDenied { status, refusal };
            return Failure {
                phase: failure.phase,
                kind,
            };
        }
    }
    if settings.confinement.sandbox == SandboxMode::Off {
        return failure;
    }
    let Some(mut denial) = file else {
        return failure;
    };
    // A file missing on the host too was not hidden by the sandbox.
    if denial.missing_path().is_some_and(|path| !path.exists()) {
        return failure;
    }
    if let Some(runtime) = resolved.filter(|r| r.interpreter == Interpreter::Python)
        && let Some(module) = module::missing_module_name(&denial.evidence)
    {
        match look_up_module(settings, runtime, module).await {
            Some(module::Lookup::Nowhere) => {
                let missing = Box::new(MissingModule {
                    module: module.to_owned(),
                    interpreter: runtime.interpreter,
                    program: runtime.program.clone(),
                    evidence: denial.evidence.clone(),
                });
                let kind = StartErrorKind::NotInstalled { status, missing };
                return Failure {
                    phase: failure.phase,
                    kind,
                };
            }
            Some(module::Lookup::Found(Some(entry)))
                if !runtime
                    .read_exec
                    .iter()
                    .chain(&runtime.read)
                    .any(|a| entry.starts_with(a))
                    && narrow_enough(&entry) =>
            {
                denial.allowance = Allowance::Read(entry);
            }
            _ => {}
        }
    }
    Failure {
        phase: failure.phase,
        kind: StartErrorKind::SandboxDenied {
            status,
            mode: settings.confinement.sandbox,
            denial,
        },
    }
}

/// Where `module` would be found outside the sandbox, asked of the plugin's own interpreter
/// with its environment; `None` when the interpreter could not say (then the general advice
/// stands).
async fn look_up_module(
    settings: &Settings,
    runtime: &ResolvedRuntime,
    module: &str,
) -> Option<module::Lookup> {
    let plugin = settings.display_name();
    let env = readers_env(settings);
    // Never as a root host's uid 0: the interpreter's start-up code is the plugin's.
    let (run_as, read_search) = match readers_ids(settings, &plugin) {
        Ok(ids) => ids,
        Err(e) => {
            tracing::debug!(plugin, module, error = %e, "the missing module was not looked for");
            return None;
        }
    };
    let reader = query::ReadOnly {
        sandbox: settings.confinement.sandbox,
        seccomp: settings.confinement.seccomp,
        run_as,
        read_search,
        env: &env.vars,
        plugin: &plugin,
    };
    let timeout = settings.timeouts.module_lookup;
    match module::look_up(&reader, runtime, module, timeout).await {
        Ok(lookup) => Some(lookup),
        Err(e) => {
            tracing::debug!(plugin, module, error = %e, "where the missing module is could not be told");
            None
        }
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
