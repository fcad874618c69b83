//! The KV example's calls through a supervisor's [`Lease`], and waiting for what a supervisor
//! does in the background.

use std::time::{Duration, Instant};

use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};
use tether_host::{Lease, UseError};

/// How often [`eventually`] looks again.
const POLL: Duration = Duration::from_millis(20);

/// `Get` of `key` through `lease`.
pub async fn get(lease: &Lease, key: &str) -> Result<Vec<u8>, UseError> {
    let key = key.to_owned();
    lease
        .call(|ch| async move { KvClient::new(ch).get(GetRequest { key }).await })
        .await
        .map(|r| r.value)
}

/// `Put` of `key` = `value` through `lease`.
pub async fn put(lease: &Lease, key: &str, value: &[u8]) -> Result<(), UseError> {
    let (key, value) = (key.to_owned(), value.to_vec());
    lease
        .call(|ch| async move { KvClient::new(ch).put(PutRequest { key, value }).await })
        .await
        .map(|_| ())
}

/// Polls `condition` until it holds, failing after `deadline`: for what a supervisor does in
/// the background (idle stops, restarts), which nothing outside it can wait for.
pub async fn eventually(what: &str, deadline: Duration, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(POLL).await;
    }
}
