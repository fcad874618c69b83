//! The part of the OCI runtime specification (`config.json`, v1.0) that a gVisor bundle uses,
//! as serde types. Plain data: [`bundle`](super::bundle) fills it in, `serde_json` writes it.

use serde::Serialize;

/// The OCI version written into every bundle.
pub(crate) const OCI_VERSION: &str = "1.0.2";

/// A bundle's `config.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Spec {
    pub(crate) oci_version: &'static str,
    pub(crate) process: Process,
    pub(crate) root: Root,
    pub(crate) hostname: String,
    pub(crate) mounts: Vec<Mount>,
    pub(crate) linux: Linux,
}

/// The container's one process: the plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Process {
    pub(crate) user: User,
    pub(crate) args: Vec<String>,
    pub(crate) env: Vec<String>,
    pub(crate) cwd: String,
    /// Empty sets: the plugin holds no capability.
    pub(crate) capabilities: Capabilities,
    pub(crate) rlimits: Vec<Rlimit>,
    pub(crate) no_new_privileges: bool,
}

/// The user the plugin runs as inside the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct User {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

/// Capability sets; all empty in tether's bundles.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Capabilities {
    pub(crate) bounding: Vec<String>,
    pub(crate) effective: Vec<String>,
    pub(crate) inheritable: Vec<String>,
    pub(crate) permitted: Vec<String>,
    pub(crate) ambient: Vec<String>,
}

/// One resource limit (`RLIMIT_*`), applied by gVisor's kernel inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Rlimit {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) hard: u64,
    pub(crate) soft: u64,
}

/// The root file system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Root {
    pub(crate) path: String,
    pub(crate) readonly: bool,
}

/// A mount inside the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Mount {
    pub(crate) destination: String,
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) source: String,
    pub(crate) options: Vec<String>,
}

/// Linux-specific settings: the namespaces, when limited the resources, and the system-call
/// filter gVisor's kernel applies to the plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Linux {
    pub(crate) namespaces: Vec<Namespace>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) resources: Option<Resources>,
    pub(crate) seccomp: Seccomp,
}

/// `linux.seccomp`: applied inside the sandbox by gVisor's kernel (runsc `--oci-seccomp`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Seccomp {
    /// `SCMP_ACT_*` for a call no rule names.
    pub(crate) default_action: &'static str,
    pub(crate) syscalls: Vec<SeccompSyscall>,
}

/// One rule: the calls `names` with `args` (any of the conditions on one argument) get `action`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct SeccompSyscall {
    pub(crate) names: Vec<&'static str>,
    pub(crate) action: &'static str,
    pub(crate) args: Vec<SeccompArg>,
}

/// A condition on argument `index`: `SCMP_CMP_MASKED_EQ` is `arg & value == value_two`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SeccompArg {
    pub(crate) index: u32,
    pub(crate) value: u64,
    pub(crate) value_two: u64,
    pub(crate) op: &'static str,
}

/// A namespace the container gets of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Namespace {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
}

/// Memory and CPU limits (honoured by runsc only where it manages cgroups).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Resources {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) memory: Option<Memory>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cpu: Option<Cpu>,
}

/// `linux.resources.memory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Memory {
    pub(crate) limit: i64,
}

/// `linux.resources.cpu`: `quota` µs of CPU time per `period` µs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Cpu {
    pub(crate) quota: i64,
    pub(crate) period: u64,
}
