//! KV plugin: go-plugin's `examples/grpc` plugin, written with `tether-sdk`.
//!
//! Serves `proto.KV` (handshake app version 1, cookie `BASIC_PLUGIN=hello`) and keeps each
//! value in a file `kv_<key>` in its working directory. Messages up to
//! [`tether_examples::MAX_MESSAGE_SIZE`] (values up to 64 MiB) are accepted, not tonic's
//! default 4 MiB. `Get` of a missing key fails with
//! `NotFound`; keys that could name another file (`/`, `\`, NUL, `.`, `..`, empty) fail with
//! `InvalidArgument`.
//!
//! Any go-plugin KV host can run it, e.g. the `kv-host` example or go-plugin's own:
//!
//! ```text
//! cargo build -p tether-examples --bin kv-plugin
//! KV_PLUGIN=target/debug/kv-plugin kvhost put hello world
//! KV_PLUGIN=target/debug/kv-plugin kvhost get hello    # prints "world"
//! ```
//!
//! Run by hand it only explains that it is a plugin; to see its handshake line:
//! `BASIC_PLUGIN=hello PLUGIN_PROTOCOL_VERSIONS=1 target/debug/kv-plugin`.

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

use tether_examples::kv::kv_server::{Kv, KvServer};
use tether_examples::kv::{Empty, GetRequest, GetResponse, PutRequest};
use tonic::{Request, Response, Status};

fn main() -> ExitCode {
    // Up to 64 MiB values: reuse heap pages rather than fault in fresh ones per buffer.
    tether_examples::keep_large_allocations();
    tether_sdk::Plugin::new(tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").app_version(1))
        .add_service(
            KvServer::new(FileKv)
                .max_decoding_message_size(tether_examples::MAX_MESSAGE_SIZE)
                .max_encoding_message_size(tether_examples::MAX_MESSAGE_SIZE),
        )
        // Lets `tether call` and grpcurl call it without kv.proto.
        .file_descriptor_set(tether_examples::kv::FILE_DESCRIPTOR_SET)
        .run()
}

/// Stores each value in `kv_<key>` in the working directory.
struct FileKv;

/// Values up to this size are read and written on the plugin's runtime thread; larger ones on
/// tokio's blocking pool.
///
/// A small file in the page cache takes microseconds to read or write, while a trip through the
/// blocking pool (`tokio::fs`) costs two thread switches per call: profiling `kv-host measure
/// unary` showed a third of the plugin's CPU time in the pool's thread hand-offs, and inline IO
/// cut the 64-byte `Get` round trip by about 20 µs (bench/BENCHMARKS.md, "Decisions"). Large values
/// still go to the pool so that one big write does not stall other calls for milliseconds.
const INLINE_IO_MAX: u64 = 64 * 1024;

/// Reads `path`, inline when it is small (see [`INLINE_IO_MAX`]).
async fn read(path: PathBuf) -> io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(&path)?;
    if file.metadata()?.len() <= INLINE_IO_MAX {
        let mut value = Vec::new();
        io::Read::read_to_end(&mut file, &mut value)?;
        return Ok(value);
    }
    tokio::task::spawn_blocking(move || {
        let mut value = Vec::new();
        io::Read::read_to_end(&mut file, &mut value).map(|_| value)
    })
    .await
    .map_err(io::Error::other)?
}

/// Writes `value` to `path`, inline when it is small (see [`INLINE_IO_MAX`]).
async fn write(path: PathBuf, value: Vec<u8>) -> io::Result<()> {
    if value.len() as u64 <= INLINE_IO_MAX {
        return overwrite(&path, &value);
    }
    tokio::task::spawn_blocking(move || overwrite(&path, &value))
        .await
        .map_err(io::Error::other)?
}

/// Replaces the contents of `path` with `value`, writing over the old contents and then cutting
/// the file to length instead of truncating it first.
///
/// On tmpfs and in the page cache a truncate frees the file's pages and the write then
/// allocates and zeroes fresh ones: the profile of a 64 MiB `Put` showed `clear_page_erms` at
/// 12 % of all CPU (bench/BENCHMARKS.md, "Decisions"). Like `std::fs::write`, a crash in the middle
/// leaves a partly written value.
fn overwrite(path: &std::path::Path, value: &[u8]) -> io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    io::Write::write_all(&mut file, value)?;
    file.set_len(value.len() as u64)
}

#[tonic::async_trait]
impl Kv for FileKv {
    async fn get(&self, request: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        let key = request.into_inner().key;
        let path = tether_examples::key_path(&key)?;
        match read(path.clone()).await {
            Ok(value) => Ok(Response::new(GetResponse { value })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Err(Status::not_found(format!("no value for key {key:?}")))
            }
            Err(e) => Err(Status::internal(format!("reading {}: {e}", path.display()))),
        }
    }

    async fn put(&self, request: Request<PutRequest>) -> Result<Response<Empty>, Status> {
        let PutRequest { key, value } = request.into_inner();
        let path = tether_examples::key_path(&key)?;
        write(path.clone(), value)
            .await
            .map_err(|e| Status::internal(format!("writing {}: {e}", path.display())))?;
        Ok(Response::new(Empty {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_could_escape_the_working_directory_are_invalid_arguments() {
        for key in ["", ".", "..", "a/b", "/etc/passwd", "../x", "a\\b", "a\0b"] {
            let status = tether_examples::key_path(key).unwrap_err();
            assert_eq!(status.code(), tonic::Code::InvalidArgument, "key {key:?}");
        }
    }

    #[test]
    fn a_shorter_value_replaces_a_longer_one_completely() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kv_x");
        overwrite(&path, b"a long first value").unwrap();
        overwrite(&path, b"short").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"short");
        overwrite(&path, b"longer than short").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"longer than short");
    }

    #[test]
    fn ordinary_keys_map_to_kv_files() {
        assert_eq!(
            tether_examples::key_path("hello").unwrap(),
            PathBuf::from("kv_hello")
        );
        assert_eq!(
            tether_examples::key_path("a.b..c").unwrap(),
            PathBuf::from("kv_a.b..c")
        );
    }
}
