//! What a manifest asks for that only the operator's policy can grant ([`Request`]), and the
//! refusal of one ([`NotGranted`]), which names the grants line to add.

use std::fmt;
use std::path::PathBuf;

use tether_proto::ValueKind;

use crate::catalog::text::toml_string;
use crate::confine::network::NetworkMode;
use crate::confine::sandbox::SandboxMode;
use crate::confine::seccomp::SeccompMode;
use crate::confine::world::NamespacesMode;

/// Something a manifest asks for that only the operator's policy can grant.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Request {
    /// A secret (`secrets = ["NAME"]`).
    Secret(String),
    /// A config file (`config = ["NAME"]`).
    Config(String),
    /// A sandbox mode looser than `enforce` (`sandbox = "best-effort" | "off"`).
    Sandbox(SandboxMode),
    /// The host's network (`network = "host"`).
    Network(NetworkMode),
    /// No system-call filter (`seccomp = "off"`).
    Seccomp(SeccompMode),
    /// No world of its own (`namespaces = "off"`): the host's mount table, processes, IPC and
    /// user shared, only the other layers confining it.
    Namespaces(NamespacesMode),
    /// A host environment variable (`env_allow = ["NAME"]`).
    EnvAllow(String),
    /// Reading and executing below a directory (`sandbox_allow_exec`), as resolved from the
    /// manifest.
    SandboxAllowExec(PathBuf),
    /// Reading below a directory (`sandbox_allow_read`), as resolved from the manifest.
    SandboxAllowRead(PathBuf),
    /// A runner that takes the plugin and its granted values off this host (`runner =
    /// "kubernetes"`: a Pod, and a Secret in the cluster).
    Runner(&'static str),
}

impl Request {
    /// The key of the manifest and of the grants file this request is written with.
    #[must_use]
    pub fn key(&self) -> &'static str {
        match self {
            Self::Secret(_) => ValueKind::Secret.manifest_key(),
            Self::Config(_) => ValueKind::Config.manifest_key(),
            Self::Sandbox(_) => "sandbox",
            Self::Network(_) => "network",
            Self::Seccomp(_) => "seccomp",
            Self::Namespaces(_) => "namespaces",
            Self::EnvAllow(_) => "env_allow",
            Self::SandboxAllowExec(_) => "sandbox_allow_exec",
            Self::SandboxAllowRead(_) => "sandbox_allow_read",
            Self::Runner(_) => "runner",
        }
    }

    /// The TOML line that grants it, e.g. `network = "host"` or `secrets = ["token"]` (merge
    /// a list entry into an existing list of that key).
    #[must_use]
    pub fn grants_line(&self) -> String {
        let key = self.key();
        match self {
            Self::Secret(name) | Self::Config(name) | Self::EnvAllow(name) => {
                format!("{key} = [{}]", toml_string(name))
            }
            Self::SandboxAllowExec(path) | Self::SandboxAllowRead(path) => {
                format!("{key} = [{}]", toml_string(&path.to_string_lossy()))
            }
            Self::Sandbox(mode) => format!("{key} = \"{mode}\""),
            Self::Network(mode) => format!("{key} = \"{mode}\""),
            Self::Seccomp(mode) => format!("{key} = \"{mode}\""),
            Self::Namespaces(mode) => format!("{key} = \"{mode}\""),
            Self::Runner(name) => format!("{key} = \"{name}\""),
        }
    }
}

impl fmt::Display for Request {
    /// What the manifest asks for, as the manifest says it (`network = "host"`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.grants_line())
    }
}

/// Something a plugin's manifest asks for that the operator's policy does not grant: the
/// plugin does not start.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NotGranted {
    /// The plugin.
    pub plugin: String,
    /// What it asks for.
    pub request: Request,
    /// The plugin's manifest.
    pub manifest: PathBuf,
    /// The line of the manifest where the request's key is, when it is known.
    pub manifest_line: Option<usize>,
    /// The grants file the line is to be added to; `None` for grants made in code.
    pub grants_file: Option<PathBuf>,
}

impl NotGranted {
    /// `secret` or `config`, when that is what was refused.
    #[must_use]
    pub fn value_kind(&self) -> Option<ValueKind> {
        match self.request {
            Request::Secret(_) => Some(ValueKind::Secret),
            Request::Config(_) => Some(ValueKind::Config),
            _ => None,
        }
    }
}

impl fmt::Display for NotGranted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plugin = &self.plugin;
        write!(
            f,
            "plugin `{plugin}` requests `{}` in {}",
            self.request,
            self.manifest.display(),
        )?;
        if let Some(line) = self.manifest_line {
            write!(f, ":{line}")?;
        }
        write!(
            f,
            ", which the operator's policy does not grant; it does not start. To allow it, add `{}` under `[plugins.{plugin}]` in ",
            self.request.grants_line(),
        )?;
        match &self.grants_file {
            Some(file) => write!(f, "{}", file.display())?,
            None => f.write_str("the grants file (or grant it with `Grants` in code)")?,
        }
        write!(f, ", or remove `{}` from the manifest", self.request.key())
    }
}

impl std::error::Error for NotGranted {}
