//! Interpreted plugins, confined: which interpreter runs a plugin ([`Runtime`]), asked where
//! it lives, so that the sandbox allows exactly its install prefixes and the script's own
//! project — and the real interpreter is executed, not a version manager's shim.
//!
//! This is the pure half (detecting the interpreter from the command line or a `#!` line,
//! reading its answer, checking that the answer is not too broad), unit-tested here; the IO
//! half ([`query::resolve`](crate::launch::interpreted::query::resolve)) reads the script's
//! first line, runs the interpreter's query confined to reading, and looks for the script's
//! project directory. The launch plan is fed the result
//! ([`LaunchPlan::allow_runtime`](crate::launch::plan::LaunchPlan::allow_runtime)).

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use serde::Deserialize;

use crate::confine::paths::normalized;

/// Most bytes of the interpreter's answer read; a longer answer is refused.
pub const MAX_RUNTIME_ANSWER_LEN: usize = 64 * 1024;

/// How many directories above a script's own the search for its project root goes (a file
/// `pyproject.toml`, `setup.py` or `setup.cfg` for Python, `package.json` for Node). The SDK's
/// examples in `sdk-python/examples/` find `sdk-python/` one level up.
pub const MAX_PROJECT_DEPTH: usize = 2;

/// What the Python interpreter is asked: where it is and what it imports from.
pub(crate) const PYTHON_QUERY: &str = "import sys, json; print(json.dumps([sys.executable, sys.prefix, \
     sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, sys.path]))";

/// What Node.js is asked: where it is and its global module directories.
pub(crate) const NODE_QUERY: &str =
    "JSON.stringify([process.execPath, require('module').globalPaths])";

/// Files Node.js reads at start-up besides its install: OpenSSL's configuration.
pub(crate) const NODE_STARTUP_READS: &[&str] = &["/etc/ssl/openssl.cnf"];

/// The most bytes of a script read to find its `#!` line.
pub(crate) const SHEBANG_MAX: usize = 256;

/// Which interpreter runs a plugin, so that it works confined (see
/// [`PluginClientBuilder::runtime`](crate::PluginClientBuilder::runtime)).
///
/// Written in manifests as `runtime = "auto" | "native" | "python" | "node"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Runtime {
    /// [`Python`](Self::Python) when the program is `python`, `python3`, `python3.X` or a
    /// script whose `#!` line names one, [`Node`](Self::Node) for `node`/`nodejs` the same
    /// way, else [`Native`](Self::Native).
    #[default]
    Auto,
    /// The program is executed as it is; no interpreter is looked for.
    Native,
    /// A Python interpreter (system, pyenv, virtualenv): asked for `sys.executable`, its
    /// prefixes and `sys.path`.
    Python,
    /// Node.js: asked for `process.execPath` and its global module directories.
    Node,
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Native => "native",
            Self::Python => "python",
            Self::Node => "node",
        })
    }
}

/// An interpreter family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Interpreter {
    /// Python.
    Python,
    /// Node.js.
    Node,
}

impl fmt::Display for Interpreter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Python => "python",
            Self::Node => "node",
        })
    }
}

/// An interpreter found and asked: what is executed instead of the configured program and
/// what the sandbox allows for it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResolvedRuntime {
    /// Python or Node.
    pub interpreter: Interpreter,
    /// The real interpreter, executed (with `argv[0]` set to it): `sys.executable` /
    /// `process.execPath`, not a shim.
    pub program: PathBuf,
    /// Its arguments: the script (made absolute) and the configured arguments.
    pub args: Vec<OsString>,
    /// The script it runs (absolute), when there is one (not for `python -m` or `-c`).
    pub script: Option<PathBuf>,
    /// Read and execute: the interpreter's install prefixes.
    pub read_exec: Vec<PathBuf>,
    /// Read only: import directories outside the prefixes, and the script's project (or its
    /// directory).
    pub read: Vec<PathBuf>,
}

