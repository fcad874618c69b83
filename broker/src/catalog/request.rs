//! What a manifest asks for that only the operator's policy can grant ([`Request`]), and the
//! refusal of one ([`NotGranted`]), which names the grants line to add.

use std::fmt;
use std::path::PathBuf;

use tether_proto::ValueKind;

use crate::catalog::text::{toml_key, toml_string};
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
    /// Running as this uid and gid (`run_as = "UID:GID"`, root hosts): granted by the same
    /// `run_as` in the grants file, and for uid or gid 0 `allow_root = true` too.
    RunAs(u32, u32),
    /// A host environment variable (`env_allow = ["NAME"]`).
    EnvAllow(String),
    /// A fixed environment value, name then value (`env = { NAME = "value" }`): granted by
    /// the same name with the same value. (Boxed: keeps [`NotGranted`] small enough to
    /// return by value.)
    Env(Box<(String, String)>),
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
            Self::RunAs(..) => "run_as",
            Self::EnvAllow(_) => "env_allow",
            Self::Env(_) => "env",
            Self::SandboxAllowExec(_) => "sandbox_allow_exec",
            Self::SandboxAllowRead(_) => "sandbox_allow_read",
            Self::Runner(_) => "runner",
        }
    }

    /// The TOML line that grants it, e.g. `network = "host"`, `secrets = ["token"]` or
    /// `env = { NAME = "value" }` (merge a list entry into an existing list of that key, an
    /// `env` entry into an existing `env` table); for a `run_as` of root, two lines
    /// (`allow_root = true` the second).
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
            Self::Env(entry) => {
                let (name, value) = &**entry;
                format!("{key} = {{ {} = {} }}", env_key(name), toml_string(value))
            }
            Self::Sandbox(mode) => format!("{key} = \"{mode}\""),
            Self::Network(mode) => format!("{key} = \"{mode}\""),
            Self::Seccomp(mode) => format!("{key} = \"{mode}\""),
            Self::Namespaces(mode) => format!("{key} = \"{mode}\""),
            Self::RunAs(uid, gid) if *uid == 0 || *gid == 0 => {
                format!("{key} = \"{uid}:{gid}\"\nallow_root = true")
            }
            Self::RunAs(uid, gid) => format!("{key} = \"{uid}:{gid}\""),
            Self::Runner(name) => format!("{key} = \"{name}\""),
        }
    }

    /// The entry that grants it in the list of its key (`"token"`, `"/srv/data"`), for the
    /// requests written as lists (`secrets`, `config`, `env_allow`, `sandbox_allow_*`), or in the
    /// `env` table (`NAME = "value"`); `None` for the others, whose key holds one value.
    #[must_use]
    pub fn entry(&self) -> Option<String> {
        match self {
            Self::Secret(name) | Self::Config(name) | Self::EnvAllow(name) => {
                Some(toml_string(name))
            }
            Self::SandboxAllowExec(path) | Self::SandboxAllowRead(path) => {
                Some(toml_string(&path.to_string_lossy()))
            }
            Self::Env(entry) => {
                let (name, value) = &**entry;
                Some(format!("{} = {}", env_key(name), toml_string(value)))
            }
            Self::Sandbox(_)
            | Self::Network(_)
            | Self::Seccomp(_)
            | Self::Namespaces(_)
            | Self::RunAs(..)
            | Self::Runner(_) => None,
        }
    }
}

/// An `env` table's key as TOML writes it: bare when it can be, else quoted.
fn env_key(name: &str) -> String {
    if toml_key(name) == name {
        name.to_owned()
    } else {
        toml_string(name)
    }
}

impl fmt::Display for Request {
    /// What the manifest asks for, as the manifest says it (`network = "host"`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.grants_line())
    }
}

