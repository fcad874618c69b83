//! A host whose plugin runs in a Pod, for the tests of what a host that dies leaves behind:
//! starts `PROGRAM` (a counter plugin in `IMAGE`) under the Pod runner with host identity
//! `HOST_ID`, prints `started`, and shuts the plugin down when its stdin closes. A second
//! incarnation with the same identity sweeps what a killed first one left.
//!
//! ```text
//! pod-host KUBECONFIG NAMESPACE NODE SHIM_IMAGE IMAGE PROGRAM HOST_ID
//! ```

use std::process::ExitCode;

use tether_broker::launch::{ClusterAccess, Connection, KubernetesOptions, Runner};
use tether_broker::{HandshakeConfig, PluginClient};
use tokio::io::AsyncReadExt as _;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [kubeconfig, namespace, node, shim, image, program, host_id] = args.as_slice() else {
        eprintln!("usage: pod-host KUBECONFIG NAMESPACE NODE SHIM_IMAGE IMAGE PROGRAM HOST_ID");
        return ExitCode::from(2);
    };
    let options = KubernetesOptions::new(image)
        .access(ClusterAccess::Kubeconfig(kubeconfig.into()))
        .namespace(namespace)
        .node_selector("kubernetes.io/hostname", node)
        .shim_image(shim)
        .connection(Connection::PortForward)
        .host_id(host_id);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let plugin = match PluginClient::builder(program)
            .handshake(HandshakeConfig::new("BASIC_PLUGIN", "hello"))
            .runner(Runner::Kubernetes(options))
            .start()
            .await
        {
            Ok(plugin) => plugin,
            Err(e) => {
                eprintln!("pod-host: {e}");
                return ExitCode::FAILURE;
            }
        };
        println!("started");
        let mut rest = Vec::new();
        let _ = tokio::io::stdin().read_to_end(&mut rest).await;
        match plugin.shutdown().await {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("pod-host: {e}");
                ExitCode::FAILURE
            }
        }
    })
}
