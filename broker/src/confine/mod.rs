//! Confinement of a plugin process, in any language: the sandbox applied between fork and
//! exec, the pids cgroup, the janitor that outlives the host, binary integrity, and the
//! process group, the system-call filter and the network policy.

pub(crate) mod apply;
pub(crate) mod caps;
pub(crate) mod cgroup_text;
pub(crate) mod child;
pub(crate) mod confinement;
pub(crate) mod container;
pub(crate) mod integrity;
pub(crate) mod janitor;
pub(crate) mod netns;
pub mod network;
pub(crate) mod paths;
pub(crate) mod pids;
pub(crate) mod process;
pub(crate) mod reachable;
pub(crate) mod sandbox;
pub mod seccomp;
pub(crate) mod user;
pub mod world;

pub use confinement::Confinement;
pub use integrity::{IntegrityError, sha256_file};
pub use netns::NETWORK_NAMESPACE_RESERVE;
pub use network::{
    NetworkMechanism, NetworkMode, network_namespaces_available, pathname_sockets_blocked,
};
pub use pids::{DEFAULT_MAX_PROCESSES, MAX_KILL_ROUNDS, ProcessLimit};
pub use sandbox::{
    DEFAULT_DISK_MIB, DEVICE_RW_PATHS, Limits, RESOLVE_UNIX_ABI, SYSTEM_EXEC_PATHS,
    SYSTEM_READ_PATHS, SandboxError, SandboxMode, TARGET_LANDLOCK_ABI, kernel_landlock_abi,
};
pub use seccomp::{SeccompError, SeccompMode};
pub use world::ids::{DEFAULT_PLUGIN_IDS, IdError, PluginIds};
pub use world::plan::{WORLD_DELIVERED, WORLD_SHM, WORLD_TMP};
pub use world::reserve::WORLD_RESERVE;
pub use world::{NamespacesMode, WorldError, WorldMechanism, worlds_available};
