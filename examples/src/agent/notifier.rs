//! `notifier`: "sends" a message by appending it, signed with the granted secret
//! [`TOKEN_SECRET`], to `outbox.jsonl` in its working directory (the broker gives it
//! `state/notifier`). The token itself is never written or logged: the signature is
//! SHA-256(token ‖ `\n` ‖ message), which the receiver can check.
//!
//! Params: `message` (or the previous step's `text`), optional `channel`.

use std::io::Write as _;

use secrecy::ExposeSecret as _;
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use super::hash::hex;
use tether_agent::plugin::{StepError, text};

/// The secret the notifier needs (requested in its manifest, granted in the demo's grants).
pub const TOKEN_SECRET: &str = "webhook-token";

/// The file messages are appended to, in the working directory.
pub const OUTBOX: &str = "outbox.jsonl";

/// The signature of `message` with `token`.
#[must_use]
pub fn signature(token: &[u8], message: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(token);
    hasher.update(b"\n");
    hasher.update(message.as_bytes());
    hex(&hasher.finalize())
}

/// The step.
///
/// # Errors
/// When there is no message, the token was not delivered, or the outbox cannot be written.
pub fn step(
    params: &Map<String, Value>,
    input: &Map<String, Value>,
) -> Result<(Value, String), StepError> {
    let message = params
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| text(params, input, "text"), Ok)?;
    let channel = params
        .get("channel")
        .and_then(Value::as_str)
        .unwrap_or("general");
    let token = tether_sdk::secrets::read(TOKEN_SECRET)?;
    let signature = signature(token.expose_secret(), message);
    let line = json!({ "channel": channel, "message": message, "signature": signature });
    let mut outbox = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(OUTBOX)
        .map_err(|e| format!("cannot open {OUTBOX} in the working directory: {e}"))?;
    writeln!(outbox, "{line}").map_err(|e| format!("cannot write {OUTBOX}: {e}"))?;
    Ok((
        json!({ "channel": channel, "signature": signature }),
        format!("sent to #{channel}"),
    ))
}
