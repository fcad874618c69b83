//! Workflow files: a named list of steps, each run by one plugin with JSON-like params.
//!
//! ```toml
//! name = "release-notes"
//!
//! [[steps]]
//! name = "count"
//! plugin = "word-count"
//! params = { text = "tether runs plugins" }
//! ```
//!
//! Each step receives the previous step's outputs as its input.
//!
//! A step's params also say which host-side artifacts its plugin may fetch
//! (`tether.agent.v1.Host/FetchArtifact`): the name in `artifact`, and the names in
//! `artifacts`. Each must be a plain file name (see [`artifact_name`]); nothing else is served to
//! that step.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

/// A workflow file that cannot be used: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}: {message}; fix the workflow file", file.display())]
pub struct WorkflowError {
    /// The workflow file.
    pub file: PathBuf,
    /// 1-based line (1 when the file could not be read).
    pub line: usize,
    /// What is wrong there.
    pub message: String,
}

/// A parsed workflow.
#[derive(Debug, Clone)]
pub struct Workflow {
    /// The workflow's name (`name = "…"`).
    pub name: String,
    /// The steps, in the order they run.
    pub steps: Vec<Step>,
}

/// One step.
#[derive(Debug, Clone)]
pub struct Step {
    /// The step's name (sent to the plugin as `ExecuteRequest.step`).
    pub name: String,
    /// The catalog plugin that runs it.
    pub plugin: String,
    /// Its params, a JSON object.
    pub params_json: String,
    /// The artifacts its params name (`artifact`, `artifacts`): the only ones the host serves
    /// to this step.
    pub artifacts: Vec<String>,
}

/// Checks that `name` can name an artifact: a plain file name of ASCII letters, digits, `.`,
/// `_` and `-`, not starting with `.` (so no paths, `..` or hidden files), at most 255 bytes.
///
/// # Errors
/// The sentence to show when it cannot.
pub fn artifact_name(name: &str) -> Result<&str, String> {
    let plain = !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if plain {
        Ok(name)
    } else {
        Err(format!(
            "`{name}` is not an artifact name: use a plain file name (letters, digits, `.`, `_`, `-`; not starting with `.`)"
        ))
    }
}