/// Why an interpreter could not be resolved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The interpreter could not be started.
    #[error("cannot run the {interpreter} interpreter {} to ask where it lives: {source}; check that it is installed and on the plugin's PATH", program.display())]
    Spawn {
        /// Python or Node.
        interpreter: Interpreter,
        /// The program run.
        program: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The interpreter did not answer in time.
    #[error("the {interpreter} interpreter {} did not say where it lives within {timeout:?}; raise its timeout (`Timeouts::interpreter_query`)", program.display())]
    Timeout {
        /// Python or Node.
        interpreter: Interpreter,
        /// The program run.
        program: PathBuf,
        /// The timeout.
        timeout: Duration,
    },
    /// The interpreter exited with an error instead of answering.
    #[error("the {interpreter} interpreter {} failed ({status}) when asked where it lives; stderr (tail): {stderr:?}", program.display())]
    Failed {
        /// Python or Node.
        interpreter: Interpreter,
        /// The program run.
        program: PathBuf,
        /// Its exit status.
        status: ExitStatus,
        /// The end of its stderr.
        stderr: String,
    },
    /// The answer is not what was asked for.
    #[error("the {interpreter} interpreter {} gave an answer tether cannot use: {reason}", program.display())]
    BadAnswer {
        /// Python or Node.
        interpreter: Interpreter,
        /// The program run.
        program: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The answer names a directory too broad to allow (`/`, `/home`, `/etc`…).
    #[error("the {interpreter} interpreter {} says it lives in {}, which is too broad to allow a plugin; install the interpreter in a directory of its own, or use `runtime = \"native\"` and allow its paths by hand", program.display(), path.display())]
    TooBroad {
        /// Python or Node.
        interpreter: Interpreter,
        /// The program run.
        program: PathBuf,
        /// The directory.
        path: PathBuf,
    },
}

/// What [`detect`] found: the interpreter to ask and how the plugin's command line maps onto
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Detected {
    pub(crate) interpreter: Interpreter,
    /// The program to ask (a name looked up in the plugin's `PATH`, or a path).
    pub(crate) query_program: PathBuf,
    /// Arguments that go before the script (from a `#!` line).
    pub(crate) leading_args: Vec<OsString>,
    /// The script, when there is one: the program itself (a `#!` script) or an argument.
    pub(crate) script: Option<Script>,
}

/// Where a plugin's script is on its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Script {
    /// The program is a `#!` script at this path.
    Program(PathBuf),
    /// The argument at this index is the script.
    Arg(usize),
}

/// Whether a program's file name is a Python or Node interpreter's.
pub(crate) fn interpreter_named(program: &Path) -> Option<Interpreter> {
    let name = program.file_name()?.to_str()?;
    if let Some(version) = name.strip_prefix("python")
        && version.bytes().all(|b| b.is_ascii_digit() || b == b'.')
    {
        return Some(Interpreter::Python);
    }
    matches!(name, "node" | "nodejs").then_some(Interpreter::Node)
}

/// Decides which interpreter runs `program` with `args` under `runtime`, from the names and
/// `head`, the first bytes of the (resolved) program file. `None`: run it natively.
pub(crate) fn detect(
    runtime: Runtime,
    program: &Path,
    resolved: &Path,
    args: &[OsString],
    head: Option<&[u8]>,
) -> Option<Detected> {
    let wanted = match runtime {
        Runtime::Native => return None,
        Runtime::Python => Some(Interpreter::Python),
        Runtime::Node => Some(Interpreter::Node),
        Runtime::Auto => None,
    };
    if let Some(named) = interpreter_named(program)
        && wanted.is_none_or(|w| w == named)
    {
        return Some(Detected {
            interpreter: named,
            query_program: program.to_owned(),
            leading_args: Vec::new(),
            script: script_arg(named, args).map(Script::Arg),
        });
    }
    if let Some((interpreter_program, leading_args)) = head.and_then(parse_shebang) {
        let named = interpreter_named(&interpreter_program);
        if let Some(interpreter) = wanted.or(named) {
            return Some(Detected {
                interpreter,
                query_program: interpreter_program,
                leading_args,
                script: Some(Script::Program(resolved.to_owned())),
            });
        }
    }
    // An explicit runtime with a program of another name: the program is the interpreter.
    wanted.map(|interpreter| Detected {
        interpreter,
        query_program: program.to_owned(),
        leading_args: Vec::new(),
        script: script_arg(interpreter, args).map(Script::Arg),
    })
}

/// The index of the script among an interpreter's arguments: the first that is not an
/// option (or an option's value); none after `-c`/`-m` (Python) or `-e`/`-p` (Node).
fn script_arg(interpreter: Interpreter, args: &[OsString]) -> Option<usize> {
    let (no_script, takes_value): (&[&str], &[&str]) = match interpreter {
        Interpreter::Python => (&["-c", "-m", "-"], &["-W", "-X", "--check-hash-based-pycs"]),
        Interpreter::Node => (
            &["-e", "--eval", "-p", "--print", "-"],
            &["-r", "--require", "--import", "--loader", "--input-type"],
        ),
    };
    let mut skip_next = false;
    for (i, arg) in args.iter().enumerate() {
        let arg = arg.to_string_lossy();
        if skip_next {
            skip_next = false;
            continue;
        }
        if no_script.contains(&arg.as_ref()) || arg == "--" {
            return None;
        }
        if takes_value.contains(&arg.as_ref()) {
            skip_next = true;
            continue;
        }
        if !arg.starts_with('-') {
            return Some(i);
        }
    }
    None
}

