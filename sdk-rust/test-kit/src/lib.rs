//! A test kit for tether plugin authors, in two halves (like nushell's
//! `nu-plugin-test-support` and go-plugin's `TestPluginGRPCConn`):
//!
//! - **In-process** ([`TestHost`]): serve a plugin's services in the test's own process and get
//!   a [`Channel`](tonic::transport::Channel) to them from a fake host that speaks the real
//!   protocol — AutoMTLS with pinned throw-away identities, the `plugin.GRPCBroker` stream,
//!   callbacks on broker ids ([`InProcess::host_broker`]), host services, and a temporary
//!   directory of granted secrets and config files the plugin reads through
//!   [`tether_sdk::Granted`] (the process environment is not touched, so tests run in
//!   parallel). No process, no build of the binary: a unit test of the service.
//! - **Launched** ([`Launched`]): start the built binary (`env!("CARGO_BIN_EXE_<name>")`)
//!   through `tether_broker` exactly as a host does, call it, shut it down, and fail if a
//!   process, socket or directory of it is left.
//!
//! # A callback, unit-tested
//!
//! go-plugin's bidirectional counter: the plugin's `Put` dials the host's `AddHelper` on the
//! broker id the request carries. The test serves an `AddHelper` on the fake host's broker and
//! sends its id (`tether-examples` stands for your generated code and service):
//!
//! ```
//! use tether_examples::counter::add_helper_server::{AddHelper, AddHelperServer};
//! use tether_examples::counter::counter_client::CounterClient;
//! use tether_examples::counter::{PutRequest, SumRequest, SumResponse};
//! use tonic::{Request, Response, Status};
//!
//! struct Adder;
//!
//! #[tonic::async_trait]
//! impl AddHelper for Adder {
//!     async fn sum(&self, r: Request<SumRequest>) -> Result<Response<SumResponse>, Status> {
//!         let SumRequest { a, b } = r.into_inner();
//!         Ok(Response::new(SumResponse { r: a + b }))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let work = tempfile::tempdir()?;
//! let host = tether_sdk_test::TestHost::new()?;
//! let counter = tether_examples::counter_service::FileCounter::new(host.plugin_broker(), work.path());
//! let plugin = host
//!     .add_service(tether_examples::counter::counter_server::CounterServer::new(counter))
//!     .start()
//!     .await?;
//!
//! let broker = plugin.host_broker();
//! let id = broker.next_id();
//! let _served = broker.accept_and_serve(id, AddHelperServer::new(Adder)).await?;
//! let put = PutRequest { add_server: id, key: "c".into(), value: 5 };
//! CounterClient::new(plugin.channel()).put(put).await?;
//! assert_eq!(std::fs::read_to_string(work.path().join("kv_c"))?, "{\"Value\":5}");
//! plugin.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # Caveats
//!
//! In-process, the services run on the test's tokio runtime and share its process: what the
//! SDK does around them (cookie, handshake line, stdio capture, exiting with the host) is not
//! exercised — [`Launched`] and `tether conformance` cover that.

mod error;
mod in_process;
mod launch;

pub use error::KitError;
pub use in_process::{DEFAULT_CONNECT_TIMEOUT, InProcess, TestHost};
pub use launch::{Launched, plugin};
