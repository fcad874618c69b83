//! What `tether inspect` says of each service, like `grpcurl describe`: its methods with their
//! request and response message types and fields, and whether the plugin really serves it.
//!
//! Reflection lists every service of the files a plugin registered, which can be more than it
//! serves: an agent plugin's `agent.proto` declares `tether.agent.v1.Host` (the host's side)
//! next to `Executor`. [`probe`] asks the plugin without running any of its code: it calls one
//! method with bytes that are no protobuf message, which a server that routes the service
//! rejects while decoding, before any handler runs (`Internal`/`InvalidArgument`), and one
//! that does not answers `Unimplemented`.

use std::time::Duration;

use prost_reflect::{
    FieldDescriptor, Kind, MessageDescriptor, MethodDescriptor, ServiceDescriptor,
};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

/// How long [`probe`] waits for a plugin's answer. Decoding fails at once in any server; this
/// only bounds a plugin that hangs.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Services of the plugin protocol itself (health, reflection, go-plugin's broker, controller
/// and stdio), listed but not described or probed: their contracts are go-plugin's.
const PROTOCOL_SERVICE_PREFIXES: &[&str] = &["grpc.health.v1.", "grpc.reflection.", "plugin."];

/// A request no protobuf parser accepts: field number 0 with the reserved wire type 7.
const UNDECODABLE_REQUEST: &[u8] = &[0x07];

/// Whether `service` is part of the plugin protocol (see [`PROTOCOL_SERVICE_PREFIXES`]).
pub(crate) fn is_protocol_service(service: &str) -> bool {
    PROTOCOL_SERVICE_PREFIXES
        .iter()
        .any(|prefix| service.starts_with(prefix))
}

/// What a [`probe`] learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Served {
    /// The plugin routes the service.
    Yes,
    /// The plugin answered `Unimplemented`: reflection lists the service, nothing serves it.
    Unimplemented,
    /// Not asked: every method streams requests, so a handler would run before decoding.
    NotProbed,
}

/// Asks whether the plugin serves `service` (see the module docs), through a unary or
/// server-streaming method.
pub(crate) async fn probe(channel: Channel, service: &ServiceDescriptor) -> Served {
    let Some(method) = service.methods().find(|m| !m.is_client_streaming()) else {
        return Served::NotProbed;
    };
    let name = format!("/{}/{}", service.full_name(), method.name());
    let Ok(path) = PathAndQuery::try_from(name) else {
        return Served::NotProbed;
    };
    let mut grpc = tonic::client::Grpc::new(channel);
    if grpc.ready().await.is_err() {
        return Served::NotProbed;
    }
    let mut request = tonic::Request::new(UNDECODABLE_REQUEST.to_vec());
    request.set_timeout(PROBE_TIMEOUT);
    let status = if method.is_server_streaming() {
        grpc.server_streaming(request, path, RawCodec).await.err()
    } else {
        grpc.unary(request, path, RawCodec).await.err()
    };
    match status {
        Some(s) if s.code() == tonic::Code::Unimplemented => Served::Unimplemented,
        _ => Served::Yes,
    }
}

/// `service NAME`, then per method `rpc M(REQ) returns (RESP)` and the fields of each message
/// type it uses (once per service).
pub(crate) fn service_text(service: &ServiceDescriptor, served: Served) -> String {
    let mark = match served {
        Served::Yes => "",
        Served::Unimplemented => " (listed by reflection, but answers Unimplemented)",
        Served::NotProbed => " (not probed: its methods stream requests)",
    };
    let mut out = format!("service {}{mark}", service.full_name());
    let mut shown: Vec<String> = Vec::new();
    for method in service.methods() {
        out.push_str(&format!("\n  {}", rpc_line(&method)));
        for message in [method.input(), method.output()] {
            if !shown.contains(&message.full_name().to_owned()) {
                shown.push(message.full_name().to_owned());
                out.push_str(&format!("\n    {}", message_line(&message)));
            }
        }
    }
    out
}

