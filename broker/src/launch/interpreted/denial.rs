//! Telling a sandbox denial from other early exits: a confined plugin that exits before its
//! handshake with status 126/127, or with a permission or import error on its stderr, was
//! most likely refused something by Landlock; [`diagnose`] says what to allow. Pure: the exit
//! status and stderr tail in, a [`Denial`] out.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use crate::launch::interpreted::runtime::Interpreter;

/// What stderr says when a program was refused a file (errno names and messages, Python's
/// and Node's import failures, the shell's "cannot execute").
const DENIAL_MARKERS: &[&str] = &[
    "Permission denied",
    "Operation not permitted",
    "No such file or directory",
    "EACCES",
    "EPERM",
    "ENOENT",
    "PermissionError",
    "ImportError",
    "ModuleNotFoundError",
    "No module named",
    "Cannot find module",
    "cannot execute",
];

/// A confined plugin's early exit that looks like a sandbox denial.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Denial {
    /// The stderr line that shows it (empty when only the exit status does).
    pub evidence: String,
    /// What to allow.
    pub allowance: Allowance,
}

/// What a denied plugin needs allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Allowance {
    /// Reading and executing below this directory.
    Exec(PathBuf),
    /// Reading below this directory.
    Read(PathBuf),
    /// Resolving the interpreter, so its prefixes are allowed (a pyenv shim, a virtualenv, a
    /// Python that cannot find its standard library).
    Runtime(Interpreter),
    /// A module that is not in an allowed directory: the directory is not known.
    ImportPath,
    /// Nothing more specific is known.
    Unknown,
}

impl Denial {
    /// The file its evidence says does not exist (`No such file or directory`, `ENOENT`), if
    /// it names one: one that does not exist on the host either was not hidden by the sandbox.
    pub(crate) fn missing_path(&self) -> Option<PathBuf> {
        let e = &self.evidence;
        (e.contains("No such file or directory") || e.contains("ENOENT"))
            .then(|| first_path(e))
            .flatten()
    }
}

impl fmt::Display for Denial {
    /// `: "EVIDENCE"; REMEDY`, meant to follow a sentence about the exit.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.evidence.is_empty() {
            write!(f, ": {:?}", self.evidence)?;
        }
        write!(f, "; {}", self.allowance)
    }
}

impl fmt::Display for Allowance {
    /// The remedy, for each way a plugin is launched.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exec(dir) | Self::Read(dir) => {
                let (key, flag) = match self {
                    Self::Exec(_) => ("sandbox_allow_exec", "--allow-exec"),
                    _ => ("sandbox_allow_read", "--allow-read"),
                };
                let dir = tether_proto::text::escape(&dir.to_string_lossy()).to_string();
                write!(
                    f,
                    "allow it: `{flag} {dir}` (tether call/inspect, the example hosts), `{key} = [\"{dir}\"]` in the manifest (granted by the same line under `[plugins.NAME]` in the grants file), or `.{key}(\"{dir}\")` on the builder"
                )
            }
            Self::Runtime(interpreter) => write!(
                f,
                "let tether find the real interpreter and allow its prefixes: `--runtime {interpreter}` (tether call/inspect), `runtime = \"{interpreter}\"` in the manifest, or `.runtime(Runtime::{})` on the builder",
                match interpreter {
                    Interpreter::Python => "Python",
                    Interpreter::Node => "Node",
                }
            ),
            Self::ImportPath => f.write_str(
                "allow the directory that module is in with `--allow-read DIR` / `sandbox_allow_read` / `.sandbox_allow_read(DIR)`",
            ),
            Self::Unknown => f.write_str(
                "allow what it needs with `--allow-read`/`--allow-exec` (`sandbox_allow_read`/`sandbox_allow_exec` in a manifest), or run it with `RUST_LOG=debug` to see its full stderr",
            ),
        }
    }
}

/// Whether a confined plugin's exit with `status` and `stderr` (its tail) before the handshake
/// looks like a sandbox denial, and what to allow. `resolved`: the interpreter that was
/// resolved for it, if any (then a runtime is not suggested again).
pub(crate) fn diagnose(
    status: ExitStatus,
    stderr: &str,
    resolved: Option<Interpreter>,
) -> Option<Denial> {
    let code = status.code();
    let evidence = stderr
        .lines()
        .rev()
        .find(|line| DENIAL_MARKERS.iter().any(|m| line.contains(m)))
        .map(str::trim);
    if evidence.is_none() && !matches!(code, Some(126 | 127)) {
        return None;
    }
    let evidence = evidence.unwrap_or_default().to_owned();
    let path = first_path(&evidence);
    let python_sign = stderr.contains("Traceback")
        || stderr.contains("pyenv")
        || stderr.contains("pyvenv.cfg")
        || evidence.contains("No module named 'encodings'")
        || path
            .as_deref()
            .is_some_and(|p| p.to_string_lossy().contains("python"));
    let node_sign = stderr.contains("node:internal") || stderr.contains("Cannot find module");
    let allowance = if resolved.is_none() && python_sign {
        Allowance::Runtime(Interpreter::Python)
    } else if resolved.is_none() && node_sign {
        Allowance::Runtime(Interpreter::Node)
    } else if let Some(path) = path {
        let dir = path
            .parent()
            .map_or_else(|| path.clone(), Path::to_path_buf);
        if code == Some(126) || evidence.contains("cannot execute") {
            Allowance::Exec(dir)
        } else {
            Allowance::Read(dir)
        }
    } else if evidence.contains("No module named") || evidence.contains("Cannot find module") {
        Allowance::ImportPath
    } else {
        Allowance::Unknown
    };
    Some(Denial {
        evidence,
        allowance,
    })
}

