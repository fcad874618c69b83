//! Fuzzes the handshake parser with arbitrary bytes: it must never panic, and whatever it
//! accepts must encode to a line that parses back to the same value.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tether_proto::handshake::{Handshake, looks_like_handshake};

fuzz_target!(|line: &[u8]| {
    let _ = looks_like_handshake(line);
    if let Ok(handshake) = Handshake::parse(line) {
        let encoded = handshake.to_string();
        assert_eq!(
            Handshake::parse(encoded.as_bytes()).as_ref(),
            Ok(&handshake),
            "{encoded:?} does not parse back"
        );
    }
});
