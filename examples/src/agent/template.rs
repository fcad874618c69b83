//! `template`: fills `{key}` placeholders of the `template` param from the previous step's
//! outputs and the params' `values`.

use serde_json::{Map, Value, json};

use tether_agent::plugin::StepError;

/// The step.
///
/// # Errors
/// When `template` is missing or names a key that has no value.
pub fn step(
    params: &Map<String, Value>,
    input: &Map<String, Value>,
) -> Result<(Value, String), StepError> {
    let template = params
        .get("template")
        .and_then(Value::as_str)
        .ok_or("needs a string `template` param")?;
    let values = params.get("values").and_then(Value::as_object);
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or("`template` has a `{` without a closing `}`")?;
        let key = &after[..close];
        let value = values
            .and_then(|v| v.get(key))
            .or_else(|| input.get(key))
            .ok_or_else(|| StepError(format!("`template` uses `{{{key}}}`, which has no value")))?;
        match value {
            Value::String(s) => out.push_str(s),
            other => out.push_str(&other.to_string()),
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    let message = format!("{} characters", out.chars().count());
    Ok((json!({ "text": out }), message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_come_from_values_then_input() {
        let params = json!({"template": "{who} has {words} words", "values": {"who": "it"}});
        let input = json!({"words": 3, "who": "ignored"});
        let (out, _) = step(params.as_object().unwrap(), input.as_object().unwrap()).unwrap();
        assert_eq!(out["text"], "it has 3 words");
    }

    #[test]
    fn a_placeholder_without_a_value_fails_the_step() {
        let params = json!({"template": "{nope}"});
        let err = step(params.as_object().unwrap(), &Map::new()).unwrap_err();
        assert!(err.0.contains("{nope}"), "{err:?}");
    }
}
