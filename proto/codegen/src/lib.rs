//! Regenerates tether's checked-in protobuf code.
//!
//! Every `.proto` file of the published crates (and `tether-agent`'s, which the CLI shares) is
//! compiled in-process with [`protox`] (no system `protoc`), turned into Rust with
//! `tonic-prost-build`, and written next to the crate that owns it. (The examples compile
//! theirs in `examples/build.rs` with `tether-build`, as a plugin author does.) Run it after
//! changing a `.proto` file:
//!
//! ```text
//! cargo run -p tether-codegen
//! ```
//!
//! The crate's test regenerates everything into a temporary directory and fails when the
//! checked-in files differ, so stale generated code cannot land.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// One generated file: which `.proto` files go in, and where the Rust code lands.
#[derive(Debug, Clone)]
pub struct Job {
    /// `.proto` files, relative to the workspace root.
    pub protos: &'static [&'static str],
    /// Include directories, relative to the workspace root.
    pub includes: &'static [&'static str],
    /// The protobuf package compiled (prost names its output `<package>.rs`).
    pub package: &'static str,
    /// Where the generated file is checked in, relative to the workspace root.
    pub output: &'static str,
    /// Where the encoded `FileDescriptorSet` (the files and their imports, without source
    /// info) is checked in, for gRPC server reflection.
    pub descriptor: &'static str,
}

/// Everything the workspace generates.
pub const JOBS: &[Job] = &[
    Job {
        protos: &[
            "proto/proto/plugin/grpc_broker.proto",
            "proto/proto/plugin/grpc_controller.proto",
            "proto/proto/plugin/grpc_stdio.proto",
        ],
        includes: &["proto/proto"],
        package: "plugin",
        output: "proto/src/generated/plugin.rs",
        descriptor: "proto/src/generated/plugin.bin",
    },
    Job {
        protos: &["proto/proto/tether/plugins/v1/plugins.proto"],
        includes: &["proto/proto"],
        package: "tether.plugins.v1",
        output: "proto/src/generated/tether.plugins.v1.rs",
        descriptor: "proto/src/generated/plugins.bin",
    },
    // `tether conformance`'s callback check speaks go-plugin's counter contract; the CLI has its
    // own copy so that it packages without the (unpublished) examples crate.
    Job {
        protos: &["examples/proto/counter.proto"],
        includes: &["examples/proto"],
        package: "proto",
        output: "cli/src/conformance/generated/counter.rs",
        descriptor: "cli/src/conformance/generated/counter.bin",
    },
    Job {
        protos: &["examples/proto/agent.proto"],
        includes: &["examples/proto"],
        package: "tether.agent.v1",
        output: "agent/src/generated/tether.agent.v1.rs",
        descriptor: "agent/src/generated/agent.bin",
    },
];

/// The workspace root (two levels above this crate's manifest).
#[must_use]
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Errors while generating code.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A `.proto` file failed to parse or type-check.
    Compile(String),
    /// Reading or writing a file failed.
    Io(PathBuf, io::Error),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Compile(msg) => write!(f, "compiling .proto files failed: {msg}"),
            Self::Io(path, err) => write!(f, "{}: {err}", path.display()),
        }
    }
}

impl std::error::Error for Error {}

/// What one job generates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// The Rust code.
    pub code: String,
    /// The encoded `FileDescriptorSet`.
    pub descriptor: Vec<u8>,
}

/// Generates the Rust code and the descriptor set of `job`.
///
/// # Errors
/// When a `.proto` file does not compile or a temporary file cannot be written or read.
pub fn generate(root: &Path, job: &Job) -> Result<Generated, Error> {
    let protos: Vec<PathBuf> = job.protos.iter().map(|p| root.join(p)).collect();
    let includes: Vec<PathBuf> = job.includes.iter().map(|p| root.join(p)).collect();
    let compile_err = |e: protox::Error| Error::Compile(format!("{e:?}"));
    let mut compiler = protox::Compiler::new(&includes).map_err(compile_err)?;
    compiler.include_imports(true).include_source_info(true);
    compiler.open_files(&protos).map_err(compile_err)?;
    let fds = compiler.file_descriptor_set();

    let mut for_reflection = fds.clone();
    for file in &mut for_reflection.file {
        file.source_code_info = None;
    }
    let descriptor = prost::Message::encode_to_vec(&for_reflection);

    let tmp = tempfile::tempdir().map_err(|e| Error::Io(std::env::temp_dir(), e))?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .out_dir(tmp.path())
        .compile_fds(fds)
        .map_err(|e| Error::Io(tmp.path().to_path_buf(), e))?;
    let produced = tmp.path().join(format!("{}.rs", job.package));
    let code = fs::read_to_string(&produced).map_err(|e| Error::Io(produced, e))?;
    Ok(Generated {
        code: format!(
            "// @generated by tether-codegen from {}. Do not edit: run `cargo run -p tether-codegen`.\n\n{code}",
            job.protos.join(", ")
        ),
        descriptor,
    })
}
