//! A tonic codec for messages known only at run time (from `--proto` files or reflection):
//! `call` encodes its request and decodes responses with it, the host-service stub decodes
//! the plugin's requests and encodes its replies.

use prost_reflect::{DynamicMessage, MessageDescriptor, ReflectMessage as _};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// Encodes any [`DynamicMessage`]; decodes messages of type `decode_as`.
#[derive(Debug, Clone)]
pub(crate) struct DynamicCodec {
    /// The type of the messages this side receives.
    pub(crate) decode_as: MessageDescriptor,
}

impl Codec for DynamicCodec {
    type Encode = DynamicMessage;
    type Decode = DynamicMessage;
    type Encoder = DynamicEncoder;
    type Decoder = DynamicDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        DynamicEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        DynamicDecoder(self.decode_as.clone())
    }
}

#[derive(Debug)]
pub(crate) struct DynamicEncoder;

impl Encoder for DynamicEncoder {
    type Item = DynamicMessage;
    type Error = tonic::Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Self::Error> {
        prost::Message::encode(&item, dst).map_err(|e| {
            tonic::Status::internal(format!("encoding {}: {e}", item.descriptor().full_name()))
        })
    }
}

#[derive(Debug)]
pub(crate) struct DynamicDecoder(MessageDescriptor);

impl Decoder for DynamicDecoder {
    type Item = DynamicMessage;
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Self::Error> {
        DynamicMessage::decode(self.0.clone(), src)
            .map(Some)
            .map_err(|e| tonic::Status::internal(format!("decoding {}: {e}", self.0.full_name())))
    }
}
