//! `checksum`: fetches an artifact from the host (`tether.agent.v1.Host/FetchArtifact`) and
//! returns its size, SHA-256 and — when it is UTF-8 — its text, so later steps can work on it.
//!
//! The artifact is named by `artifact` in the step's params (or, failing that, in the previous
//! step's outputs: the host then refuses it, because only the workflow's own params grant
//! artifacts — data from another plugin cannot widen what this one may read).
//!
//! With `confirm_with = "PLUGIN"` in its params, the step has another plugin of the catalog
//! confirm the digest: it calls that plugin's `Executor` (e.g. the demo's `hash`) through the
//! host (a plugin-to-plugin call, docs/PROTOCOL.md §10.3), which starts it if needed — only
//! when the grants file says `calls = ["PLUGIN"]` under `[plugins.checksum]`; otherwise the
//! step fails with the host's refusal, naming the grants line to add.

use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use super::hash::hex;
use tether_agent::plugin::HostCalls;
use tether_agent::plugin::{StepError, text};
use tether_agent::v1::executor_client::ExecutorClient;
use tether_agent::v1::{ExecuteRequest, LogLevel, Phase};

/// The step.
///
/// # Errors
/// When no artifact is named, the host does not hand it over, or the plugin named by
/// `confirm_with` cannot be called or computes another digest.
pub async fn step(
    host: HostCalls,
    params: Map<String, Value>,
    input: Map<String, Value>,
) -> Result<(Value, String), StepError> {
    let name = text(&params, &input, "artifact")?.to_owned();
    let bytes = host.fetch_artifact(&name).await?;
    let sha256 = hex(&Sha256::digest(&bytes));
    host.log(
        LogLevel::Info,
        &format!(
            "fetched artifact {name}: {} bytes, sha256 {sha256}",
            bytes.len()
        ),
    )
    .await?;
    let len = bytes.len();
    let mut outputs = json!({ "artifact": name, "bytes": len, "sha256": sha256 });
    let mut message = format!("{name}: {len} bytes, sha256 {}…", &sha256[..12]);
    let text = String::from_utf8(bytes).ok();
    // Only the workflow's params name the confirming plugin, as they name the artifact.
    if let Some(plugin) = params.get("confirm_with").and_then(Value::as_str) {
        let text = text.as_deref().ok_or_else(|| {
            StepError(format!(
                "artifact `{name}` is not UTF-8 text: plugin `{plugin}` cannot confirm its digest"
            ))
        })?;
        confirm(&host, plugin, text, &sha256).await?;
        outputs["confirmed_by"] = Value::String(plugin.to_owned());
        message.push_str(&format!(
            " (confirmed by plugin `{plugin}` through the host)"
        ));
    }
    if let Some(text) = text {
        outputs["text"] = Value::String(text);
    }
    Ok((outputs, message))
}

/// Asks catalog plugin `plugin` (an `Executor` answering `{"sha256": …}` for `{"text": …}`, as
/// the demo's `hash` does) for the digest of `text` through the host, and checks that it is
/// `sha256`.
async fn confirm(
    host: &HostCalls,
    plugin: &str,
    text: &str,
    sha256: &str,
) -> Result<(), StepError> {
    let channel = host.open_plugin(plugin).await?;
    let answer = ExecutorClient::new(channel)
        .execute(ExecuteRequest {
            step: host.step().to_owned(),
            params_json: json!({ "text": text }).to_string(),
            input_json: String::new(),
        })
        .await
        .map_err(|s| StepError(format!("plugin `{plugin}` failed: {}", s.message())))?
        .into_inner();
    if answer.phase != i32::from(Phase::Succeeded) {
        return Err(StepError(format!(
            "plugin `{plugin}` could not hash the artifact: {}",
            answer.message
        )));
    }
    let outputs: Value = serde_json::from_str(&answer.outputs_json).unwrap_or(Value::Null);
    match outputs.get("sha256").and_then(Value::as_str) {
        Some(digest) if digest == sha256 => Ok(()),
        Some(digest) => Err(StepError(format!(
            "plugin `{plugin}` computed sha256 {digest} for the text this step hashed to {sha256}"
        ))),
        None => Err(StepError(format!(
            "plugin `{plugin}` answered no `sha256` (is it a hash step?)"
        ))),
    }
}
