//! Where message types come from: `--proto` files compiled in-process by protox, or the
//! plugin's gRPC server reflection (v1, falling back to v1alpha, which older grpc-go serves).

use std::collections::HashSet;
use std::path::PathBuf;

use prost::Message as _;
use prost_reflect::{DescriptorPool, MethodDescriptor, ServiceDescriptor};
use tonic::transport::Channel;

use crate::error::CliError;

/// Boxed error used for reflection failures.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Splits `pkg.Service/Method` at the last `/`.
pub(crate) fn split_method(arg: &str) -> Result<(&str, &str), CliError> {
    match arg.trim_start_matches('/').rsplit_once('/') {
        Some((service, method)) if !service.is_empty() && !method.is_empty() => {
            Ok((service, method))
        }
        _ => Err(CliError::BadMethodSyntax(arg.to_owned())),
    }
}

/// Compiles `files` (each file's directory is an import path too).
pub(crate) fn from_proto_files(
    files: &[PathBuf],
    imports: &[PathBuf],
) -> Result<DescriptorPool, CliError> {
    let proto_err = |e: protox::Error| CliError::Proto {
        files: files.to_vec(),
        source: Box::new(e),
    };
    let mut includes: Vec<PathBuf> = imports.to_vec();
    for file in files {
        let dir = file
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), PathBuf::from);
        if !includes.contains(&dir) {
            includes.push(dir);
        }
    }
    let mut compiler = protox::Compiler::new(includes).map_err(proto_err)?;
    compiler.include_imports(true);
    compiler.open_files(files).map_err(proto_err)?;
    Ok(compiler.descriptor_pool())
}

/// Generates a reflection client for one version of the reflection protocol (the v1 and
/// v1alpha messages are identical but distinct types).
macro_rules! reflection_version {
    ($name:ident, $pb:path) => {
        mod $name {
            use pb::server_reflection_client::ServerReflectionClient;
            use pb::server_reflection_request::MessageRequest;
            use pb::server_reflection_response::MessageResponse;
            use $pb as pb;

            use super::BoxError;

            async fn ask(
                channel: tonic::transport::Channel,
                request: MessageRequest,
            ) -> Result<MessageResponse, tonic::Status> {
                let request = pb::ServerReflectionRequest {
                    host: String::new(),
                    message_request: Some(request),
                };
                let mut stream = ServerReflectionClient::new(channel)
                    .server_reflection_info(tokio_stream::once(request))
                    .await?
                    .into_inner();
                stream
                    .message()
                    .await?
                    .and_then(|r| r.message_response)
                    .ok_or_else(|| tonic::Status::data_loss("the reflection stream ended empty"))
            }

            pub(super) async fn file_containing(
                channel: tonic::transport::Channel,
                symbol: &str,
            ) -> Result<Result<Vec<Vec<u8>>, BoxError>, tonic::Status> {
                Ok(
                    match ask(channel, MessageRequest::FileContainingSymbol(symbol.into())).await? {
                        MessageResponse::FileDescriptorResponse(r) => Ok(r.file_descriptor_proto),
                        MessageResponse::ErrorResponse(e) => Err(e.error_message.into()),
                        other => Err(format!("unexpected reflection answer {other:?}").into()),
                    },
                )
            }

            pub(super) async fn services(
                channel: tonic::transport::Channel,
            ) -> Result<Result<Vec<String>, BoxError>, tonic::Status> {
                Ok(
                    match ask(channel, MessageRequest::ListServices(String::new())).await? {
                        MessageResponse::ListServicesResponse(r) => {
                            Ok(r.service.into_iter().map(|s| s.name).collect())
                        }
                        MessageResponse::ErrorResponse(e) => Err(e.error_message.into()),
                        other => Err(format!("unexpected reflection answer {other:?}").into()),
                    },
                )
            }
        }
    };
}

reflection_version!(v1, tonic_reflection::pb::v1);
reflection_version!(v1alpha, tonic_reflection::pb::v1alpha);

/// Runs a reflection query with v1, and with v1alpha when the plugin does not serve v1.
macro_rules! with_fallback {
    ($call:ident, $channel:expr $(, $arg:expr)*) => {{
        match v1::$call($channel.clone() $(, $arg)*).await {
            Err(status) if status.code() == tonic::Code::Unimplemented => {
                match v1alpha::$call($channel $(, $arg)*).await {
                    Ok(answer) => answer,
                    Err(status) => Err(status_error(&status)),
                }
            }
            Ok(answer) => answer,
            Err(status) => Err(status_error(&status)),
        }
    }};
}

/// A gRPC status as a one-line error (tonic's `Display` is verbose).
fn status_error(status: &tonic::Status) -> BoxError {
    if status.code() == tonic::Code::Unimplemented {
        return "the plugin does not serve gRPC server reflection".into();
    }
    format!("{:?}: {}", status.code(), status.message()).into()
}

/// Asks the plugin for the file declaring `service` and its dependencies.
pub(crate) async fn from_reflection(
    channel: Channel,
    service: &str,
) -> Result<DescriptorPool, CliError> {
    let reflection_err = |source: BoxError| CliError::Reflection {
        service: service.to_owned(),
        source,
    };
    let files = match with_fallback!(file_containing, channel.clone(), service) {
        Ok(files) => files,
        Err(source) => {
            // A service the plugin's reflection does not list is most often a typo: name the
            // ones it has.
            return Err(match list_services(channel).await {
                Ok(mut known) if !known.iter().any(|s| s == service) => {
                    known.sort();
                    CliError::NotReflected {
                        service: service.to_owned(),
                        known: join(known.into_iter()),
                    }
                }
                _ => reflection_err(source),
            });
        }
    };
    pool_from_encoded_files(&files).map_err(reflection_err)
}

