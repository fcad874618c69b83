//! `checksum`: fetches an artifact from the host (`tether.agent.v1.Host/FetchArtifact`) and
//! returns its size, SHA-256 and — when it is UTF-8 — its text, so later steps can work on it.
//!
//! The artifact is named by `artifact` in the step's params (or, failing that, in the previous
//! step's outputs: the host then refuses it, because only the workflow's own params grant
//! artifacts — data from another plugin cannot widen what this one may read).

use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use super::hash::hex;
use tether_agent::plugin::HostCalls;
use tether_agent::plugin::{StepError, text};
use tether_agent::v1::LogLevel;

/// The step.
///
/// # Errors
/// When no artifact is named or the host does not hand it over.
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
    if let Ok(text) = String::from_utf8(bytes) {
        outputs["text"] = Value::String(text);
    }
    let message = format!("{name}: {len} bytes, sha256 {}…", &sha256[..12]);
    Ok((outputs, message))
}
