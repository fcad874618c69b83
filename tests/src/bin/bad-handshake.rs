//! Misbehaving plugin: prints a bad handshake line chosen by its first argument, then hangs
//! (so the host, not the plugin, must end it):
//!
//! - `malformed`: a line that looks like a handshake but has an unknown network;
//! - `app-version`: a well-formed line announcing app protocol version 99;
//! - `core-version`: core protocol version 2;
//! - `netrpc`: go-plugin's net/rpc protocol;
//! - `no-newline`: 1 MiB of `1|1|…` without a newline;
//! - `stray-flood`: more stray lines than a host skips;
//! - `stray-then-silence`: two debug prints on stdout (the first with a terminal escape) where
//!   the handshake should be, then nothing;
//! - `binary`: non-UTF-8 garbage that starts like a handshake;
//! - `tcp`: a plaintext handshake announcing a loopback TCP address (nothing listens there);
//! - `padded-cert`: a certificate field in base64 *with* `=` padding (Go hosts cannot decode it);
//! - `seventh-field`: go-plugin's multiplexing field although the host did not offer it.

use std::io::Write as _;

use tether_tests::misbehave::{park_forever, print_line};

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    match mode.as_str() {
        "malformed" => print_line("1|1|carrier-pigeon|/coop/7|grpc|"),
        "app-version" => print_line("1|99|unix|/nonexistent/plugin.sock|grpc|"),
        "core-version" => print_line("2|1|unix|/nonexistent/plugin.sock|grpc|"),
        "netrpc" => print_line("1|1|unix|/nonexistent/plugin.sock|netrpc|"),
        "tcp" => print_line("1|1|tcp|127.0.0.1:1|grpc|"),
        "no-newline" => {
            let mut out = std::io::stdout().lock();
            let mut chunk = b"1|1|unix|".to_vec();
            chunk.resize(1024 * 1024, b'x');
            // The host may stop reading (and close the pipe) once the limit is passed.
            let _ = out.write_all(&chunk);
            let _ = out.flush();
        }
        "stray-then-silence" => {
            print_line("debug: connecting to \x1b[31mdb\x1b[0m");
            print_line("debug: still connecting");
        }
        "stray-flood" => {
            for i in 0..100_000 {
                let mut out = std::io::stdout().lock();
                if writeln!(out, "log line {i} before the handshake").is_err() {
                    break;
                }
            }
        }
        "padded-cert" => {
            // 100 bytes: base64 with `==` padding, longer than Go's 50-character minimum.
            let padded = base64_padded(&[0x30; 100]);
            print_line(&format!("1|1|unix|/nonexistent/plugin.sock|grpc|{padded}"));
        }
        "seventh-field" => print_line("1|1|unix|/nonexistent/plugin.sock|grpc||false"),
        "binary" => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(b"1|1|unix|\xff\xfe\x00garbage|grpc|\n");
            let _ = out.flush();
        }
        other => {
            eprintln!("bad-handshake: unknown mode {other:?}");
            std::process::exit(2);
        }
    }
    park_forever();
}

/// Standard base64 with padding, as a non-Go implementation might (wrongly) write it.
fn base64_padded(bytes: &[u8]) -> String {
    let mut text = tether_proto::handshake::encode_cert(bytes);
    while !text.len().is_multiple_of(4) {
        text.push('=');
    }
    text
}
