//! `word-count`: counts the words, lines and characters of `text` (param or previous output).

use serde_json::{Map, Value, json};

use tether_agent::plugin::{StepError, text};

/// The step.
///
/// # Errors
/// When there is no string `text`.
pub fn step(
    params: &Map<String, Value>,
    input: &Map<String, Value>,
) -> Result<(Value, String), StepError> {
    let text = text(params, input, "text")?;
    let words = text.split_whitespace().count();
    let outputs = json!({
        "text": text,
        "words": words,
        "lines": text.lines().count(),
        "chars": text.chars().count(),
    });
    Ok((outputs, format!("{words} words")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_lines_and_characters_are_counted() {
        let params = json!({"text": "a bb\nccc é"}).as_object().unwrap().clone();
        let (out, _) = step(&params, &Map::new()).unwrap();
        assert_eq!(
            (
                out["words"].as_u64(),
                out["lines"].as_u64(),
                out["chars"].as_u64()
            ),
            (Some(4), Some(2), Some(10))
        );
    }
}
