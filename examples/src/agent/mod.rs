//! The agent demo's Rust steps (`examples/agent/catalog/*.toml` names them), each served as a
//! separate `tether.agent.v1.Executor` plugin process with its own manifest, sandbox and
//! secrets.
//!
//! [`checksum`] calls back into the host's `tether.agent.v1.Host` service (artifacts, progress,
//! a log line) through [`HostCalls`]; the others work on their params
//! and input alone.
//!
//! The steps are served by the demo's one multi-call binary, `agent-demo`: `agent-demo step NAME`
//! calls [`serve`]; without `step` it is the agent that runs the demo's workflow.

pub mod checksum;
pub mod hash;
pub mod json_transform;
pub mod notifier;
pub mod template;
pub mod word_count;

use std::process::ExitCode;

use tether_agent::plugin::{HostCalls, Step, StepFuture, serve_step};

/// The demo's Rust plugins by name: what [`serve`] (`agent-demo step NAME`) serves.
pub const PLUGINS: &[(&str, Step)] = &[
    ("json-transform", Step::Local(json_transform::step)),
    ("word-count", Step::Local(word_count::step)),
    ("hash", Step::Local(hash::step)),
    ("notifier", Step::Local(notifier::step)),
    ("template", Step::Local(template::step)),
    ("checksum", Step::WithHost(checksum_step)),
];

/// [`serve`] was asked for a plugin the demo does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "there is no demo plugin `{name}`; the demo plugins are: {}",
    PLUGINS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
)]
pub struct UnknownPlugin {
    /// The name asked for.
    pub name: String,
}

/// Serves the demo plugin `name` until the host stops it (the SDK builds its own runtime and
/// logging).
///
/// # Errors
/// [`UnknownPlugin`] when `name` is not one of [`PLUGINS`]; nothing is served then.
pub fn serve(name: &str) -> Result<ExitCode, UnknownPlugin> {
    match PLUGINS.iter().find(|(n, _)| *n == name) {
        Some((_, step)) => Ok(serve_step(*step)),
        None => Err(UnknownPlugin {
            name: name.to_owned(),
        }),
    }
}

/// [`checksum::step`] as a [`HostStepFn`](tether_agent::plugin::HostStepFn).
fn checksum_step(
    host: HostCalls,
    params: serde_json::Map<String, serde_json::Value>,
    input: serde_json::Map<String, serde_json::Value>,
) -> StepFuture {
    Box::pin(checksum::step(host, params, input))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_plugin_is_refused_with_the_list_of_demo_plugins() {
        let err = serve("nope").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("`nope`"), "{text}");
        for (name, _) in PLUGINS {
            assert!(text.contains(name), "{text}");
        }
    }
}
