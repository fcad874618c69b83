//! Out of cluster, the host reaches the plugin's Pod through the API server's port-forward
//! (`pods/portforward`): a listener on the host's loopback whose every connection is relayed
//! over a port-forward stream to the Pod's port. The multiplexed broker makes one connection per
//! plugin. TLS runs end to end through it, pinned to the plugin's certificate.
//!
//! The API server decides whether the host may forward only when a forward is opened, and a
//! plugin takes its first connection as its host's: so before the Pod exists, [`probe`] asks
//! for a forward to it. Authorization comes before the Pod is looked up: "not found" is the
//! yes, and a refusal fails the start before anything is made, instead of surfacing later as
//! a connection the relay could only close.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use tokio::net::TcpListener;

use super::cluster::RBAC_HINT;

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
///
/// # Errors
/// When the host cannot listen on its loopback, in words.
pub(crate) async fn start(pods: Api<Pod>, name: String, port: u16) -> Result<Forward, String> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .map_err(|e| format!("cannot listen for the port-forward on this host's loopback: {e}"))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot listen for the port-forward on this host's loopback: {e}"))?;
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
                        tracing::warn!(pod = %name, port, error = %e, "the port-forward to the plugin's Pod failed");
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

/// Whether the API server lets this host forward to `port` of the Pod `name`, which does not
/// exist yet (nothing reaches a plugin), answered within `within`.
///
/// # Errors
/// The refusal, or the API server's silence, in words.
pub(crate) async fn probe(
    pods: &Api<Pod>,
    name: &str,
    port: u16,
    within: Duration,
) -> Result<(), String> {
    use kube::client::UpgradeConnectionError::ProtocolSwitch;
    match tokio::time::timeout(within, pods.portforward(name, &[port])).await {
        Err(_) => Err(format!(
            "the API server did not answer a port-forward request (`pods/portforward`) within {within:?}"
        )),
        Ok(Err(kube::Error::UpgradeConnection(ProtocolSwitch(status))))
            if status.as_u16() == 404 =>
        {
            Ok(())
        }
        Ok(Err(e)) => Err(refused(&e)),
        // A Pod of that name already exists (not one of this launch's): not forwarded to.
        Ok(Ok(forwarder)) => {
            forwarder.abort();
            Ok(())
        }
    }
}

/// The API server's refusal of a port-forward, in words.
fn refused(error: &kube::Error) -> String {
    use kube::client::UpgradeConnectionError;
    match error {
        kube::Error::UpgradeConnection(UpgradeConnectionError::ProtocolSwitch(status))
            if status.as_u16() == 403 =>
        {
            format!(
                "the API server refused the port-forward to the Pod ({status}): a host outside the cluster needs the verbs `get` and `create` on `pods/portforward` (the Role tether-pod-runner-port-forward; a host in the cluster connects to the Pod's IP instead) — {RBAC_HINT}"
            )
        }
        other => format!(
            "the API server did not open a port-forward to the Pod (`pods/portforward`): {other}"
        ),
    }
}
