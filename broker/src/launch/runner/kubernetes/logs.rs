//! The plugin's stdout, from its container's log stream (`pods/log?follow=true`): the handshake
//! and everything after it, with stdout and stderr interleaved as the container runtime wrote
//! them. The stream is written into a pipe, which the handshake and output stages read like a
//! local plugin's stdout.

use std::time::Duration;

use futures_util::AsyncReadExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use tokio::io::AsyncWriteExt as _;
use tokio::net::unix::pipe;

use super::objects::CONTAINER;

/// How long to wait before asking for the log stream again when the API server (or the
/// kubelet behind it) cannot serve it yet; doubled up to [`MAX_LOG_RETRY`].
const FIRST_LOG_RETRY: Duration = Duration::from_millis(20);

/// The longest wait between two requests for the log stream.
const MAX_LOG_RETRY: Duration = Duration::from_secs(1);

/// Copies the container's log stream into `out` until it ends. A request that fails before
/// anything arrived is repeated (the kubelet may not serve a container's log at the instant it
/// reports it running); once the stream has delivered output, its end is the end of stdout.
pub(crate) async fn follow(pods: Api<Pod>, name: String, mut out: pipe::Sender) {
    let params = LogParams {
        container: Some(CONTAINER.into()),
        follow: true,
        ..LogParams::default()
    };
    let mut retry = FIRST_LOG_RETRY;
    loop {
        let mut stream = match pods.log_stream(&name, &params).await {
            Ok(stream) => stream,
            Err(e) => {
                tracing::debug!(pod = %name, error = %e, "the log stream is not available yet");
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(MAX_LOG_RETRY);
                continue;
            }
        };
        let mut buf = vec![0u8; 16 * 1024];
        let mut delivered = false;
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => {
                    delivered = true;
                    if out.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::debug!(pod = %name, error = %e, "the log stream broke");
                    break;
                }
            }
        }
        if delivered {
            return;
        }
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(MAX_LOG_RETRY);
    }
}