/// The first absolute path in `line` (a `/` at the start or after a space, quote, `(`, `=` or
/// `:`), without surrounding quotes and trailing punctuation.
fn first_path(line: &str) -> Option<PathBuf> {
    let starts = line.char_indices().filter(|&(i, c)| {
        c == '/'
            && line[..i]
                .chars()
                .next_back()
                .is_none_or(|b| b.is_whitespace() || matches!(b, '\'' | '"' | '(' | '=' | ':'))
    });
    starts
        .map(|(start, _)| {
            let rest = &line[start..];
            let end = rest
                .find(|c: char| {
                    c.is_whitespace() || matches!(c, '\'' | '"' | ':' | ',' | ')' | ']')
                })
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .find(|path| path.len() > 1)
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt as _;

    use super::*;

    fn exit(code: i32) -> ExitStatus {
        ExitStatus::from_raw(code << 8)
    }

    #[test]
    fn a_pyenv_shim_refused_its_libexec_is_told_to_resolve_the_runtime() {
        let d = diagnose(
            exit(126),
            "/root/.pyenv/shims/python3: line 21: /root/.pyenv/libexec/pyenv: Permission denied\n",
            None,
        )
        .unwrap();
        assert_eq!(d.allowance, Allowance::Runtime(Interpreter::Python));
        assert!(d.evidence.contains("libexec/pyenv: Permission denied"));
        assert!(d.allowance.to_string().contains("--runtime python"));
    }

    #[test]
    fn a_denied_path_outside_an_interpreter_names_its_directory() {
        let d = diagnose(
            exit(1),
            "Traceback (most recent call last):\nPermissionError: [Errno 13] Permission denied: '/srv/data/table.csv'\n",
            Some(Interpreter::Python),
        )
        .unwrap();
        assert_eq!(d.allowance, Allowance::Read(PathBuf::from("/srv/data")));
        let text = d.allowance.to_string();
        assert!(text.contains("--allow-read /srv/data"), "{text}");
        assert!(
            text.contains("sandbox_allow_read = [\"/srv/data\"]"),
            "{text}"
        );
        let d = diagnose(exit(126), "sh: 1: /opt/tool/bin/run: cannot execute", None).unwrap();
        assert_eq!(d.allowance, Allowance::Exec(PathBuf::from("/opt/tool/bin")));
        let d = diagnose(
            exit(1),
            "error:BIO_new_file:Permission denied:../deps/crypto/bss_file.c:67:calling fopen(/etc/tool/tool.cnf, rb)",
            None,
        )
        .unwrap();
        assert_eq!(d.allowance, Allowance::Read(PathBuf::from("/etc/tool")));
        let d = diagnose(exit(126), "sh: 1: /opt/tool/bin/run: cannot execute", None).unwrap();
        assert_eq!(d.allowance, Allowance::Exec(PathBuf::from("/opt/tool/bin")));
    }

    #[test]
    fn a_missing_module_and_a_bare_126_are_denials_too() {
        let d = diagnose(
            exit(1),
            "ModuleNotFoundError: No module named 'tether_plugin'",
            Some(Interpreter::Python),
        )
        .unwrap();
        assert_eq!(d.allowance, Allowance::ImportPath);
        let d = diagnose(exit(127), "", None).unwrap();
        assert_eq!(d.allowance, Allowance::Unknown);
    }

    #[test]
    fn a_missing_files_path_is_read_from_the_evidence() {
        let d = diagnose(
            exit(1),
            "FileNotFoundError: [Errno 2] No such file or directory: '/etc/kv/kv.toml'",
            Some(Interpreter::Python),
        )
        .unwrap();
        assert_eq!(d.missing_path(), Some(PathBuf::from("/etc/kv/kv.toml")));
        let d = diagnose(exit(1), "open /srv/x: Permission denied", None).unwrap();
        assert_eq!(d.missing_path(), None);
    }

    #[test]
    fn an_ordinary_failure_is_not_a_denial() {
        assert_eq!(
            diagnose(
                exit(1),
                "This binary is a plugin. These are not meant to be executed directly.",
                None
            ),
            None
        );
        assert_eq!(diagnose(ExitStatus::from_raw(9), "", None), None);
    }
}
