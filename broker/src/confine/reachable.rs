//! The host paths a confined plugin may reach: the system's (the same for every plugin) and a
//! launch's own ([`Paths`]). Without namespaces they are Landlock rules; in a world they are
//! also what is mounted (`crate::confine::world::plan`).

use std::path::PathBuf;

/// System directories a confined plugin may read and execute from: programs and shared
/// libraries.
pub const SYSTEM_EXEC_PATHS: &[&str] = &[
    "/usr/lib",
    "/usr/lib64",
    "/usr/lib32",
    "/usr/libexec",
    "/usr/local/lib",
    "/lib",
    "/lib64",
    "/lib32",
    "/usr/bin",
    "/bin",
];

/// System files and directories a confined plugin may read: the dynamic loader's cache, time
/// zones, name resolution, CA certificates, CPU and memory information. `/proc` is readable,
/// but the kernel refuses a confined plugin the private files (`environ`, `mem`, `fd/…`) of
/// processes outside its Landlock domain, such as the host.
pub const SYSTEM_READ_PATHS: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/ssl/certs",
    "/usr/share/zoneinfo",
    "/usr/share/ca-certificates",
    "/proc",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
    "/sys/kernel/mm/transparent_hugepage",
    "/dev/urandom",
    "/dev/random",
    "/dev/zero",
];

/// Device files a confined plugin may read and write. Not `/dev/tty`: a plugin runs in a
/// session of its own, without a controlling terminal, so that it cannot read the operator's
/// terminal or push keystrokes into it.
pub const DEVICE_RW_PATHS: &[&str] = &["/dev/null", "/dev/full"];

/// Where a confined plugin may go, besides the system paths.
#[derive(Debug, Clone, Default)]
pub(crate) struct Paths {
    /// Read + execute: the plugin binary's directory.
    pub(crate) exec: Vec<PathBuf>,
    /// Read only: its secrets and config directory.
    pub(crate) read: Vec<PathBuf>,
    /// Read + write: its private directory and its state (working) directory.
    pub(crate) read_write: Vec<PathBuf>,
    /// Which of `exec` and `read` the operator granted (`sandbox_allow_exec`,
    /// `sandbox_allow_read`), as they were written: a world binds them with the plugin's own
    /// ids (see `world::plan`).
    pub(crate) granted: Vec<PathBuf>,
}
