//! The counter plugin's service (go-plugin's `examples/bidirectional`), in the library so that
//! `examples/tests/` can unit-test its callback in-process with `tether-sdk-test`; the
//! `counter-plugin` binary serves it.
//!
//! `Put{add_server, key, value}` dials the host's `AddHelper` on broker id `add_server`, asks
//! it for `Sum(current, value)` and stores the result; `add_server` 0 (an id go-plugin never
//! hands out) means the `AddHelper` a tether host registered as a host service, reached without
//! an id; `Get{key}` returns the stored number (0 for a key never put). Each number lives in a
//! file `kv_<key>` of the counter's directory, as JSON `{"Value":N}` like go-plugin's own
//! example, so the Go and Rust plugins share their files.

use std::io;
use std::path::{Path, PathBuf};

use tether_sdk::GrpcBroker;
use tonic::{Request, Response, Status};

use crate::counter::add_helper_client::AddHelperClient;
use crate::counter::counter_server::Counter;
use crate::counter::{Empty, GetRequest, GetResponse, PutRequest, SumRequest};

/// Keeps each number in `kv_<key>` of its directory; adds through the host.
#[derive(Debug)]
pub struct FileCounter {
    broker: GrpcBroker,
    dir: PathBuf,
}

impl FileCounter {
    /// A counter that calls back through `broker` and keeps its numbers in `dir`.
    pub fn new(broker: GrpcBroker, dir: impl Into<PathBuf>) -> Self {
        Self {
            broker,
            dir: dir.into(),
        }
    }

    fn path(&self, key: &str) -> Result<PathBuf, Status> {
        Ok(self.dir.join(crate::key_path(key)?))
    }

    async fn read(&self, key: &str) -> Result<i64, Status> {
        read(&self.path(key)?).await
    }
}

/// go-plugin's example format, `{"Value":N}`.
fn encode(value: i64) -> String {
    format!("{{\"Value\":{value}}}")
}

fn decode(text: &str) -> Option<i64> {
    let inner = text.trim().strip_prefix('{')?.strip_suffix('}')?;
    let (name, number) = inner.split_once(':')?;
    (name.trim() == "\"Value\"")
        .then(|| number.trim().parse().ok())
        .flatten()
}

async fn read(path: &Path) -> Result<i64, Status> {
    match tokio::fs::read_to_string(path).await {
        Ok(text) => decode(&text).ok_or_else(|| {
            Status::data_loss(format!("{} does not hold {{\"Value\":N}}", path.display()))
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(Status::internal(format!("reading {}: {e}", path.display()))),
    }
}

#[tonic::async_trait]
impl Counter for FileCounter {
    async fn get(&self, request: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        let value = self.read(&request.into_inner().key).await?;
        Ok(Response::new(GetResponse { value }))
    }

    async fn put(&self, request: Request<PutRequest>) -> Result<Response<Empty>, Status> {
        let PutRequest {
            add_server,
            key,
            value,
        } = request.into_inner();
        let current = self.read(&key).await?;
        tracing::info!(broker = %self.broker.mode(), add_server, "reaching the host's AddHelper");
        let channel = if add_server == 0 {
            self.broker.host_services().await
        } else {
            self.broker.dial(add_server).await
        }
        .map_err(|e| Status::unavailable(format!("reaching the host's AddHelper: {e}")))?;
        let sum = AddHelperClient::new(channel)
            .sum(SumRequest {
                a: current,
                b: value,
            })
            .await?
            .into_inner()
            .r;
        let path = self.path(&key)?;
        tokio::fs::write(&path, encode(sum))
            .await
            .map_err(|e| Status::internal(format!("writing {}: {e}", path.display())))?;
        Ok(Response::new(Empty {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_through_go_plugins_file_format() {
        for n in [0, 12, -5, i64::MAX, i64::MIN] {
            assert_eq!(decode(&encode(n)), Some(n));
        }
        assert_eq!(decode("{\"Value\": 7}\n"), Some(7));
        assert_eq!(decode("{\"Other\":7}"), None);
        assert_eq!(decode("7"), None);
    }

    #[test]
    fn keys_that_could_escape_the_working_directory_are_invalid_arguments() {
        for key in ["", ".", "..", "a/b", "../x", "a\0b"] {
            assert_eq!(
                crate::key_path(key).unwrap_err().code(),
                tonic::Code::InvalidArgument
            );
        }
    }
}
