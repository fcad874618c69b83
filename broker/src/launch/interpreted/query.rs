//! Asking an interpreted plugin's interpreter where it lives: the IO half of
//! [`runtime`](crate::launch::interpreted::runtime) — the script's first line read, the interpreter run
//! confined to reading (its start-up code, e.g. `.pth` files, runs but can write nowhere, has
//! no network and gets no secrets), the script's project directory found.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt as _;

use crate::confine::network::NetworkMechanism;
use crate::confine::sandbox::{self, Limits, Paths, SandboxMode};
use crate::confine::seccomp::SeccompMode;
use crate::launch::interpreted::runtime::{
    Interpreter, MAX_PROJECT_DEPTH, MAX_RUNTIME_ANSWER_LEN, NODE_QUERY, NODE_STARTUP_READS,
    PYTHON_QUERY, ResolvedRuntime, Runtime, RuntimeError, SHEBANG_MAX, Script, detect,
    narrow_enough, parse_answer,
};
use crate::launch::plan::against;

/// What a launch needs to resolve its runtime.
pub(crate) struct Query<'a> {
    pub(crate) runtime: Runtime,
    pub(crate) sandbox: SandboxMode,
    /// The plugin's system-call filter, applied to the query too.
    pub(crate) seccomp: SeccompMode,
    /// The plugin's user (root hosts), whom the query runs as too: never a root host's uid 0
    /// (the query runs the interpreter's start-up code, which the plugin's author controls).
    pub(crate) run_as: Option<(u32, u32)>,
    /// The plugin gets a world: the query keeps `CAP_DAC_READ_SEARCH` as `run_as`, to read
    /// what the world's idmapped mounts will let the plugin read (root's `0700` directories).
    pub(crate) read_search: bool,
    pub(crate) program: &'a Path,
    /// `program` looked up in the plugin's `PATH`.
    pub(crate) resolved: &'a Path,
    pub(crate) args: &'a [OsString],
    /// The plugin's environment (the interpreter is asked with it).
    pub(crate) env: &'a BTreeMap<OsString, OsString>,
    /// A relative script or interpreter is relative to this: the host's working directory,
    /// where the user wrote the command line (not the plugin's).
    pub(crate) cwd: Option<&'a Path>,
    pub(crate) timeout: Duration,
    pub(crate) plugin: &'a str,
    /// Looks a program name up in the plugin's `PATH` (a path is returned as it is).
    pub(crate) lookup: &'a (dyn Fn(&Path) -> PathBuf + Sync),
}

/// Resolves the interpreter of a launch: detects it, asks it where it lives (confined to
/// reading: the query runs the interpreter's start-up code, e.g. `.pth` files, so it gets no
/// write access anywhere and no secrets), and finds the script's project. `Ok(None)`: a native
/// program, or a sandbox that is off (then nothing needs allowing).
pub(crate) async fn resolve(query: Query<'_>) -> Result<Option<ResolvedRuntime>, RuntimeError> {
    if query.sandbox == SandboxMode::Off {
        return Ok(None);
    }
    let head = read_head(query.resolved);
    let Some(detected) = detect(
        query.runtime,
        query.program,
        query.resolved,
        query.args,
        head.as_deref(),
    ) else {
        return Ok(None);
    };
    let interpreter = detected.interpreter;
    let program = users_program((query.lookup)(&detected.query_program), query.cwd);
    let text = ask(&query, interpreter, &program).await?;
    let bad = |reason: String| RuntimeError::BadAnswer {
        interpreter,
        program: program.clone(),
        reason,
    };
    let answer = parse_answer(interpreter, &text).map_err(bad)?;
    for prefix in &answer.prefixes {
        if !narrow_enough(prefix) {
            return Err(RuntimeError::TooBroad {
                interpreter,
                program,
                path: prefix.clone(),
            });
        }
    }
    let covered = |p: &Path, by: &[PathBuf]| by.iter().any(|b| p.starts_with(b));
    let read_exec: Vec<PathBuf> = answer
        .prefixes
        .iter()
        .filter(|p| p.exists())
        .cloned()
        .collect();
    let mut read: Vec<PathBuf> = Vec::new();
    for p in &answer.import_paths {
        if covered(p, &read_exec) || !p.exists() || read.contains(p) {
            continue;
        }
        if narrow_enough(p) {
            read.push(p.clone());
        } else {
            tracing::warn!(plugin = query.plugin, path = %p.display(), "not allowing an import directory this broad; the plugin may fail to import from it");
        }
    }
    if interpreter == Interpreter::Node {
        for file in NODE_STARTUP_READS.iter().map(PathBuf::from) {
            if file.exists() && !read.contains(&file) {
                read.push(file);
            }
        }
    }
    let mut args: Vec<OsString> = detected.leading_args.clone();
    let script = match &detected.script {
        Some(Script::Program(path)) => {
            args.push(absolute(path, query.cwd).into_os_string());
            args.extend(query.args.iter().cloned());
            Some(absolute(path, query.cwd))
        }
        Some(Script::Arg(i)) => {
            let mut rest = query.args.to_vec();
            let script = absolute(Path::new(&rest[*i]), query.cwd);
            rest[*i] = script.clone().into_os_string();
            args.extend(rest);
            Some(script)
        }
        None => {
            args.extend(query.args.iter().cloned());
            None
        }
    };
    if let Some(project) = script.as_deref().and_then(|s| project_dir(interpreter, s))
        && !covered(&project, &read_exec)
        && !read.contains(&project)
    {
        read.push(project);
    }
    Ok(Some(ResolvedRuntime {
        interpreter,
        program: answer.executable,
        args,
        script,
        read_exec,
        read,
    }))
}

