//! `tether call`: one method, JSON in, JSON out.

use std::time::Duration;

use prost_reflect::{DynamicMessage, MethodDescriptor};
use tether_broker::PluginClient;
use tether_broker::telemetry::TracedChannel;
use tonic::codegen::http::uri::PathAndQuery;

use crate::args::CallArgs;
use crate::descriptors::{self, split_method};
use crate::dynamic_codec::DynamicCodec;
use crate::error::CliError;
use crate::given;
use crate::json_messages::{parse_request, to_json};
use crate::limits::ByteCount;
use crate::output;
use crate::target;

/// Launches the plugin, calls the method, prints the response(s), shuts the plugin down.
pub(crate) async fn run(args: CallArgs) -> Result<(), CliError> {
    // Flags that do not fit together are reported before the arguments they displaced.
    args.target.which.choice()?;
    let (service, method_name) = split_method(&args.method)?;
    // Compile --proto files before launching anything: bad input costs no process.
    let from_files = if args.protos.is_empty() {
        None
    } else {
        Some(descriptors::from_proto_files(
            &args.protos,
            &args.import_paths,
        )?)
    };
    let metadata = given::metadata(&args.headers)?;
    let plugin = target::launch(&args.target).await?;
    let result = async {
        let (pool, origin) = match from_files {
            Some(pool) => (pool, "the --proto files"),
            None => (
                descriptors::from_reflection(plugin.channel().into_inner(), service).await?,
                "the plugin's server reflection",
            ),
        };
        let method = descriptors::find_method(&pool, service, method_name, origin)?;
        let request = parse_request(&method.input(), &args.request)?;
        let mut printer = Printer::new(&method, args.max_bytes);
        let request = tonic::Request::from_parts(metadata, Default::default(), request);
        let max_message = usize::try_from(args.max_message_size.0).unwrap_or(usize::MAX);
        let call = invoke(
            plugin.channel(),
            &method,
            request,
            max_message,
            |response| printer.print(response),
        );
        match tokio::time::timeout(args.max_time.into(), call).await {
            Ok(called) => called,
            Err(_elapsed) => Err(CliError::CallTimeout {
                method: slash_name(&method),
                max_time: args.max_time,
                responses: printer.responses,
            }),
        }
    }
    .await;
    let result = match result {
        Err(CliError::Call { method, status }) => match crashed(&plugin, method, status).await {
            // It stopped as asked, before its answer arrived: go-plugin's answer is empty.
            CliError::Crashed { method, exit, .. } if method == STOP_METHOD && exit.success() => {
                output::json_line("{}")
            }
            other => Err(other),
        },
        other => other,
    };
    let shutdown = plugin.shutdown().await;
    result?;
    shutdown.map(drop).map_err(CliError::Shutdown)
}

/// go-plugin's method that asks a plugin to stop: a plugin that exits cleanly during it did
/// what was asked (success, `{}`), not "exited during the call".
const STOP_METHOD: &str = "plugin.GRPCController/Shutdown";

/// Prints each response as one JSON line as it arrives, within `--max-bytes`.
struct Printer {
    method: String,
    max_bytes: ByteCount,
    /// Bytes printed so far, newlines included.
    printed: u64,
    /// Responses printed so far.
    responses: u64,
}

impl Printer {
    fn new(method: &MethodDescriptor, max_bytes: ByteCount) -> Self {
        Self {
            method: slash_name(method),
            max_bytes,
            printed: 0,
            responses: 0,
        }
    }

    /// Prints `response`, or refuses it with [`CliError::OutputLimit`] when its line would
    /// pass the limit.
    fn print(&mut self, response: &DynamicMessage) -> Result<(), CliError> {
        let line = to_json(response)?;
        let printed = self.printed.saturating_add(line.len() as u64 + 1);
        if printed > self.max_bytes.0 {
            return Err(CliError::OutputLimit {
                method: self.method.clone(),
                max_bytes: self.max_bytes,
                responses: self.responses,
            });
        }
        output::json_line(&line)?;
        self.printed = printed;
        self.responses += 1;
        Ok(())
    }
}

/// How long `call` waits, after a call failed the way a dying plugin's calls fail
/// (`Unavailable`, `Unknown`, `Cancelled`), for the plugin process to be seen exiting, and then
/// for the rest of its stderr.
pub(crate) const CRASH_NOTICE_TIMEOUT: Duration = Duration::from_secs(1);

/// The error for a call that failed with `status`: [`CliError::Crashed`] when the plugin has
/// exited (it ended badly: exit 3, with its name, exit status and stderr tail), else the
/// plugin's answer ([`CliError::Call`]).
async fn crashed(plugin: &PluginClient, method: String, status: Box<tonic::Status>) -> CliError {
    let transport = matches!(
        status.code(),
        tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
    );
    let exit = match plugin.exit_status() {
        Some(exit) => Some(exit),
        None if transport => tokio::time::timeout(CRASH_NOTICE_TIMEOUT, plugin.exited())
            .await
            .ok(),
        None => None,
    };
    match exit {
        Some(exit) => CliError::Crashed {
            plugin: plugin.name().to_owned(),
            method,
            exit,
            stderr_tail: plugin.final_stderr_tail(CRASH_NOTICE_TIMEOUT).await,
            status,
        },
        None => CliError::Call { method, status },
    }
}

