//! Out of cluster, the host reaches the plugin's Pod through the API server's port-forward
//! (`pods/portforward`): a listener on the host's loopback whose every connection is relayed
//! over a port-forward stream to the Pod's port. The multiplexed broker makes one connection per
//! plugin. TLS runs end to end through it, pinned to the plugin's certificate.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use tokio::net::TcpListener;

/// A running forward; it stops when dropped.
#[derive(Debug)]
pub(crate) struct Forward {
    pub(crate) local: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Forward {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Forwards a loopback port of the host to `port` of the Pod `name`.
pub(crate) async fn start(pods: Api<Pod>, name: String, port: u16) -> io::Result<Forward> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let local = listener.local_addr()?;
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                continue;
            };
            let (pods, name) = (pods.clone(), name.clone());
            tokio::spawn(async move {
                let _ = inbound.set_nodelay(true);
                let mut forwarder = match pods.portforward(&name, &[port]).await {
                    Ok(forwarder) => forwarder,
                    Err(e) => {
                        tracing::warn!(pod = %name, port, error = %e, "the port-forward to the plugin's Pod failed (`create` pods/portforward)");
                        return;
                    }
                };
                let Some(mut stream) = forwarder.take_stream(port) else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut stream).await;
                drop(stream);
                let _ = forwarder.join().await;
            });
        }
    });
    Ok(Forward { local, task })
}