/// `rpc Get(proto.GetRequest) returns (stream proto.GetResponse)`.
fn rpc_line(method: &MethodDescriptor) -> String {
    let stream = |yes: bool| if yes { "stream " } else { "" };
    format!(
        "rpc {}({}{}) returns ({}{})",
        method.name(),
        stream(method.is_client_streaming()),
        method.input().full_name(),
        stream(method.is_server_streaming()),
        method.output().full_name()
    )
}

/// `proto.GetRequest { string key = 1; }`.
fn message_line(message: &MessageDescriptor) -> String {
    let fields: Vec<String> = message
        .fields()
        .map(|f| format!("{} {} = {};", field_type(&f), f.name(), f.number()))
        .collect();
    if fields.is_empty() {
        format!("{} {{}}", message.full_name())
    } else {
        format!("{} {{ {} }}", message.full_name(), fields.join(" "))
    }
}

/// A field's type as a `.proto` file spells it: `repeated string`, `map<string, int64>`,
/// `optional bytes`, `tether.agent.v1.Phase`.
fn field_type(field: &FieldDescriptor) -> String {
    if field.is_map()
        && let Kind::Message(entry) = field.kind()
    {
        return format!(
            "map<{}, {}>",
            kind_name(&entry.map_entry_key_field().kind()),
            kind_name(&entry.map_entry_value_field().kind())
        );
    }
    let kind = kind_name(&field.kind());
    if field.is_list() {
        format!("repeated {kind}")
    } else if field.field_descriptor_proto().proto3_optional() {
        format!("optional {kind}")
    } else {
        kind
    }
}

fn kind_name(kind: &Kind) -> String {
    let scalar = match kind {
        Kind::Message(m) => return m.full_name().to_owned(),
        Kind::Enum(e) => return e.full_name().to_owned(),
        Kind::Double => "double",
        Kind::Float => "float",
        Kind::Int32 => "int32",
        Kind::Int64 => "int64",
        Kind::Uint32 => "uint32",
        Kind::Uint64 => "uint64",
        Kind::Sint32 => "sint32",
        Kind::Sint64 => "sint64",
        Kind::Fixed32 => "fixed32",
        Kind::Fixed64 => "fixed64",
        Kind::Sfixed32 => "sfixed32",
        Kind::Sfixed64 => "sfixed64",
        Kind::Bool => "bool",
        Kind::String => "string",
        Kind::Bytes => "bytes",
    };
    scalar.to_owned()
}

/// Sends bytes as they are; the answer's bytes are ignored (only the status matters).
#[derive(Debug, Clone, Copy)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = ();
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        Self
    }

    fn decoder(&mut self) -> Self::Decoder {
        Self
    }
}

impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Self::Error> {
        prost::bytes::BufMut::put_slice(dst, &item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = ();
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Self::Error> {
        prost::bytes::Buf::advance(src, prost::bytes::Buf::remaining(src));
        Ok(Some(()))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn a_service_is_described_with_its_methods_and_message_fields() {
        let kv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/proto/kv.proto");
        let pool = crate::descriptors::from_proto_files(&[kv], &[]).unwrap();
        let service = pool.get_service_by_name("proto.KV").unwrap();
        let text = service_text(&service, Served::Yes);
        assert_eq!(
            text,
            "service proto.KV\n  rpc Get(proto.GetRequest) returns (proto.GetResponse)\n    proto.GetRequest { string key = 1; }\n    proto.GetResponse { bytes value = 1; }\n  rpc Put(proto.PutRequest) returns (proto.Empty)\n    proto.PutRequest { string key = 1; bytes value = 2; }\n    proto.Empty {}"
        );
        assert!(
            service_text(&service, Served::Unimplemented).starts_with(
                "service proto.KV (listed by reflection, but answers Unimplemented)\n"
            )
        );
    }

    #[test]
    fn protocol_services_are_told_apart_from_the_plugins_own() {
        for protocol in [
            "grpc.health.v1.Health",
            "grpc.reflection.v1alpha.ServerReflection",
            "plugin.GRPCController",
        ] {
            assert!(is_protocol_service(protocol), "{protocol}");
        }
        assert!(!is_protocol_service("proto.KV"));
        assert!(!is_protocol_service("tether.agent.v1.Executor"));
    }
}
