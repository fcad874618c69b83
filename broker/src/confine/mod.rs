//! Confinement of a plugin process, in any language: the sandbox applied between fork and
//! exec, the pids cgroup, the janitor that outlives the host, binary integrity, and the
//! process group.

pub(crate) mod cgroup_text;
pub(crate) mod integrity;
pub(crate) mod janitor;
pub(crate) mod pids;
pub(crate) mod process;
pub(crate) mod sandbox;
