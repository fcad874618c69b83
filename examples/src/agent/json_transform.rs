//! `json-transform`: reshapes the previous step's outputs.
//!
//! Params (all optional): `data` (an object used instead of the previous step's outputs),
//! `pick` (keys to keep), `rename` (`{"old": "new"}`), `set` (keys to add or overwrite).

use serde_json::{Map, Value};

use tether_agent::plugin::StepError;

/// The step.
///
/// # Errors
/// When a parameter has the wrong JSON type.
pub fn step(
    params: &Map<String, Value>,
    input: &Map<String, Value>,
) -> Result<(Value, String), StepError> {
    let mut doc = match params.get("data") {
        Some(Value::Object(data)) => data.clone(),
        Some(_) => return Err("`data` must be a JSON object".into()),
        None => input.clone(),
    };
    if let Some(pick) = params.get("pick") {
        let keys: Vec<&str> = pick
            .as_array()
            .and_then(|keys| keys.iter().map(Value::as_str).collect())
            .ok_or("`pick` must be an array of strings")?;
        doc.retain(|k, _| keys.contains(&k.as_str()));
    }
    if let Some(rename) = params.get("rename") {
        let rename = rename
            .as_object()
            .ok_or("`rename` must be an object of old → new key names")?;
        for (old, new) in rename {
            let new = new.as_str().ok_or("`rename` values must be strings")?;
            if let Some(value) = doc.remove(old) {
                doc.insert(new.to_owned(), value);
            }
        }
    }
    if let Some(set) = params.get("set") {
        let set = set.as_object().ok_or("`set` must be a JSON object")?;
        doc.extend(set.clone());
    }
    let message = format!("{} keys", doc.len());
    Ok((Value::Object(doc), message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn pick_rename_and_set_apply_in_that_order() {
        let params = obj(json!({"pick": ["a", "b"], "rename": {"a": "x"}, "set": {"b": 9}}));
        let (out, _) = step(&params, &obj(json!({"a": 1, "b": 2, "c": 3}))).unwrap();
        assert_eq!(out, json!({"x": 1, "b": 9}));
    }

    #[test]
    fn a_pick_that_is_not_a_list_of_strings_fails_the_step() {
        assert!(step(&obj(json!({"pick": [1]})), &Map::new()).is_err());
    }
}
