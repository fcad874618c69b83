//! `tether-agent`: run workflows through a catalog of `tether.agent.v1.Executor` plugins.
//!
//! The protocol ([`v1`], from `examples/proto/agent.proto`) has two services: plugins serve
//! `Executor.Execute(step, params, input) → (phase, outputs, message)`, and the host serves
//! `Host` back to each plugin (progress reports, log lines, artifacts), as a tether host
//! service. Any plugin, in any language, that serves `Executor` with the handshake cookie
//! [`COOKIE_KEY`]`=`[`COOKIE_VALUE`] and app version [`APP_VERSION`] can run a step.
//!
//! - [`host`]: workflow files ([`host::Workflow`]), the `Host` service with its least-privilege
//!   artifact policy ([`host::ArtifactPolicy`]), and the runner ([`host::run`]) that acquires
//!   each step's plugin from a [`Supervisor`](tether_broker::Supervisor) when the step first needs it.
//!   `tether run` is this runner with a progress bar and a summary.
//! - [`plugin`]: the plugin side: serve a step function as an `Executor` plugin
//!   ([`plugin::serve_step`]) and call the host back ([`plugin::HostCalls`]).
//!
//! The agent demo (the README's first command) is built on this crate in `tether-examples`:
//! its steps are plugins served by the multi-call `agent-demo` binary.

pub mod host;
pub mod plugin;

/// Generated code of `examples/proto/agent.proto` (`tether.agent.v1`), by `tether-codegen`.
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
pub mod v1 {
    include!("generated/tether.agent.v1.rs");

    /// The encoded `FileDescriptorSet` of `agent.proto`, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!("generated/agent.bin");
}

/// The magic cookie's name every agent plugin expects.
pub const COOKIE_KEY: &str = "TETHER_AGENT_PLUGIN";
/// The magic cookie's value.
pub const COOKIE_VALUE: &str = "executor";
/// The app protocol version of `tether.agent.v1`.
pub const APP_VERSION: u32 = 1;