/// The descriptors of `services` (one pool, shared imports once), and for each service the
/// plugin's reflection could not describe, why.
pub(crate) async fn describe_services(
    channel: Channel,
    services: &[String],
) -> Result<(DescriptorPool, Vec<(String, BoxError)>), BoxError> {
    let mut files: Vec<Vec<u8>> = Vec::new();
    let mut names: HashSet<String> = HashSet::new();
    let mut undescribed = Vec::new();
    for service in services {
        match with_fallback!(file_containing, channel.clone(), service.as_str()) {
            Ok(answer) => {
                for bytes in answer {
                    let file = prost_types::FileDescriptorProto::decode(bytes.as_slice())?;
                    if names.insert(file.name().to_owned()) {
                        files.push(bytes);
                    }
                }
            }
            Err(e) => undescribed.push((service.clone(), e)),
        }
    }
    Ok((pool_from_encoded_files(&files)?, undescribed))
}

/// The services the plugin lists through reflection.
pub(crate) async fn list_services(channel: Channel) -> Result<Vec<String>, BoxError> {
    with_fallback!(services, channel)
}

/// Builds a pool from encoded `FileDescriptorProto`s given in any order (a file is added once
/// every file it imports is in the pool).
fn pool_from_encoded_files(files: &[Vec<u8>]) -> Result<DescriptorPool, BoxError> {
    let mut pending = files
        .iter()
        .map(|bytes| prost_types::FileDescriptorProto::decode(bytes.as_slice()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut pool = DescriptorPool::new();
    let mut added: HashSet<String> = HashSet::new();
    while !pending.is_empty() {
        let before = pending.len();
        let mut index = 0;
        while index < pending.len() {
            if pending[index].dependency.iter().all(|d| added.contains(d)) {
                let file = pending.swap_remove(index);
                added.insert(file.name().to_owned());
                pool.add_file_descriptor_proto(file)?;
            } else {
                index += 1;
            }
        }
        if pending.len() == before {
            let missing: Vec<&str> = pending
                .iter()
                .flat_map(|f| f.dependency.iter())
                .filter(|d| !added.contains(*d))
                .map(String::as_str)
                .collect();
            return Err(format!("the plugin did not send the imported files {missing:?}").into());
        }
    }
    Ok(pool)
}

/// Finds `SERVICE/METHOD` in `pool`.
pub(crate) fn find_method(
    pool: &DescriptorPool,
    service: &str,
    method: &str,
    origin: &'static str,
) -> Result<MethodDescriptor, CliError> {
    let svc: ServiceDescriptor =
        pool.get_service_by_name(service)
            .ok_or_else(|| CliError::UnknownService {
                service: service.to_owned(),
                origin,
                known: join(pool.services().map(|s| s.full_name().to_owned())),
            })?;
    svc.methods()
        .find(|m| m.name() == method)
        .ok_or_else(|| CliError::UnknownMethod {
            service: service.to_owned(),
            method: method.to_owned(),
            known: join(svc.methods().map(|m| m.name().to_owned())),
        })
}

fn join(names: impl Iterator<Item = String>) -> String {
    let names: Vec<String> = names.collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv_proto() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/proto/kv.proto")
    }

    #[test]
    fn proto_files_compile_in_process_and_their_methods_are_found() {
        let pool = from_proto_files(&[kv_proto()], &[]).unwrap();
        let get = find_method(&pool, "proto.KV", "Get", "--proto").unwrap();
        assert_eq!(get.input().full_name(), "proto.GetRequest");
        assert_eq!(get.output().full_name(), "proto.GetResponse");
    }

    #[test]
    fn unknown_services_and_methods_list_what_exists() {
        let pool = from_proto_files(&[kv_proto()], &[]).unwrap();
        let err = find_method(&pool, "proto.Nope", "Get", "--proto").unwrap_err();
        assert!(
            err.to_string().contains("known services: proto.KV"),
            "{err}"
        );
        let err = find_method(&pool, "proto.KV", "Delete", "--proto").unwrap_err();
        assert!(err.to_string().contains("its methods: Get, Put"), "{err}");
    }

    #[test]
    fn encoded_files_are_added_in_dependency_order_whatever_order_they_come_in() {
        let pool = from_proto_files(
            &[PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../proto/proto/plugin/grpc_stdio.proto")],
            &[],
        )
        .unwrap();
        let mut encoded: Vec<Vec<u8>> = pool
            .files()
            .map(|f| f.file_descriptor_proto().encode_to_vec())
            .collect();
        assert!(encoded.len() >= 2, "grpc_stdio.proto imports empty.proto");
        // Dependents first: the worst order.
        encoded.reverse();
        let rebuilt = pool_from_encoded_files(&encoded).unwrap();
        assert!(rebuilt.get_service_by_name("plugin.GRPCStdio").is_some());
        assert!(pool_from_encoded_files(&encoded[..1]).is_err());
    }

    #[test]
    fn a_missing_proto_file_is_an_input_error() {
        let err = from_proto_files(&[PathBuf::from("/nonexistent/x.proto")], &[]).unwrap_err();
        assert!(matches!(err, CliError::Proto { .. }), "{err:?}");
    }
}
