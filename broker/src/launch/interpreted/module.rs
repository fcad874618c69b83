//! A module a confined Python plugin could not import, looked for outside the sandbox: the
//! plugin's own interpreter, with its environment and confined to reading, runs
//! `find_module.py`, which reads (never runs) the plugin's script for the `sys.path` entries it
//! adds and asks the import system's finders. Found nowhere: the module is not installed
//! ([`MissingModule`]), and no sandbox allowance would help; found: the directory it is in is
//! what the sandbox refused.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::launch::interpreted::query::{ReadOnly, run_read_only};
use crate::launch::interpreted::runtime::{Interpreter, ResolvedRuntime, RuntimeError};

/// The helper the interpreter runs (`python -c FIND_MODULE SCRIPT MODULE`).
const FIND_MODULE: &str = include_str!("find_module.py");

/// A module a plugin could not import that its interpreter cannot import outside the sandbox
/// either: it is not installed for that interpreter, and the sandbox is not the cause.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MissingModule {
    /// The module's name as the import error gives it (`yaml`, `google.protobuf`).
    pub module: String,
    /// The interpreter family.
    pub interpreter: Interpreter,
    /// The interpreter that ran the plugin (and was asked).
    pub program: PathBuf,
    /// The stderr line that shows it.
    pub evidence: String,
}

impl fmt::Display for MissingModule {
    /// `: "EVIDENCE"; WHY; REMEDY`, meant to follow a sentence about the exit.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let program = tether_proto::text::escape(&self.program.to_string_lossy()).to_string();
        let module = tether_proto::text::escape(&self.module).to_string();
        let top = module.split('.').next().unwrap_or(&module);
        write!(
            f,
            ": {:?}; its interpreter {program} cannot import `{module}` outside the sandbox either (with the plugin's environment and the sys.path entries its script adds), so the sandbox is not the cause: the module is not installed for that interpreter. Install it for that interpreter (`{program} -m pip install {top}`; a package may be named otherwise than its module), or run the plugin with an interpreter or virtualenv that has it",
            tether_proto::text::escape(&self.evidence).to_string()
        )
    }
}

/// Where the interpreter would import a module from, outside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Nowhere: not installed.
    Nowhere,
    /// In this `sys.path` entry (or package directory); `None` for a built-in module.
    Found(Option<PathBuf>),
    /// Only running a parent module would tell (`os.path`).
    Unknown,
}

/// The helper's answer.
#[derive(Deserialize)]
struct Answer {
    found: Option<bool>,
    entry: Option<PathBuf>,
}

/// The module name in a Python import error's line (`No module named 'x.y'`).
pub(crate) fn missing_module_name(evidence: &str) -> Option<&str> {
    let rest = evidence.split("No module named ").nth(1)?;
    let name = rest.trim().trim_matches(|c| c == '\'' || c == '"');
    let valid = !name.is_empty()
        && name
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(|c| c == '_' || c.is_alphanumeric()));
    valid.then_some(name)
}

/// Reads the helper's answer.
fn parse(text: &str) -> Result<Lookup, String> {
    let answer: Answer =
        serde_json::from_str(text.trim()).map_err(|e| format!("not the JSON asked for ({e})"))?;
    Ok(match answer.found {
        Some(false) => Lookup::Nowhere,
        Some(true) => Lookup::Found(answer.entry.filter(|e| e.is_absolute())),
        None => Lookup::Unknown,
    })
}

/// Asks `runtime`'s interpreter, as `reader` says, where `module` would be found, within
/// `timeout`.
pub(crate) async fn look_up(
    reader: &ReadOnly<'_>,
    runtime: &ResolvedRuntime,
    module: &str,
    timeout: Duration,
) -> Result<Lookup, RuntimeError> {
    let script = runtime.script.as_deref().unwrap_or(Path::new(""));
    let args = [
        OsStr::new("-c"),
        OsStr::new(FIND_MODULE),
        script.as_os_str(),
        OsStr::new(module),
    ];
    let text = run_read_only(
        reader,
        runtime.interpreter,
        &runtime.program,
        &args,
        timeout,
    )
    .await?;
    parse(&text).map_err(|reason| RuntimeError::BadAnswer {
        interpreter: runtime.interpreter,
        program: runtime.program.clone(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_is_read_from_pythons_import_error() {
        for (line, name) in [
            ("ModuleNotFoundError: No module named 'yaml'", Some("yaml")),
            (
                "ModuleNotFoundError: No module named 'google.protobuf'",
                Some("google.protobuf"),
            ),
            ("ImportError: No module named foo_bar", Some("foo_bar")),
            ("ModuleNotFoundError: No module named 'a b'", None),
            ("ModuleNotFoundError: No module named ''", None),
            ("PermissionError: [Errno 13] Permission denied", None),
        ] {
            assert_eq!(missing_module_name(line), name, "{line}");
        }
    }

    #[test]
    fn the_helpers_answer_says_nowhere_found_or_cannot_tell() {
        assert_eq!(
            parse(r#"{"found": false, "entry": null, "origin": null}"#),
            Ok(Lookup::Nowhere)
        );
        assert_eq!(
            parse(r#"{"found": true, "entry": "/srv/lib", "origin": "/srv/lib/m.py"}"#),
            Ok(Lookup::Found(Some(PathBuf::from("/srv/lib"))))
        );
        assert_eq!(
            parse(r#"{"found": true, "entry": "lib", "origin": null}"#),
            Ok(Lookup::Found(None))
        );
        assert_eq!(
            parse(r#"{"found": null, "entry": null, "origin": null}"#),
            Ok(Lookup::Unknown)
        );
        assert!(parse("Traceback").is_err());
    }

    #[test]
    fn not_installed_names_pip_for_that_interpreter_and_never_an_allowance() {
        let missing = MissingModule {
            module: "yaml.loader".into(),
            interpreter: Interpreter::Python,
            program: "/opt/py/bin/python3.12".into(),
            evidence: "ModuleNotFoundError: No module named 'yaml.loader'".into(),
        };
        let text = missing.to_string();
        assert!(
            text.contains("`/opt/py/bin/python3.12 -m pip install yaml`"),
            "{text}"
        );
        assert!(text.contains("not installed"), "{text}");
        for loosening in ["allow", "sandbox_", "--runtime"] {
            assert!(!text.contains(loosening), "{text}");
        }
    }
}
