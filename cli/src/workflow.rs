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

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

/// A workflow file that cannot be used: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}: {message}; fix the workflow file", file.display())]
pub(crate) struct WorkflowError {
    pub(crate) file: PathBuf,
    /// 1-based line (1 when the file could not be read).
    pub(crate) line: usize,
    pub(crate) message: String,
}

/// A parsed workflow.
#[derive(Debug, Clone)]
pub(crate) struct Workflow {
    pub(crate) name: String,
    pub(crate) steps: Vec<Step>,
}

/// One step.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub(crate) name: String,
    pub(crate) plugin: String,
    /// A JSON object.
    pub(crate) params_json: String,
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
    pub(crate) fn load(file: &Path, plugins: &[String]) -> Result<Self, WorkflowError> {
        let text = std::fs::read_to_string(file).map_err(|e| WorkflowError {
            file: file.to_owned(),
            line: 1,
            message: format!("cannot read it: {e}"),
        })?;
        Self::parse(&text, file, plugins)
    }

    /// Parses the workflow `text` read from `file`.
    pub(crate) fn parse(
        text: &str,
        file: &Path,
        plugins: &[String],
    ) -> Result<Self, WorkflowError> {
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
            steps.push(Step {
                name: step.name,
                plugin: step.plugin.into_inner(),
                params_json: params,
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