/// Kills a process group when dropped.
struct GroupKiller(u32);

impl Drop for GroupKiller {
    fn drop(&mut self) {
        if let Some(pgid) = i32::try_from(self.0)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            // ESRCH (nothing left) is the common case.
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }
}

/// The interpreter to ask, as the user meant it: a relative path (`venv/bin/python`) made
/// absolute against `cwd`, where the user typed it (the query runs from `/`, the plugin from
/// its own directory), lexically: a virtualenv's `bin/python` is a symbolic link that must stay
/// the venv's. A bare name (not found in the plugin's `PATH`) stays as it is.
fn users_program(program: PathBuf, cwd: Option<&Path>) -> PathBuf {
    match cwd {
        Some(cwd) if program.is_relative() && program.components().count() > 1 => {
            against(cwd, &program)
        }
        _ => program,
    }
}

/// `path` made absolute against `cwd` (else the host's), symbolic links resolved when it
/// exists.
fn absolute(path: &Path, cwd: Option<&Path>) -> PathBuf {
    let joined = match cwd {
        Some(cwd) => cwd.join(path),
        None => std::env::current_dir().map_or_else(|_| path.to_owned(), |d| d.join(path)),
    };
    joined.canonicalize().unwrap_or(joined)
}

/// The first bytes of `path`, when it is a readable file.
fn read_head(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path).ok()?;
    let mut head = vec![0; SHEBANG_MAX];
    let n = file.read(&mut head).ok()?;
    head.truncate(n);
    Some(head)
}

/// The directory the plugin reads its own sources from: the nearest project root at most
/// [`MAX_PROJECT_DEPTH`] levels above the script's directory, else that directory.
fn project_dir(interpreter: Interpreter, script: &Path) -> Option<PathBuf> {
    let markers: &[&str] = match interpreter {
        Interpreter::Python => &["pyproject.toml", "setup.py", "setup.cfg"],
        Interpreter::Node => &["package.json"],
    };
    let dir = script.parent()?;
    let root = dir
        .ancestors()
        .take(MAX_PROJECT_DEPTH + 1)
        .find(|d| markers.iter().any(|m| d.join(m).is_file()))
        .filter(|d| narrow_enough(d));
    Some(root.unwrap_or(dir).to_owned())
}

/// Runs the interpreter's query, confined to reading, and returns what it printed.
async fn ask(
    query: &Query<'_>,
    interpreter: Interpreter,
    program: &Path,
) -> Result<String, RuntimeError> {
    let args: &[&OsStr] = match interpreter {
        Interpreter::Python => &[OsStr::new("-c"), OsStr::new(PYTHON_QUERY)],
        Interpreter::Node => &[OsStr::new("-p"), OsStr::new(NODE_QUERY)],
    };
    let reader = ReadOnly {
        sandbox: query.sandbox,
        seccomp: query.seccomp,
        run_as: query.run_as,
        read_search: query.read_search,
        env: query.env,
        plugin: query.plugin,
    };
    run_read_only(&reader, interpreter, program, args, query.timeout).await
}

/// How an interpreter is run to answer a question about a plugin: with the plugin's
/// environment, user and system-call filter, confined to reading.
pub(crate) struct ReadOnly<'a> {
    pub(crate) sandbox: SandboxMode,
    pub(crate) seccomp: SeccompMode,
    /// The plugin's ids (never a root host's uid 0).
    pub(crate) run_as: Option<(u32, u32)>,
    /// Keep only `CAP_DAC_READ_SEARCH`, to read as the plugin's world would show it.
    pub(crate) read_search: bool,
    pub(crate) env: &'a BTreeMap<OsString, OsString>,
    pub(crate) plugin: &'a str,
}

