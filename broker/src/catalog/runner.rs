//! A manifest's `runner` key and its `[gvisor]` table, and what a command that names an
//! interpreter should be instead.

use serde::Deserialize;

use crate::launch::interpreted::runtime::interpreter_named;
use crate::launch::runner::options::{GvisorOptions, Runner};

/// The manifest's `[gvisor]` table: the sandbox's own memory and CPU limits (its cgroup),
/// for `runner = "gvisor"` only.
#[derive(Deserialize, Default, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGvisor {
    memory_mib: Option<u64>,
    cpu_millis: Option<u64>,
}

/// The manifest's `runner` key; gVisor with its default options.
#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawRunner {
    #[default]
    Process,
    Gvisor,
}

/// `runner` without a `[gvisor]` table.
pub(crate) fn plain(runner: RawRunner) -> Runner {
    match runner {
        RawRunner::Process => Runner::Process,
        RawRunner::Gvisor => Runner::Gvisor(GvisorOptions::new()),
    }
}

/// `runner` with its `[gvisor]` table; the table with the process runner, or a zero limit,
/// is refused as (key, message).
pub(crate) fn with_table(
    runner: RawRunner,
    limits: &RawGvisor,
) -> Result<Runner, (&'static str, &'static str)> {
    if matches!(runner, RawRunner::Process) {
        return Err((
            "gvisor",
            "sets the gVisor sandbox's limits, but the plugin runs as a process: add \
             `runner = \"gvisor\"` or use `[limits]`",
        ));
    }
    let mut options = GvisorOptions::new();
    for (key, value) in [
        ("gvisor.memory_mib", limits.memory_mib),
        ("gvisor.cpu_millis", limits.cpu_millis),
    ] {
        if value == Some(0) {
            return Err((key, "must be above 0"));
        }
    }
    if let Some(mib) = limits.memory_mib {
        options = options.memory_mib(mib);
    }
    if let Some(millis) = limits.cpu_millis {
        options = options.cpu_millis(millis);
    }
    Ok(Runner::Gvisor(options))
}

/// For a manifest whose command is an interpreter's bare name (`python3`, `node`): how to
/// run an interpreted plugin from a catalog instead.
pub(crate) fn interpreter_hint(command: &str) -> Option<String> {
    interpreter_named(std::path::Path::new(command)).map(|_| {
        format!(
            "names the interpreter `{command}`, but a command is a program in the catalog: \
             link the plugin's script into it (e.g. `bin/NAME` → your script, whose `#!` line \
             names `{command}`) and set `command = \"bin/NAME\"`; the host then resolves and \
             confines the real interpreter (`runtime`)"
        )
    })
}
