//! A `build.rs` helper for tether plugins (and hosts): compiles `.proto` files into tonic
//! client and server code plus the encoded `FileDescriptorSet` that gRPC server reflection
//! serves — with [protox](https://docs.rs/protox), a protobuf compiler written in Rust, so no
//! system `protoc` is needed.
//!
//! # Use
//!
//! `build.rs`:
//!
//! ```no_run
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     tether_build::compile_protos(&["proto/greeter.proto"], &["proto"])?;
//!     Ok(())
//! }
//! ```
//!
//! `src/main.rs` (package `greeter` in the `.proto`):
//!
//! ```ignore
//! pub mod greeter {
//!     tonic::include_proto!("greeter"); // the generated messages, `greeter_server`, `greeter_client`
//! }
//! const DESCRIPTORS: &[u8] = tonic::include_file_descriptor_set!("tether_descriptors");
//! ```
//!
//! The plugin then serves its reflection with
//! `tether_sdk::Plugin::file_descriptor_set(DESCRIPTORS)`. The crate's dependencies for the
//! generated code are `tonic` and `tonic-prost` (and `prost`).

use std::path::{Path, PathBuf};

/// The file (in `OUT_DIR`) the encoded descriptor set is written to, without `.bin`: what
/// `tonic::include_file_descriptor_set!` takes.
pub const DESCRIPTOR_SET_NAME: &str = "tether_descriptors";

/// Why the `.proto` files could not be compiled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// `OUT_DIR` is not set: not running inside a build script.
    #[error("OUT_DIR is not set; call tether_build from a build.rs")]
    NoOutDir,
    /// protox refused the files (the message names the file, line and problem).
    #[error("cannot compile the .proto files: {0:?}")]
    Compile(#[source] Box<protox::Error>),
    /// Writing the generated code or the descriptor set failed.
    #[error("cannot write to {}: {source}", path.display())]
    Io {
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Compiles `protos` (found in `includes`) into `OUT_DIR`: one `<package>.rs` per protobuf
/// package with messages, clients and servers (for `tonic::include_proto!`), and
/// [`DESCRIPTOR_SET_NAME`]`.bin` (for `tonic::include_file_descriptor_set!`). Tells cargo to
/// rerun when a `.proto` changes.
///
/// # Errors
/// [`BuildError`]: outside a build script, a `.proto` that does not compile, an unwritable
/// `OUT_DIR`.
pub fn compile_protos(
    protos: &[impl AsRef<Path>],
    includes: &[impl AsRef<Path>],
) -> Result<(), BuildError> {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").ok_or(BuildError::NoOutDir)?);
    compile_protos_into(protos, includes, &out_dir)
}

/// Like [`compile_protos`], into `out_dir` (for tools and tests).
///
/// # Errors
/// As [`compile_protos`].
pub fn compile_protos_into(
    protos: &[impl AsRef<Path>],
    includes: &[impl AsRef<Path>],
    out_dir: &Path,
) -> Result<(), BuildError> {
    for proto in protos {
        println!("cargo:rerun-if-changed={}", proto.as_ref().display());
    }
    let mut compiler =
        protox::Compiler::new(includes).map_err(|e| BuildError::Compile(Box::new(e)))?;
    compiler.include_imports(true).include_source_info(true);
    compiler
        .open_files(protos)
        .map_err(|e| BuildError::Compile(Box::new(e)))?;
    let fds = compiler.file_descriptor_set();

    // Reflection needs no comments and source positions.
    let mut for_reflection = fds.clone();
    for file in &mut for_reflection.file {
        file.source_code_info = None;
    }
    let path = out_dir.join(format!("{DESCRIPTOR_SET_NAME}.bin"));
    std::fs::write(&path, prost::Message::encode_to_vec(&for_reflection))
        .map_err(|source| BuildError::Io { path, source })?;

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .out_dir(out_dir)
        .compile_fds(fds)
        .map_err(|source| BuildError::Io {
            path: out_dir.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

    use super::*;

    #[test]
    fn a_proto_compiles_to_code_and_a_descriptor_set_without_protoc() {
        let dir = tempfile_dir();
        let proto = dir.join("greeter.proto");
        std::fs::write(
            &proto,
            "syntax = \"proto3\"; package greeter;\nmessage Hi { string name = 1; }\nservice Greeter { rpc Greet(Hi) returns (Hi); }\n",
        )
        .unwrap();
        compile_protos_into(&[&proto], &[&dir], &dir).unwrap();
        let code = std::fs::read_to_string(dir.join("greeter.rs")).unwrap();
        assert!(code.contains("pub mod greeter_server"), "{code}");
        assert!(code.contains("pub mod greeter_client"), "{code}");
        assert!(dir.join("tether_descriptors.bin").is_file());
    }

    #[test]
    fn a_broken_proto_names_the_problem() {
        let dir = tempfile_dir();
        let proto = dir.join("bad.proto");
        std::fs::write(&proto, "syntax = \"proto3\"; message {").unwrap();
        let err = compile_protos_into(&[&proto], &[&dir], &dir).unwrap_err();
        assert!(matches!(err, BuildError::Compile(_)), "{err}");
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "tether-build-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
