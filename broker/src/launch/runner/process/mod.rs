//! The process runner: the plugin as the host's own child process, started from the plan
//! ([`spawn`]) without copying the host ([`vfork`]), confined between its start and exec.

pub(crate) mod spawn;
pub(crate) mod vfork;
