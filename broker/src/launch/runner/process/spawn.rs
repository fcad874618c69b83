//! Starting the plugin's process from a [`LaunchPlan`]: the program resolved, its own process
//! group, exactly the plan's environment, stdin from `/dev/null`, the confinement between the
//! process's start and exec ([`vfork`](super::vfork)).

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use crate::confine::child::Hooks;
use crate::launch::plan::LaunchPlan;
use crate::launch::runner::process::vfork;

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

/// The plugin's stdout or stderr, as the host reads it.
pub(crate) type PluginPipe = tokio::net::unix::pipe::Receiver;

/// A spawned plugin process: its id (a child of this process, reaped by
/// [`ProcessGroup`](crate::confine::process::ProcessGroup)) and its output pipes.
#[derive(Debug)]
pub(crate) struct PluginProcess {
    pub(crate) pid: u32,
    pub(crate) stdout: PluginPipe,
    pub(crate) stderr: PluginPipe,
}

/// Spawns the plugin in a session and process group of its own (`pre_exec` calls `setsid`)
/// with exactly the plan's environment, in its working directory, stdin from `/dev/null` and
/// stdout and stderr piped, running `hooks` (the confinement) between the process's start
/// and exec — without copying the host ([`vfork`](super::vfork)). `exec` is the file to execute
/// (the verified binary's `/proc/self/fd/N`, or the plan's program, looked up in the plugin's
/// `PATH` when it is a bare name); `argv[0]` and the arguments are the plan's.
pub(crate) fn spawn(
    plan: &LaunchPlan,
    exec: &Path,
    hooks: &mut dyn Hooks,
) -> io::Result<PluginProcess> {
    let program = resolve_program(exec, plan.path_var());
    let mut argv = vec![plan.argv0.as_os_str()];
    argv.extend(plan.args.iter().map(OsString::as_os_str));
    let exec = vfork::Exec {
        program: &program,
        argv,
        env: plan
            .env
            .vars
            .iter()
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
            .collect(),
        cwd: &plan.working_dir,
    };
    // The hooks only make raw, async-signal-safe system calls on copied values (see
    // `sandbox::Prepared::child`), as the child of `vfork::spawn` must.
    let child = vfork::spawn(&exec, hooks)?;
    let pipes = PluginPipe::from_owned_fd(child.stdout)
        .and_then(|stdout| Ok((stdout, PluginPipe::from_owned_fd(child.stderr)?)));
    match pipes {
        Ok((stdout, stderr)) => Ok(PluginProcess {
            pid: child.pid,
            stdout,
            stderr,
        }),
        Err(e) => {
            // Not left running unwatched: killed and reaped.
            vfork::kill_and_reap(child.pid);
            Err(e)
        }
    }
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
