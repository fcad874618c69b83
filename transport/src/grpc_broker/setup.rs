//! [`BrokerSetup`]: what a [`GrpcBroker`](super::GrpcBroker) needs once the connection to the
//! peer exists — TLS, where to listen, which announced addresses to dial, or the multiplexed
//! session.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use tether_proto::handshake::Address;
use tether_proto::rustls::pki_types::CertificateDer;
use tether_proto::tls::{self, Identity, TlsError};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ClientConfig;

use crate::bind::UnixBinder;
use crate::conn::Target;
use crate::mux::Mux;

/// TLS 1.3 session tickets a brokered server sends per connection (rustls sends 2 by default).
///
/// A brokered connection is dialled once per call id, one after another: each resumed
/// handshake consumes one ticket and brings the next, so one is enough for sequential dials;
/// concurrent dials beyond the first do full handshakes (still pinned, still TLS 1.3).
pub const BROKER_TLS13_TICKETS: usize = 1;

/// The TLS configurations of brokered connections: this side's identity, pinning the peer's
/// certificate, as TLS server (accepting) and as TLS client (dialling).
#[derive(Clone)]
pub struct BrokerTls {
    pub(super) server: TlsAcceptor,
    pub(super) client: Arc<ClientConfig>,
}

impl BrokerTls {
    /// Both configurations for `own` identity and the `peer`'s certificate.
    ///
    /// # Errors
    /// [`TlsError`] if rustls refuses the key or certificate.
    pub fn new(own: &Identity, peer: CertificateDer<'static>) -> Result<Self, TlsError> {
        let mut server = tls::server_config(own, peer.clone())?;
        server.send_tls13_tickets = BROKER_TLS13_TICKETS;
        Ok(Self {
            server: TlsAcceptor::from(Arc::new(server)),
            client: Arc::new(tls::client_config(own, peer)?),
        })
    }
}

impl fmt::Debug for BrokerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerTls").finish_non_exhaustive()
    }
}

/// Where [`GrpcBroker::accept_and_serve`](super::GrpcBroker::accept_and_serve) listens.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ListenOn {
    /// A randomly named unix socket in this directory.
    Unix(PathBuf),
    /// A randomly named unix socket in `dir`, announced to the peer under `announced_dir`:
    /// for a peer that sees `dir` at another path (a plugin in a sandbox whose bind mount of
    /// `dir` is `announced_dir`).
    UnixSeenAs {
        /// Where the socket is created, on this side.
        dir: PathBuf,
        /// The same directory as the peer sees it.
        announced_dir: PathBuf,
        /// How the socket files are made in `dir` (as the peer's user, when `dir` takes no
        /// file of this side's).
        binder: UnixBinder,
    },
    /// The first free port of this range on 127.0.0.1.
    Tcp {
        /// Lowest port.
        min: u16,
        /// Highest port.
        max: u16,
    },
}

/// Decides whether an address the peer announced may be dialled, and where to connect.
pub type AddressPolicy = Arc<dyn Fn(&Address) -> Result<Target, String> + Send + Sync>;

/// What a broker needs once the connection to the peer exists.
#[derive(Clone)]
pub struct BrokerSetup {
    /// `None`: plaintext brokered connections (AutoMTLS off).
    pub tls: Option<BrokerTls>,
    /// Where to listen.
    pub listen: ListenOn,
    /// Which announced addresses to dial.
    pub policy: AddressPolicy,
    /// `Some`: go-plugin's multiplexed mode over this session (`listen` and `policy` are then
    /// unused); `None`: the default mode.
    pub mux: Option<Mux>,
}

impl fmt::Debug for BrokerSetup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerSetup")
            .field("tls", &self.tls.is_some())
            .field("listen", &self.listen)
            .field("mux", &self.mux.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio_rustls::TlsConnector;
    use tokio_rustls::rustls::HandshakeKind;

    use super::*;

    /// One brokered TLS connection over an in-memory pipe: the client's handshake kind.
    async fn dial_once(host: &BrokerTls, plugin: &BrokerTls) -> Option<HandshakeKind> {
        let (client_io, server_io) = tokio::io::duplex(16 * 1024);
        let acceptor = host.server.clone();
        let server = tokio::spawn(async move {
            let mut tls = acceptor.accept(server_io).await.unwrap();
            let mut byte = [0u8; 1];
            tls.read_exact(&mut byte).await.unwrap();
            tls.write_all(&byte).await.unwrap();
            tls.flush().await.unwrap();
        });
        let connector = TlsConnector::from(Arc::clone(&plugin.client));
        let mut tls = connector
            .connect(tls::server_name(), client_io)
            .await
            .unwrap();
        // A round trip after the handshake, so the client has read the session ticket.
        tls.write_all(b"x").await.unwrap();
        let mut byte = [0u8; 1];
        tls.read_exact(&mut byte).await.unwrap();
        server.await.unwrap();
        tls.get_ref().1.handshake_kind()
    }

    #[tokio::test]
    async fn each_dial_after_the_first_resumes_the_previous_session() {
        let (host, plugin) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        let host_tls = BrokerTls::new(&host, plugin.cert_der().clone()).unwrap();
        let plugin_tls = BrokerTls::new(&plugin, host.cert_der().clone()).unwrap();
        assert_eq!(
            dial_once(&host_tls, &plugin_tls).await,
            Some(HandshakeKind::Full)
        );
        for _ in 0..3 {
            assert_eq!(
                dial_once(&host_tls, &plugin_tls).await,
                Some(HandshakeKind::Resumed)
            );
        }
    }
}