/// What makes a refused [`Request`] start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Remedy {
    /// The operator adds [`Request::grants_line`] under the plugin's `[plugins.NAME]`, which
    /// does not have the request's key yet.
    Grant,
    /// The plugin's table in the grants file already has the request's key, a list: the
    /// operator adds [`Request::entry`] to that list (writing the key again would make the file
    /// invalid TOML: a duplicate key).
    Extend {
        /// The line of the list in the grants file (where its value starts).
        line: u32,
    },
    /// The plugin's table in the grants file already has the request's key with another value:
    /// the operator changes that value to the one of [`Request::grants_line`].
    Change {
        /// The line of the key's value in the grants file.
        line: u32,
    },
    /// Only dropping it from the manifest: the operator's policy for every plugin refuses it
    /// (a top-level `namespaces = "required"` refuses `namespaces = "off"`).
    DropIt {
        /// The policy's line in the grants file, when read from one (`u32`: keeps
        /// [`NotGranted`] small enough to return by value).
        policy_line: Option<u32>,
    },
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
    /// The line of the request's key in [`manifest`](Self::manifest) (1-based).
    pub manifest_line: usize,
    /// The grants file the line is to be added to; `None` for grants made in code.
    pub grants_file: Option<PathBuf>,
    /// What makes it start.
    pub remedy: Remedy,
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
        let request = self.request.grants_line().replace('\n', "` and `");
        let asked = match &self.request {
            // What the manifest says, not what grants it.
            Request::RunAs(uid, gid) => format!("run_as = \"{uid}:{gid}\""),
            _ => request.clone(),
        };
        let manifest = format!("{}:{}", self.manifest.display(), self.manifest_line);
        let key = self.request.key();
        if let Remedy::DropIt { policy_line } = self.remedy {
            let grants = self
                .grants_file
                .as_ref()
                .map_or_else(|| "the grants".to_owned(), |f| f.display().to_string());
            let at = policy_line.map_or(grants.clone(), |line| format!("{grants}:{line}"));
            return write!(
                f,
                "plugin `{plugin}` requests `{asked}` in {manifest}, which the operator's policy refuses for every plugin (`namespaces = \"required\"` at {at}); it does not start. Remove `{key}` from the manifest"
            );
        }
        write!(
            f,
            "plugin `{plugin}` requests `{asked}` in {manifest}, which the operator's policy does not grant; it does not start. To allow it, ",
        )?;
        let grants = self
            .grants_file
            .as_ref()
            .map_or_else(|| "the grants file".to_owned(), |f| f.display().to_string());
        match (self.remedy, self.request.entry()) {
            // `env` is a table: its entry is set (added, or its value changed), never repeated.
            (Remedy::Extend { line }, Some(entry)) if matches!(self.request, Request::Env(_)) => {
                write!(f, "set `{entry}` in the `{key}` table at {grants}:{line}")?;
            }
            (Remedy::Extend { line }, Some(entry)) => {
                write!(f, "add {entry} to the `{key}` list at {grants}:{line}")?;
            }
            (Remedy::Change { line }, _) | (Remedy::Extend { line }, None) => {
                let mut lines = self.request.grants_line();
                // A second line (`allow_root = true`) is added, not changed.
                let added = lines.split_once('\n').map(|(_, more)| more.to_owned());
                lines.truncate(lines.find('\n').unwrap_or(lines.len()));
                write!(f, "change `{key}` at {grants}:{line} to `{lines}`")?;
                if let Some(added) = added {
                    write!(f, " and add `{added}` under `[plugins.{plugin}]`")?;
                }
            }
            (Remedy::Grant | Remedy::DropIt { .. }, _) => {
                write!(f, "add `{request}` under `[plugins.{plugin}]` in ")?;
                match &self.grants_file {
                    Some(file) => write!(f, "{}", file.display())?,
                    None => f.write_str("the grants file (or grant it with `Grants` in code)")?,
                }
            }
        }
        write!(f, ", or remove `{key}` from the manifest")
    }
}

impl std::error::Error for NotGranted {}
