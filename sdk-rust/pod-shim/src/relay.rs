//! The shim's listener: every connection to the Pod's port is relayed, byte for byte, to the
//! plugin's own socket. TLS (AutoMTLS) runs end to end between host and plugin through it.

use std::io;

use tether_proto::handshake::Address;
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream, UnixStream};

/// Accepts connections on `listener` for ever, relaying each to `target`.
pub(crate) async fn serve(listener: TcpListener, target: Address) {
    loop {
        let (mut inbound, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                eprintln!("tether-pod-shim: accepting a connection failed: {e}");
                continue;
            }
        };
        let target = target.clone();
        tokio::spawn(async move {
            let _ = inbound.set_nodelay(true);
            if let Err(e) = relay(&mut inbound, &target).await {
                eprintln!("tether-pod-shim: relaying {peer} to {target} ended: {e}");
            }
        });
    }
}

async fn relay(inbound: &mut TcpStream, target: &Address) -> io::Result<()> {
    match target {
        Address::Unix(path) => {
            let mut outbound = UnixStream::connect(path).await?;
            copy_bidirectional(inbound, &mut outbound).await?;
        }
        Address::Tcp(addr) => {
            let mut outbound = TcpStream::connect(addr).await?;
            outbound.set_nodelay(true)?;
            copy_bidirectional(inbound, &mut outbound).await?;
        }
    }
    Ok(())
}