/// The artifacts `params` names: `artifact = "NAME"` and `artifacts = ["NAME", …]`.
fn artifacts_of(params: &toml::Table) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    match params.get("artifact") {
        None => {}
        Some(toml::Value::String(name)) => names.push(artifact_name(name)?.to_owned()),
        Some(_) => return Err("`artifact` must be a string".to_owned()),
    }
    match params.get("artifacts") {
        None => {}
        Some(toml::Value::Array(list)) => {
            for value in list {
                let name = value
                    .as_str()
                    .ok_or_else(|| "`artifacts` must be a list of strings".to_owned())?;
                names.push(artifact_name(name)?.to_owned());
            }
        }
        Some(_) => return Err("`artifacts` must be a list of strings".to_owned()),
    }
    Ok(names)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkflow {
    name: String,
    steps: Spanned<Vec<RawStep>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    name: String,
    plugin: Spanned<String>,
    #[serde(default)]
    params: toml::Table,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

impl Workflow {
    /// Reads and parses `file`; every plugin named must be in `plugins`.
    ///
    /// # Errors
    /// When the file cannot be read or [`parse`](Self::parse) refuses it.
    pub fn load(file: &Path, plugins: &[String]) -> Result<Self, WorkflowError> {
        let text = std::fs::read_to_string(file).map_err(|e| WorkflowError {
            file: file.to_owned(),
            line: 1,
            message: format!("cannot read it: {e}"),
        })?;
        Self::parse(&text, file, plugins)
    }

    /// Parses the workflow `text` read from `file`.
    ///
    /// # Errors
    /// A TOML or schema error, a workflow without steps, a step whose plugin is not in
    /// `plugins` or whose params name a bad artifact: each with its line.
    pub fn parse(text: &str, file: &Path, plugins: &[String]) -> Result<Self, WorkflowError> {
        let error = |offset: usize, message: String| WorkflowError {
            file: file.to_owned(),
            line: line_of(text, offset),
            message,
        };
        let raw: RawWorkflow = toml::from_str(text).map_err(|e| {
            error(
                e.span().map_or(0, |s| s.start),
                e.message().trim().to_owned(),
            )
        })?;
        if raw.steps.get_ref().is_empty() {
            return Err(error(raw.steps.span().start, "it has no steps".to_owned()));
        }
        let mut steps = Vec::new();
        for step in raw.steps.into_inner() {
            let plugin = step.plugin.get_ref();
            if !plugins.contains(plugin) {
                return Err(error(
                    step.plugin.span().start,
                    format!(
                        "step `{}` uses plugin `{plugin}`, which is not in the catalog (it has: {})",
                        step.name,
                        plugins.join(", ")
                    ),
                ));
            }
            let params = serde_json::to_string(&step.params).map_err(|e| {
                error(
                    step.plugin.span().start,
                    format!(
                        "step `{}`: params cannot be written as JSON: {e}",
                        step.name
                    ),
                )
            })?;
            let artifacts = artifacts_of(&step.params).map_err(|message| {
                error(
                    step.plugin.span().start,
                    format!("step `{}`: {message}", step.name),
                )
            })?;
            steps.push(Step {
                name: step.name,
                plugin: step.plugin.into_inner(),
                params_json: params,
                artifacts,
            });
        }
        Ok(Self {
            name: raw.name,
            steps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugins() -> Vec<String> {
        vec!["a".to_owned(), "b".to_owned()]
    }

    #[test]
    fn steps_keep_their_order_and_params_become_json() {
        let text = "name = \"w\"\n[[steps]]\nname = \"one\"\nplugin = \"b\"\nparams = { x = 1, y = [\"z\"] }\n[[steps]]\nname = \"two\"\nplugin = \"a\"\n";
        let w = Workflow::parse(text, Path::new("w.toml"), &plugins()).unwrap();
        let names: Vec<_> = w
            .steps
            .iter()
            .map(|s| (s.name.as_str(), s.plugin.as_str()))
            .collect();
        assert_eq!(names, [("one", "b"), ("two", "a")]);
        let params: serde_json::Value = serde_json::from_str(&w.steps[0].params_json).unwrap();
        assert_eq!(params, serde_json::json!({"x": 1, "y": ["z"]}));
        assert_eq!(w.steps[1].params_json, "{}");
    }

    #[test]
    fn an_unknown_plugin_is_reported_with_its_line() {
        let text = "name = \"w\"\n[[steps]]\nname = \"one\"\nplugin = \"nope\"\n";
        let err = Workflow::parse(text, Path::new("w.toml"), &plugins()).unwrap_err();
        assert_eq!(err.line, 4, "{err}");
        assert!(err.message.contains("`nope`"), "{err}");
    }

    #[test]
    fn an_unknown_key_is_reported_with_its_line() {
        let text = "name = \"w\"\n[[steps]]\nname = \"one\"\nplugn = \"a\"\n";
        let err = Workflow::parse(text, Path::new("w.toml"), &plugins()).unwrap_err();
        assert_eq!(err.line, 4, "{err}");
    }

    #[test]
    fn the_artifacts_a_step_may_fetch_come_from_its_params() {
        let text = "name = \"w\"\n[[steps]]\nname = \"one\"\nplugin = \"a\"\nparams = { artifact = \"notes.md\", artifacts = [\"x-1.bin\"] }\n[[steps]]\nname = \"two\"\nplugin = \"b\"\n";
        let w = Workflow::parse(text, Path::new("w.toml"), &plugins()).unwrap();
        assert_eq!(w.steps[0].artifacts, ["notes.md", "x-1.bin"]);
        assert!(w.steps[1].artifacts.is_empty());
    }

    #[test]
    fn an_artifact_name_that_is_a_path_is_refused_with_its_line() {
        for bad in ["../grants.toml", "/etc/passwd", ".hidden", "a/b", ""] {
            let text = format!(
                "name = \"w\"\n[[steps]]\nname = \"one\"\nplugin = \"a\"\nparams = {{ artifact = \"{bad}\" }}\n"
            );
            let err = Workflow::parse(&text, Path::new("w.toml"), &plugins()).unwrap_err();
            assert_eq!(err.line, 4, "{err}");
            assert!(err.message.contains("not an artifact name"), "{err}");
        }
    }

    #[test]
    fn a_workflow_without_steps_is_refused() {
        let err = Workflow::parse(
            "name = \"w\"\nsteps = []\n",
            Path::new("w.toml"),
            &plugins(),
        )
        .unwrap_err();
        assert!(err.message.contains("no steps"), "{err}");
    }
}
