//! `hash`: the SHA-256 of `text` (param or previous output), or of a secret granted to this
//! plugin (`{"secret": "NAME"}`: a fingerprint of a credential without revealing it).

use secrecy::ExposeSecret as _;
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use tether_agent::plugin::{StepError, text};

/// The step.
///
/// # Errors
/// When there is no string `text`, or the named secret was not delivered to this plugin.
pub fn step(
    params: &Map<String, Value>,
    input: &Map<String, Value>,
) -> Result<(Value, String), StepError> {
    let digest = match params.get("secret").and_then(Value::as_str) {
        Some(name) => {
            let secret = tether_sdk::secrets::read(name)?;
            hex(&Sha256::digest(secret.expose_secret()))
        }
        None => hex(&Sha256::digest(text(params, input, "text")?.as_bytes())),
    };
    let message = format!("sha256 {}…", &digest[..12]);
    Ok((json!({ "sha256": digest }), message))
}

/// Lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_of_text_is_its_sha256() {
        let params = json!({"text": "abc"}).as_object().unwrap().clone();
        let (out, _) = step(&params, &Map::new()).unwrap();
        assert_eq!(
            out["sha256"],
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
