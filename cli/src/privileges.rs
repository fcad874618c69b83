//! What a catalog plugin effectively gets, as `tether list` and `tether check` show it: its
//! secrets and config, network (and how `none` is enforced here), sandbox mode and allowances,
//! environment names, seccomp, runtime, how its world is isolated and uid — each request the operator's grants refuse marked as such (the plugin then does
//! not start).

use std::path::PathBuf;

use tether_broker::catalog::NotGranted;
use tether_broker::confine::NetworkMechanism;
use tether_broker::launch::{DEFAULT_ENV_ALLOWLIST, ResolvedRuntime};
use tether_broker::{Grants, Manifest};

/// One fact: a label and its value.
pub(crate) type Fact = (&'static str, String);

/// The facts of `m` under `grants`, in a fixed order.
pub(crate) fn facts(m: &Manifest, grants: &Grants) -> Vec<Fact> {
    let refused = grants.refusals(m);
    let refused_key = |key: &str| refused.iter().any(|r| r.request.key() == key);
    let mark = |key: &str, text: String| {
        if refused_key(key) {
            format!("{text} (NOT GRANTED: does not start)")
        } else {
            text
        }
    };
    let list = |names: &[String]| {
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    };
    let paths = |paths: &[PathBuf]| {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        list(&shown)
    };
    #[cfg(feature = "kubernetes")]
    if m.runner.name() == "kubernetes" {
        // Nothing of it runs on this host: the Pod's own settings, not this host's layers.
        return vec![
            ("secrets", mark("secrets", list(&m.secrets))),
            ("config", mark("config", list(&m.config))),
            (
                "network",
                "the Pod's: what the cluster's NetworkPolicy allows (examples/kubernetes/networkpolicy.yaml)".to_owned(),
            ),
            ("env", "the protocol's variables only".to_owned()),
            ("world", mark("runner", world(m))),
            (
                "uid",
                format!(
                    "{} in its Pod unless the host sets another (never root)",
                    tether_broker::launch::DEFAULT_RUN_AS_USER
                ),
            ),
        ];
    }
    let mut env: Vec<String> = DEFAULT_ENV_ALLOWLIST
        .iter()
        .map(|&s| s.to_owned())
        .collect();
    env.extend(m.confinement.env_allow.iter().cloned());
    vec![
        ("secrets", mark("secrets", list(&m.secrets))),
        ("config", mark("config", list(&m.config))),
        ("network", mark("network", network(m))),
        (
            "sandbox",
            mark("sandbox", m.confinement.sandbox.to_string()),
        ),
        (
            "allow-exec",
            mark(
                "sandbox_allow_exec",
                paths(&m.confinement.sandbox_allow_exec),
            ),
        ),
        (
            "allow-read",
            mark(
                "sandbox_allow_read",
                paths(&m.confinement.sandbox_allow_read),
            ),
        ),
        ("env", mark("env_allow", env.join(", "))),
        (
            "seccomp",
            mark("seccomp", m.confinement.seccomp.to_string()),
        ),
        ("runtime", m.runtime.to_string()),
        ("world", world(m)),
        ("uid", uid()),
    ]
}

/// How a plugin is isolated from its world: a Pod of its own for the Pod runner, else this
/// host's namespaces, or (where it cannot make them) the other layers only, with the reason.
fn world(m: &Manifest) -> String {
    if m.runner.name() == "kubernetes" {
        return "pod (a Pod of its own: non-root, read-only root, no capabilities, RuntimeDefault seccomp, no service-account token)".to_owned();
    }
    match tether_broker::confine::worlds_available() {
        Ok(()) => "namespaces (user, mount, pid, ipc, uts, cgroup, network)".to_owned(),
        Err(reason) => format!("layers only: no namespaces on this host ({reason})"),
    }
}

/// The network mode and, for `none`, the mechanism this host enforces it with.
fn network(m: &Manifest) -> String {
    match NetworkMechanism::for_mode(m.confinement.network, true) {
        Some(mechanism) => format!("{} ({mechanism})", m.confinement.network),
        None => m.confinement.network.to_string(),
    }
}

/// The user plugins run as: a root host's run as unprivileged ids of
/// [`DEFAULT_PLUGIN_IDS`](tether_broker::confine::DEFAULT_PLUGIN_IDS), never as root; another
/// host's as the host's own.
fn uid() -> String {
    use tether_broker::confine::{DEFAULT_PLUGIN_IDS, PluginIds};
    let host = rustix::process::geteuid().as_raw();
    if host != 0 {
        return format!("{host} (the host's)");
    }
    match DEFAULT_PLUGIN_IDS {
        PluginIds::Range { first, count } => format!(
            "one of {}..{} per plugin (not the host's root)",
            first + 1,
            u64::from(first) + u64::from(count)
        ),
        PluginIds::One(id) => format!("{id} (not the host's root)"),
        _ => "not the host's root".to_owned(),
    }
}

/// The facts as one `label: value; …` text.
pub(crate) fn line(facts: &[Fact]) -> String {
    let parts: Vec<String> = facts.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    parts.join("; ")
}

/// A resolved runtime, for `check`: the interpreter executed and what it is allowed.
pub(crate) fn runtime(resolved: &ResolvedRuntime) -> String {
    let shown = |paths: &[PathBuf]| {
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "{} {} (read+exec {}; read {})",
        resolved.interpreter,
        resolved.program.display(),
        shown(&resolved.read_exec),
        if resolved.read.is_empty() {
            "nothing more".to_owned()
        } else {
            shown(&resolved.read)
        }
    )
}

/// The problem lines of refused requests, for `check`.
pub(crate) fn refusals(refused: Vec<NotGranted>) -> impl Iterator<Item = String> {
    refused.into_iter().map(|r| r.to_string())
}