/// A `#!` line's interpreter and the arguments it puts before the script; through
/// `/usr/bin/env`, the program it names (looked up in `PATH`).
pub(crate) fn parse_shebang(head: &[u8]) -> Option<(PathBuf, Vec<OsString>)> {
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n')?];
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    if first.file_name() == Some(OsStr::new("env")) {
        let mut words = words.skip_while(|w| w.starts_with('-'));
        let program = PathBuf::from(words.next()?);
        return Some((program, words.map(OsString::from).collect()));
    }
    // The kernel passes the rest of the line as one argument.
    let rest = line.trim_start()[first.as_os_str().len()..].trim();
    let args = if rest.is_empty() {
        Vec::new()
    } else {
        vec![OsString::from(rest)]
    };
    Some((first, args))
}

/// The interpreter's answer, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    /// The real interpreter.
    pub(crate) executable: PathBuf,
    /// Install prefixes (read and execute).
    pub(crate) prefixes: Vec<PathBuf>,
    /// Import directories (read).
    pub(crate) import_paths: Vec<PathBuf>,
}

/// Parses the answer of `interpreter` to its query.
pub(crate) fn parse_answer(interpreter: Interpreter, text: &str) -> Result<Answer, String> {
    let value: serde_json::Value =
        serde_json::from_str(text.trim()).map_err(|e| format!("not JSON ({e})"))?;
    let items = value.as_array().ok_or("not a JSON array")?;
    let string = |v: &serde_json::Value| v.as_str().map(PathBuf::from);
    let list = |v: Option<&serde_json::Value>| -> Result<Vec<PathBuf>, String> {
        v.and_then(serde_json::Value::as_array)
            .ok_or("a list of directories is missing")?
            .iter()
            .map(|p| string(p).ok_or_else(|| "a directory is not a string".to_owned()))
            .collect()
    };
    let executable = items
        .first()
        .and_then(string)
        .ok_or("the executable is missing")?;
    if !executable.is_absolute() {
        return Err(format!(
            "the executable {} is not an absolute path",
            executable.display()
        ));
    }
    let (prefixes, import_paths) = match interpreter {
        Interpreter::Python => {
            let prefixes = items[1..items.len().min(5)]
                .iter()
                .map(|p| string(p).ok_or_else(|| "a prefix is not a string".to_owned()))
                .collect::<Result<Vec<_>, _>>()?;
            if prefixes.len() != 4 {
                return Err("expected four prefixes".to_owned());
            }
            (prefixes, list(items.get(5))?)
        }
        Interpreter::Node => {
            // The install prefix: `PREFIX/bin/node`.
            let prefix = executable
                .parent()
                .and_then(Path::parent)
                .ok_or("the executable has no install prefix")?
                .to_owned();
            (vec![prefix], list(items.get(1))?)
        }
    };
    let mut seen = Vec::new();
    for p in &prefixes {
        if !p.is_absolute() {
            return Err(format!(
                "the prefix {} is not an absolute path",
                p.display()
            ));
        }
        if !seen.contains(p) {
            seen.push(p.clone());
        }
    }
    Ok(Answer {
        executable,
        prefixes: seen,
        // Relative entries ("" is the current directory) are not allowed.
        import_paths: import_paths
            .into_iter()
            .filter(|p| p.is_absolute())
            .collect(),
    })
}

