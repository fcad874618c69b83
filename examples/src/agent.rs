//! The agent demo's protocol (`tether.agent.v1`) and its Rust executor plugins.
//!
//! Steps may call back into the host's `tether.agent.v1.Host` service (progress, log lines,
//! artifacts; [`host_calls::HostCalls`]), which `tether run` serves to every plugin as a tether
//! host service; [`checksum`] does.
//!
//! Every plugin serves `tether.agent.v1.Executor` with the handshake cookie
//! [`COOKIE_KEY`]`=`[`COOKIE_VALUE`] and app version [`APP_VERSION`]. Each is a separate
//! process with its own manifest (`examples/agent/catalog/*.toml`), sandbox and secrets; they
//! are compiled into the `tether` binary (`tether demo-plugin NAME`) only so that the one
//! command `cargo run --release --bin tether -- run` builds the whole demo.

pub mod checksum;
mod executor;
pub mod hash;
pub mod host_calls;
pub mod json_transform;
pub mod notifier;
pub mod template;
pub mod word_count;

pub use executor::{HostStepFn, Step, StepError, StepFn, StepFuture, serve_step};

/// Generated code of `examples/proto/agent.proto`.
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

/// The demo's Rust plugins by name: what `tether demo-plugin NAME` serves.
pub const PLUGINS: &[(&str, Step)] = &[
    ("json-transform", Step::Local(json_transform::step)),
    ("word-count", Step::Local(word_count::step)),
    ("hash", Step::Local(hash::step)),
    ("notifier", Step::Local(notifier::step)),
    ("template", Step::Local(template::step)),
    ("checksum", Step::WithHost(checksum_step)),
];

/// [`checksum::step`] as a [`HostStepFn`].
fn checksum_step(
    host: host_calls::HostCalls,
    params: serde_json::Map<String, serde_json::Value>,
    input: serde_json::Map<String, serde_json::Value>,
) -> StepFuture {
    Box::pin(checksum::step(host, params, input))
}
