//! Checks through the user's `--call`: the plugin calls the host's services back (§10.1,
//! `--host-proto`) and depends on the secrets delivered to it (§10.2, `--secret`). Each launch
//! is shut down before the next begins.

use tether_broker::PluginClient;

use super::report::{CheckResult, Level, Outcome, fail, not_applicable, pass};
use super::subject::{Subject, UserCall};
use crate::call::{invoke, slash_name};
use crate::descriptors::{self, split_method};
use crate::error::CliError;
use crate::json_messages::parse_request;

/// The largest response `--call` decodes (its content is not checked, only its arrival).
const MAX_RESPONSE: usize = 64 << 20;

/// The callback row, then the secrets row.
pub(crate) async fn all(subject: &Subject) -> Vec<CheckResult> {
    let Some(call) = &subject.call else {
        return vec![
            callback_row(not_applicable(
                "give --call SERVICE/METHOD (a call that makes the plugin call the host back) and --host-proto FILE declaring the host's services",
            )),
            secrets_row(
                Level::Required,
                not_applicable(
                    "give --call SERVICE/METHOD (a call that needs the secret) and --secret NAME=FILE; else test it in-process (tether-sdk-test's TestHost::secret, the Python SDK's granted_files fixture)",
                ),
            ),
        ];
    };
    // One launch with everything given answers both rows.
    let before = subject.host_stub.as_ref().map_or(0, |s| s.calls().len());
    let with = launch_and_call(subject, call, true).await;
    let called_back: Vec<String> = subject
        .host_stub
        .as_ref()
        .map(|s| s.calls().split_off(before))
        .unwrap_or_default();
    vec![
        callback(subject, call, &with, &called_back),
        secrets(subject, call, &with).await,
    ]
}

fn callback_row(outcome: Outcome) -> CheckResult {
    CheckResult::new("host-service callback", "§10.1", Level::Required, outcome)
}

fn secrets_row(level: Level, outcome: Outcome) -> CheckResult {
    CheckResult::new("secrets from the delivered dir", "§10.2", level, outcome)
}

fn callback(
    subject: &Subject,
    call: &UserCall,
    with: &Result<(), String>,
    called_back: &[String],
) -> CheckResult {
    const REMEDY: &str = "call the host's services on the host-services connection (go-plugin: broker id 0; tether SDKs: GrpcBroker::host_services, broker.host_services()) during the call; check --host-reply gives the answers the plugin expects";
    if subject.host_stub.is_none() {
        return callback_row(not_applicable(
            "give --host-proto FILE declaring the host's services the --call makes the plugin call",
        ));
    }
    let method = &call.method;
    let outcome = match (called_back.first(), with) {
        (Some(first), Ok(())) => pass(format!(
            "{method} called the host's {first} ({} call(s) to the host)",
            called_back.len()
        )),
        (Some(first), Err(status)) => fail(
            format!("{method} called the host's {first}, then failed: {status}"),
            REMEDY,
        ),
        (None, result) => fail(
            format!(
                "{method} made no call to the --host-proto services ({})",
                match result {
                    Ok(()) => "it succeeded".to_owned(),
                    Err(status) => format!("it failed: {status}"),
                }
            ),
            REMEDY,
        ),
    };
    callback_row(outcome)
}

async fn secrets(subject: &Subject, call: &UserCall, with: &Result<(), String>) -> CheckResult {
    if !subject.has_secrets() {
        return secrets_row(
            Level::Required,
            not_applicable(
                "give --secret NAME=FILE (with --cmd) for a secret the --call needs; else test it in-process (tether-sdk-test's TestHost::secret, the Python SDK's granted_files fixture)",
            ),
        );
    }
    let method = &call.method;
    if let Err(status) = with {
        return secrets_row(
            Level::Required,
            fail(
                format!("{method} failed with the secrets delivered: {status}"),
                "read each secret from its file in TETHER_SECRETS_DIR (§10.2), named as granted; check the --secret files and the other given flags",
            ),
        );
    }
    match launch_and_call(subject, call, false).await {
        Err(status) => secrets_row(
            Level::Required,
            pass(format!(
                "{method} succeeded with the secrets delivered and failed without them: {status}"
            )),
        ),
        // Not a protocol failure, but nothing was proven: a warning.
        Ok(()) => secrets_row(
            Level::Recommended,
            fail(
                format!("not proven: {method} succeeded without the secrets too"),
                "give --call a method that needs the secret; a plugin must read it from TETHER_SECRETS_DIR, not from anywhere else",
            ),
        ),
    }
}

/// Launches the plugin (with or without `--secret`'s secrets), makes the call, shuts the
/// plugin down; the call's failure as text (the plugin's status, which the report escapes).
async fn launch_and_call(subject: &Subject, call: &UserCall, secrets: bool) -> Result<(), String> {
    let client = subject
        .host_builder_with(secrets)?
        .start()
        .await
        .map_err(|e| format!("a tether host cannot start it: {e}"))?;
    let result = tokio::time::timeout(call.timeout, make_call(subject, call, &client))
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "{} did not answer within {:?} (--call-time)",
                call.method, call.timeout
            ))
        });
    let _ = client.shutdown().await;
    result
}

async fn make_call(
    subject: &Subject,
    call: &UserCall,
    client: &PluginClient,
) -> Result<(), String> {
    let (service, name) = split_method(&call.method).map_err(|e| e.to_string())?;
    let method = match descriptors::from_reflection(client.channel().into_inner(), service).await {
        Ok(pool) => {
            descriptors::find_method(&pool, service, name, "the plugin's server reflection")
        }
        Err(reflection) => match descriptors::from_proto_files(subject.host_protos(), &[]) {
            Ok(pool) if pool.get_service_by_name(service).is_some() => {
                descriptors::find_method(&pool, service, name, "the --host-proto files")
            }
            _ => Err(reflection),
        },
    }
    .map_err(|e| e.to_string())?;
    let request = parse_request(&method.input(), &call.json).map_err(|e| e.to_string())?;
    let request = tonic::Request::from_parts(subject.metadata.clone(), Default::default(), request);
    match invoke(client.channel(), &method, request, MAX_RESPONSE, |_| Ok(())).await {
        Ok(()) => Ok(()),
        Err(CliError::Call { status, .. }) => Err(format!(
            "{} ({:?}): {}",
            slash_name(&method),
            status.code(),
            status.message()
        )),
        Err(other) => Err(other.to_string()),
    }
}