/// Whether `path` is narrow enough to allow for an interpreter: at least two levels deep
/// (`/opt/python3.12`, `/home/me/.pyenv/versions/3.12.1`), or `/usr` (a system interpreter's
/// prefix, whose programs and libraries are allowed anyway).
pub(crate) fn narrow_enough(path: &Path) -> bool {
    let normal = normalized(path);
    let depth = normal
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count();
    normal.is_absolute() && (depth >= 2 || normal == Path::new("/usr"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn python_and_node_are_recognised_by_name() {
        for python in ["python", "python3", "python3.11", "/opt/py/bin/python3.12"] {
            assert_eq!(
                interpreter_named(Path::new(python)),
                Some(Interpreter::Python)
            );
        }
        for node in ["node", "/usr/bin/nodejs"] {
            assert_eq!(interpreter_named(Path::new(node)), Some(Interpreter::Node));
        }
        for other in ["python-config", "pythonic", "kv-plugin", "nodemon"] {
            assert_eq!(interpreter_named(Path::new(other)), None, "{other}");
        }
    }

    #[test]
    fn the_script_is_the_first_argument_that_is_not_an_option() {
        let p = Path::new("python3");
        let d = detect(
            Runtime::Auto,
            p,
            p,
            &os(&["-u", "-W", "error", "kv.py", "-v"]),
            None,
        )
        .unwrap();
        assert_eq!(d.script, Some(Script::Arg(3)));
        let d = detect(Runtime::Auto, p, p, &os(&["-m", "kv"]), None).unwrap();
        assert_eq!(d.script, None);
        let n = Path::new("node");
        let d = detect(
            Runtime::Auto,
            n,
            n,
            &os(&["--require", "x", "main.js"]),
            None,
        )
        .unwrap();
        assert_eq!(
            (d.interpreter, d.script),
            (Interpreter::Node, Some(Script::Arg(2)))
        );
        assert_eq!(detect(Runtime::Native, p, p, &[], None), None);
        let native = Path::new("/usr/libexec/kv-plugin");
        assert_eq!(
            detect(Runtime::Auto, native, native, &[], Some(b"\x7fELF")),
            None
        );
    }

    #[test]
    fn a_shebang_script_runs_on_the_interpreter_its_first_line_names() {
        let script = Path::new("/srv/p/plugin.py");
        let d = detect(
            Runtime::Auto,
            Path::new("bin/plugin"),
            script,
            &os(&["--flag"]),
            Some(b"#!/usr/bin/env python3\nimport sys\n"),
        )
        .unwrap();
        assert_eq!(d.interpreter, Interpreter::Python);
        assert_eq!(d.query_program, Path::new("python3"));
        assert_eq!(d.script, Some(Script::Program(script.to_owned())));
        assert_eq!(
            parse_shebang(b"#!/usr/bin/env -S node --no-warnings\n"),
            Some((PathBuf::from("node"), os(&["--no-warnings"])))
        );
        assert_eq!(
            parse_shebang(b"#!/opt/py/bin/python3 -u -B\n"),
            Some((PathBuf::from("/opt/py/bin/python3"), os(&["-u -B"])))
        );
        assert_eq!(
            parse_shebang(b"#!/bin/sh"),
            None,
            "no newline within the head"
        );
        // A shell script is native unless a runtime is asked for.
        let sh = detect(Runtime::Auto, script, script, &[], Some(b"#!/bin/sh\n"));
        assert_eq!(sh, None);
    }

    #[test]
    fn an_answer_gives_the_real_interpreter_and_deduplicated_prefixes() {
        let text = r#"["/v/bin/python", "/v", "/opt/py", "/v", "/opt/py", ["", "/opt/py/lib/python3.11", "/v/lib/site-packages", "/src/sdk"]]"#;
        let a = parse_answer(Interpreter::Python, text).unwrap();
        assert_eq!(a.executable, Path::new("/v/bin/python"));
        assert_eq!(a.prefixes, [Path::new("/v"), Path::new("/opt/py")]);
        assert_eq!(a.import_paths.len(), 3, "the relative entry is dropped");
        let node = parse_answer(
            Interpreter::Node,
            r#"["/home/me/.nvm/versions/node/v20/bin/node", ["/home/me/.node_modules"]]"#,
        )
        .unwrap();
        assert_eq!(
            node.prefixes,
            [Path::new("/home/me/.nvm/versions/node/v20")]
        );
        for bad in [
            "",
            "{}",
            "[1]",
            r#"["python3", "/v", "/v", "/v", "/v", []]"#,
            r#"["/p", "v", "/v", "/v", "/v", []]"#,
        ] {
            assert!(parse_answer(Interpreter::Python, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_narrow_directories_are_allowed_for_an_interpreter() {
        for ok in [
            "/usr",
            "/opt/py",
            "/root/.pyenv/versions/3.11.7",
            "/usr/local",
        ] {
            assert!(narrow_enough(Path::new(ok)), "{ok}");
        }
        for broad in [
            "/",
            "/home",
            "/etc",
            "/opt",
            "/usr/..",
            "/opt/py/../..",
            "relative/dir",
        ] {
            assert!(!narrow_enough(Path::new(broad)), "{broad}");
        }
    }
}
