//! Messages known only at run time as protobuf's canonical JSON: `call`'s request parsed,
//! responses (and the host-service stub's records) written.

use prost_reflect::{DynamicMessage, MessageDescriptor, SerializeOptions};

use crate::error::CliError;
use crate::output;

/// Parses the request JSON as `message` (canonical protobuf JSON; unknown fields are errors).
pub(crate) fn parse_request(
    message: &MessageDescriptor,
    json: &str,
) -> Result<DynamicMessage, CliError> {
    let bad = |source| CliError::BadRequest {
        message: message.full_name().to_owned(),
        source,
    };
    let mut de = serde_json::Deserializer::from_str(json);
    let msg = DynamicMessage::deserialize(message.clone(), &mut de).map_err(bad)?;
    de.end().map_err(bad)?;
    Ok(msg)
}

/// Writes `message` as compact canonical protobuf JSON, safe for a terminal
/// ([`output::json`]).
pub(crate) fn to_json(message: &DynamicMessage) -> Result<String, CliError> {
    let value = message
        .serialize_with_options(
            serde_json::value::Serializer,
            &SerializeOptions::new().skip_default_fields(true),
        )
        .map_err(CliError::BadResponse)?;
    output::json(&value).map_err(CliError::BadResponse)
}
