//! Starting the plugin's process from a [`LaunchPlan`]: the program resolved, its own process
//! group, exactly the plan's environment, stdin from `/dev/null`, the confinement between fork
//! and exec.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, Command};

use crate::launch::plan::LaunchPlan;
use crate::launch::settings::Settings;

/// Where `program` is: itself if it contains a `/`, else the first executable file of that
/// name in `path` (the plugin's `PATH`), else `program` unchanged.
pub(crate) fn resolve_program(program: &Path, path: Option<&OsString>) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    if program.components().count() != 1 || program.is_absolute() {
        return program.to_owned();
    }
    path.into_iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| program.to_owned())
}

/// Spawns the plugin in a session and process group of its own (`pre_exec` calls `setsid`)
/// with exactly the plan's environment, in its working
/// directory, stdin from `/dev/null` and
/// stdout and stderr piped, running `pre_exec` (the confinement) between fork and exec.
/// `exec` is the file to execute (the verified binary's `/proc/self/fd/N`, or the program);
/// `argv[0]` is always the configured program.
pub(crate) fn spawn(
    settings: &Settings,
    plan: &LaunchPlan,
    exec: &Path,
    pre_exec: impl FnMut() -> io::Result<()> + Send + Sync + 'static,
) -> io::Result<Child> {
    let mut cmd = Command::new(exec);
    cmd.arg0(&settings.program)
        .args(&settings.args)
        .env_clear()
        .envs(&plan.env.vars)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // No `process_group(0)`: the confinement's `setsid()` makes the plugin the leader of
        // a session and a process group of its own (pgid = pid), so that signals reach its
        // children too.
        // Ending the plugin is the client's job (it signals the whole group).
        .kill_on_drop(false);
    cmd.current_dir(&plan.working_dir);
    // SAFETY: `pre_exec` only makes raw, async-signal-safe system calls on copied values
    // (see `sandbox::Prepared::pre_exec`).
    unsafe {
        cmd.pre_exec(pre_exec);
    }
    cmd.spawn()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_program_name_is_found_in_the_plugins_path() {
        let path = OsString::from("/nonexistent:/bin:/usr/bin");
        let found = resolve_program(Path::new("sh"), Some(&path));
        assert!(
            found.is_absolute() && found.ends_with("sh"),
            "{}",
            found.display()
        );
        assert_eq!(
            resolve_program(Path::new("./x"), Some(&path)),
            Path::new("./x")
        );
        assert_eq!(
            resolve_program(Path::new("no-such-program-here"), Some(&path)),
            Path::new("no-such-program-here")
        );
    }
}