/// Runs `program` with `args` as `reader` says — it may read and execute anywhere, write
/// nowhere and use no network; its start-up code (e.g. `.pth` files) runs with no secrets —
/// and returns what it printed (at most [`MAX_RUNTIME_ANSWER_LEN`] bytes) within `timeout`.
pub(crate) async fn run_read_only(
    reader: &ReadOnly<'_>,
    interpreter: Interpreter,
    program: &Path,
    args: &[&OsStr],
    timeout: Duration,
) -> Result<String, RuntimeError> {
    let spawn_error = |source| RuntimeError::Spawn {
        interpreter,
        program: program.to_owned(),
        source,
    };
    // Read and execute anywhere, write nowhere.
    let paths = Paths {
        exec: vec![PathBuf::from("/")],
        ..Paths::default()
    };
    // No network, whatever the plugin's: the questions asked need none.
    let layers = sandbox::Layers {
        seccomp: reader.seccomp,
        run_as: reader.run_as,
        network: Some(NetworkMechanism::Seccomp),
        read_search: reader.read_search,
    };
    let mut confinement = sandbox::Prepared::new(
        reader.sandbox,
        &Limits::default(),
        &paths,
        layers,
        reader.plugin,
    )
    .map_err(|e| spawn_error(io::Error::other(e)))?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(reader.env)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // No `process_group(0)`: the confinement's `setsid()` makes it a group of its own.
        .kill_on_drop(true);
    // SAFETY: `pre_exec` only makes raw, async-signal-safe system calls on copied values
    // (see `sandbox::Prepared::child`).
    unsafe {
        cmd.pre_exec(confinement.pre_exec());
    }
    let mut child = cmd.spawn().map_err(spawn_error)?;
    // Whatever the start-up code left running in the query's group (its own: `setsid`) ends
    // with the query.
    let _group = child.id().map(GroupKiller);
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(spawn_error(io::Error::other(
            "stdout or stderr was not piped",
        )));
    };
    let run = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let limit = u64::try_from(MAX_RUNTIME_ANSWER_LEN + 1).unwrap_or(u64::MAX);
        let (mut stdout, mut stderr) = (stdout.take(limit), stderr.take(limit));
        let (read_out, _, status) = tokio::join!(
            stdout.read_to_end(&mut out),
            stderr.read_to_end(&mut err),
            child.wait(),
        );
        read_out?;
        Ok::<_, io::Error>((out, err, status?))
    };
    let (out, err, status) = tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| RuntimeError::Timeout {
            interpreter,
            program: program.to_owned(),
            timeout,
        })?
        .map_err(spawn_error)?;
    if !status.success() {
        let err = String::from_utf8_lossy(&err);
        let tail_start = err.len().saturating_sub(1024);
        let tail_start = (tail_start..err.len())
            .find(|&i| err.is_char_boundary(i))
            .unwrap_or(err.len());
        return Err(RuntimeError::Failed {
            interpreter,
            program: program.to_owned(),
            status,
            stderr: err[tail_start..].to_owned(),
        });
    }
    if out.len() > MAX_RUNTIME_ANSWER_LEN {
        return Err(RuntimeError::BadAnswer {
            interpreter,
            program: program.to_owned(),
            reason: format!("longer than {MAX_RUNTIME_ANSWER_LEN} bytes"),
        });
    }
    String::from_utf8(out).map_err(|_| RuntimeError::BadAnswer {
        interpreter,
        program: program.to_owned(),
        reason: "not UTF-8".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_interpreter_is_asked_at_its_place_in_the_users_directory_without_resolving_links()
    {
        let cwd = Path::new("/home/me/proj");
        for (typed, asked) in [
            ("venv/bin/python", "/home/me/proj/venv/bin/python"),
            ("./venv/bin/python3", "/home/me/proj/venv/bin/python3"),
            ("../other/venv/bin/python", "/home/me/other/venv/bin/python"),
            ("/opt/py/bin/python3", "/opt/py/bin/python3"),
            ("python3", "python3"),
        ] {
            assert_eq!(
                users_program(PathBuf::from(typed), Some(cwd)),
                Path::new(asked),
                "{typed}"
            );
        }
        assert_eq!(
            users_program(PathBuf::from("venv/bin/python"), None),
            Path::new("venv/bin/python")
        );
    }

    #[test]
    fn a_scripts_project_is_found_a_little_way_up() {
        let root = tempfile::tempdir().unwrap();
        let project = root.path().join("work/sdk");
        std::fs::create_dir_all(project.join("examples")).unwrap();
        std::fs::write(project.join("pyproject.toml"), "").unwrap();
        let script = project.join("examples/kv.py");
        assert_eq!(
            project_dir(Interpreter::Python, &script),
            Some(project.clone())
        );
        // Node looks for package.json: none here, so the script's own directory.
        assert_eq!(
            project_dir(Interpreter::Node, &script),
            Some(project.join("examples"))
        );
    }
}
