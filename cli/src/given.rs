//! What `call` and `inspect` give a `--cmd` plugin as a host would (`--secret`, `--config`,
//! `--env`, `--host-proto`), and the request metadata `call` sends (`-H`): parsed before
//! anything is launched, so a bad flag costs no process.

use std::path::Path;

use tether_broker::launch::Delivery;
use tonic::metadata::{
    AsciiMetadataKey, AsciiMetadataValue, BinaryMetadataKey, BinaryMetadataValue, MetadataMap,
};

use crate::args::GivenArgs;
use crate::error::CliError;
use crate::host_stub::HostStub;

/// `NAME=VALUE` split at the first `=`, both non-empty; else a usage error naming `flag`.
fn name_value<'a>(flag: &str, text: &'a str) -> Result<(&'a str, &'a str), CliError> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() && !value.is_empty() => Ok((name, value)),
        _ => Err(CliError::Usage(format!(
            "{flag} {text:?} is not NAME={}",
            if flag == "--env" { "VALUE" } else { "FILE" }
        ))),
    }
}

/// The secrets and config files of `--secret NAME=FILE` and `--config NAME=FILE`, read
/// (`None` when there are none).
///
/// # Errors
/// A flag that is not `NAME=FILE`, a file that cannot be read ([`CliError::ValueFile`]).
pub(crate) fn delivery(given: &GivenArgs) -> Result<Option<Delivery>, CliError> {
    if given.secret_files.is_empty() && given.config_files.is_empty() {
        return Ok(None);
    }
    let read =
        |flag: &'static str, text: &str| -> Result<(String, secrecy::SecretSlice<u8>), CliError> {
            let (name, file) = name_value(flag, text)?;
            let bytes = std::fs::read(file).map_err(|source| CliError::ValueFile {
                flag,
                name: name.to_owned(),
                path: Path::new(file).to_owned(),
                source,
            })?;
            Ok((name.to_owned(), bytes.into()))
        };
    let mut delivery = Delivery::new();
    for text in &given.secret_files {
        let (name, value) = read("--secret", text)?;
        delivery = delivery.secret(name, value);
    }
    for text in &given.config_files {
        let (name, value) = read("--config", text)?;
        delivery = delivery.config(name, value);
    }
    Ok(Some(delivery))
}

/// The `(NAME, VALUE)` pairs of `--env NAME=VALUE`.
///
/// # Errors
/// A flag that is not `NAME=VALUE`.
pub(crate) fn env(given: &GivenArgs) -> Result<Vec<(&str, &str)>, CliError> {
    given
        .env
        .iter()
        .map(|text| name_value("--env", text))
        .collect()
}

/// The host-service stub of `--host-proto`/`--host-reply` (`None` without `--host-proto`).
///
/// # Errors
/// `.proto` files that do not compile, a bad `--host-reply`.
pub(crate) fn host_stub(given: &GivenArgs) -> Result<Option<HostStub>, CliError> {
    if given.host_protos.is_empty() {
        return Ok(None);
    }
    let pool = crate::descriptors::from_proto_files(&given.host_protos, &[])?;
    HostStub::new(&pool, &given.host_replies).map(Some)
}

/// The metadata of `-H 'NAME: VALUE'` flags, as grpcurl reads them: split at the first `:`,
/// the value's surrounding spaces trimmed; a `-bin` name's value is sent as its bytes
/// (base64-encoded on the wire).
///
/// # Errors
/// A flag without `:`, a name that is not a valid lowercase-able metadata key, a value with
/// characters a header cannot carry.
pub(crate) fn metadata(headers: &[String]) -> Result<MetadataMap, CliError> {
    let mut map = MetadataMap::new();
    for header in headers {
        let bad = |why: &str| {
            CliError::Usage(format!(
                "-H {header:?}: {why} (write -H 'NAME: VALUE', e.g. -H 'authorization: Bearer x')"
            ))
        };
        let Some((name, value)) = header.split_once(':') else {
            return Err(bad("no `:` between the name and the value"));
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        if name.ends_with("-bin") {
            let key = BinaryMetadataKey::from_bytes(name.as_bytes())
                .map_err(|_| bad("not a valid metadata name"))?;
            map.append_bin(key, BinaryMetadataValue::from_bytes(value.as_bytes()));
        } else {
            let key = AsciiMetadataKey::from_bytes(name.as_bytes())
                .map_err(|_| bad("not a valid metadata name"))?;
            let value = AsciiMetadataValue::try_from(value)
                .map_err(|_| bad("the value has characters a header cannot carry"))?;
            map.append(key, value);
        }
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_read_as_grpcurl_writes_them() {
        let map = metadata(&[
            "Authorization: Bearer a:b".to_owned(),
            "x-trace:  1 ".to_owned(),
            "blob-bin: \u{1}raw".to_owned(),
        ])
        .unwrap();
        assert_eq!(map.get("authorization").unwrap(), "Bearer a:b");
        assert_eq!(map.get("x-trace").unwrap(), "1");
        assert_eq!(
            map.get_bin("blob-bin")
                .unwrap()
                .to_bytes()
                .unwrap()
                .as_ref(),
            b"\x01raw"
        );
        for bad in ["no-colon", "bad name: x", "x: \u{7}"] {
            let err = metadata(&[bad.to_owned()]).unwrap_err();
            assert!(matches!(err, CliError::Usage(_)), "{bad}: {err}");
            assert!(err.to_string().contains("-H 'NAME: VALUE'"), "{err}");
        }
    }

    #[test]
    fn env_values_are_name_equals_value() {
        let given = GivenArgs {
            secret_files: vec![],
            config_files: vec![],
            env: vec![
                "VAULT_PLUGIN_AUTOMTLS_ENABLED=true".to_owned(),
                "A=b=c".to_owned(),
            ],
            host_protos: vec![],
            host_replies: vec![],
        };
        assert_eq!(
            env(&given).unwrap(),
            [("VAULT_PLUGIN_AUTOMTLS_ENABLED", "true"), ("A", "b=c")]
        );
        for bad in ["NOVALUE", "=x", "X="] {
            let given = GivenArgs {
                env: vec![bad.to_owned()],
                ..given_none()
            };
            assert!(matches!(env(&given), Err(CliError::Usage(_))), "{bad}");
        }
    }

    fn given_none() -> GivenArgs {
        GivenArgs {
            secret_files: vec![],
            config_files: vec![],
            env: vec![],
            host_protos: vec![],
            host_replies: vec![],
        }
    }

    #[test]
    fn an_unreadable_secret_file_is_named_with_its_flag() {
        let given = GivenArgs {
            secret_files: vec!["token=/nonexistent/token".to_owned()],
            ..given_none()
        };
        let err = delivery(&given).unwrap_err();
        assert!(
            err.to_string()
                .contains("--secret token=/nonexistent/token"),
            "{err}"
        );
        assert!(delivery(&given_none()).unwrap().is_none());
    }
}
