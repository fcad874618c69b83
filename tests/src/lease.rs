//! The KV example's calls through a supervisor's [`Lease`], and waiting for what a supervisor
//! does in the background.

use std::time::{Duration, Instant};

use tether_broker::error::UseErrorKind;
use tether_broker::{Lease, UseError};
use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::{GetRequest, PutRequest};

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

/// Kills `lease`'s plugin from outside (`SIGKILL` to its pid) and asserts that the next call
/// through the lease fails as a crash by that signal.
///
/// # Panics
/// If the kill fails or the call does not fail that way.
pub async fn kill_and_see_the_crash(lease: &Lease) {
    let pid = i32::try_from(lease.pid())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .expect("a plugin's pid is a positive i32");
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).expect("SIGKILL is sent");
    let err = get(lease, "pid:")
        .await
        .expect_err("a call to a killed plugin fails");
    assert!(
        matches!(err.kind(), UseErrorKind::Crashed { status, .. } if std::os::unix::process::ExitStatusExt::signal(status) == Some(9)),
        "{err}"
    );
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