/// Calls a unary or server-streaming method, decoding responses of up to `max_message`
/// bytes; hands each response to `each` as it arrives (none is kept), and stops the call at
/// the first error `each` returns.
pub(crate) async fn invoke(
    channel: TracedChannel,
    method: &MethodDescriptor,
    request: tonic::Request<DynamicMessage>,
    max_message: usize,
    mut each: impl FnMut(&DynamicMessage) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let name = slash_name(method);
    if method.is_client_streaming() {
        return Err(CliError::ClientStreaming(name));
    }
    let call_err = |status: tonic::Status| {
        if status.code() == tonic::Code::OutOfRange
            && status
                .message()
                .contains("decoded message length too large")
        {
            return CliError::MessageTooLarge {
                method: name.clone(),
                limit: ByteCount(u64::try_from(max_message).unwrap_or(u64::MAX)),
            };
        }
        CliError::Call {
            method: name.clone(),
            status: Box::new(status),
        }
    };
    let path = PathAndQuery::try_from(format!("/{name}"))
        .map_err(|e| call_err(tonic::Status::internal(format!("bad method path: {e}"))))?;
    let codec = DynamicCodec {
        decode_as: method.output(),
    };
    let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(max_message);
    grpc.ready()
        .await
        .map_err(|e| call_err(tonic::Status::unavailable(e.to_string())))?;
    if method.is_server_streaming() {
        let mut stream = grpc
            .server_streaming(request, path, codec)
            .await
            .map_err(call_err)?
            .into_inner();
        // Dropping the stream on an error cancels the call (RST_STREAM).
        while let Some(message) = stream.message().await.map_err(call_err)? {
            each(&message)?;
        }
        Ok(())
    } else {
        let response = grpc.unary(request, path, codec).await.map_err(call_err)?;
        each(&response.into_inner())
    }
}

/// `SERVICE/METHOD`, as the command line names a method.
pub(crate) fn slash_name(method: &MethodDescriptor) -> String {
    format!("{}/{}", method.parent_service().full_name(), method.name())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn kv_method(name: &str) -> MethodDescriptor {
        let kv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/proto/kv.proto");
        let pool = descriptors::from_proto_files(&[kv], &[]).unwrap();
        descriptors::find_method(&pool, "proto.KV", name, "--proto").unwrap()
    }

    #[test]
    fn byte_counts_are_read_and_written_in_binary_units() {
        for (text, bytes) in [
            ("0", 0),
            ("1000", 1000),
            ("3KiB", 3 << 10),
            ("64MiB", 64 << 20),
            (" 2 GiB ", 2 << 30),
        ] {
            assert_eq!(
                text.parse::<ByteCount>().unwrap(),
                ByteCount(bytes),
                "{text}"
            );
        }
        for bad in ["", "MiB", "-1", "1.5GiB", "99999999999GiB", "12MB"] {
            assert!(bad.parse::<ByteCount>().is_err(), "{bad}");
        }
        assert_eq!(crate::limits::DEFAULT_MAX_OUTPUT.to_string(), "256MiB");
        assert_eq!(ByteCount(1000).to_string(), "1000");
        assert_eq!(ByteCount(3 << 10).to_string(), "3KiB");
    }

    #[test]
    fn methods_are_service_slash_method() {
        assert_eq!(split_method("proto.KV/Get").unwrap(), ("proto.KV", "Get"));
        assert_eq!(split_method("/proto.KV/Get").unwrap(), ("proto.KV", "Get"));
        for bad in ["proto.KV", "proto.KV/", "/Get", ""] {
            assert!(
                matches!(split_method(bad), Err(CliError::BadMethodSyntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn requests_use_canonical_json_and_round_trip() {
        let put = kv_method("Put");
        let msg = parse_request(&put.input(), r#"{"key":"x","value":"eQ=="}"#).unwrap();
        assert_eq!(to_json(&msg).unwrap(), r#"{"key":"x","value":"eQ=="}"#);
        let empty = parse_request(&put.output(), "{}").unwrap();
        assert_eq!(to_json(&empty).unwrap(), "{}");
    }

    #[test]
    fn json_that_does_not_fit_the_message_is_a_clear_error() {
        let get = kv_method("Get");
        for bad in [
            r#"{"nope":1}"#,
            r#"{"key":5}"#,
            "{",
            r#"{"key":"a"} trailing"#,
        ] {
            let err = parse_request(&get.input(), bad).unwrap_err();
            assert!(
                err.to_string()
                    .contains("does not fit message proto.GetRequest"),
                "{bad}: {err}"
            );
        }
    }
}
