//! The examples' protocols compiled the way a plugin author compiles theirs (the Rust plugin
//! guide, `docs/plugin-rust.md`): `tether-build` turns each `.proto` into tonic code and a
//! reflection descriptor set in `OUT_DIR`, with protox — no system `protoc`, no generated
//! code in the repository. `kv.proto` and `counter.proto` are both go-plugin's `package
//! proto`, so each protocol gets a directory of its own (`OUT_DIR/kv/proto.rs`, …).

use std::path::PathBuf;

/// The protocols in `proto/`, each compiled into `OUT_DIR/<name>/`.
const PROTOCOLS: [&str; 3] = ["kv", "counter", "streams"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);
    for name in PROTOCOLS {
        let dir = out.join(name);
        std::fs::create_dir_all(&dir)?;
        tether_build::compile_protos_into(&[format!("proto/{name}.proto")], &["proto"], &dir)?;
    }
    Ok(())
}
