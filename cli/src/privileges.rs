//! What a catalog plugin effectively gets, as `tether list` and `tether check` show it: its
//! secrets and config, network (and how `none` is enforced here), sandbox mode and allowances,
//! environment names, seccomp, runtime, how its world is isolated and uid — each request the
//! operator's grants refuse marked as such (the plugin then does not start). What it gets is
//! the manifest's confinement with the operator's decisions applied
//! ([`Grants::confinement_of`]: `run_as`, `allow_root`, the namespaces policy).

use std::path::PathBuf;

use tether_broker::catalog::NotGranted;
use tether_broker::confine::{Confinement, NamespacesMode, NetworkMechanism, SandboxMode};
use tether_broker::launch::{DEFAULT_ENV_ALLOWLIST, ResolvedRuntime, Runner};
use tether_broker::{Grants, Manifest};

/// One fact: a label and its value.
pub(crate) type Fact = (&'static str, String);

/// The facts of `m` under `grants`, in a fixed order.
pub(crate) fn facts(m: &Manifest, grants: &Grants) -> Vec<Fact> {
    let refused = grants.refusals(m);
    let effective = grants.confinement_of(m);
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
            ("world", mark("runner", POD_WORLD.to_owned())),
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
        ("world", mark("namespaces", world(m, &effective))),
        ("uid", mark("run_as", uid(&effective))),
    ]
}

/// How the Pod runner isolates a plugin: a Pod of its own.
const POD_WORLD: &str = "pod (a Pod of its own: non-root, read-only root, no capabilities, RuntimeDefault seccomp, no service-account token)";

/// How this host isolates `m`'s plugin, confined as `c`, from its world: namespaces, or the
/// other layers only (with the reason), or nothing because the policy requires namespaces
/// this host cannot make.
fn world(m: &Manifest, c: &Confinement) -> String {
    const WORLD: &str = "namespaces (user, mount, pid, ipc, uts, cgroup, network)";
    if m.runner.name() == "kubernetes" {
        return POD_WORLD.to_owned();
    }
    if !matches!(m.runner, Runner::Process) {
        return format!("the {} runner's own", m.runner);
    }
    let off = match c.namespaces {
        NamespacesMode::Off if m.confinement.namespaces == NamespacesMode::Off => {
            Some("namespaces = \"off\", granted")
        }
        NamespacesMode::Off => Some("the operator's namespaces = \"off\""),
        NamespacesMode::Preferred if c.sandbox == SandboxMode::Off => Some("sandbox = \"off\""),
        _ => None,
    };
    if let Some(why) = off {
        return format!("layers only: {why}");
    }
    match (tether_broker::confine::worlds_available(), c.namespaces) {
        (Ok(()), NamespacesMode::Required) => format!("{WORLD}, required"),
        (Ok(()), _) => WORLD.to_owned(),
        (Err(reason), NamespacesMode::Required) => format!(
            "none: namespaces are required but this host cannot make them ({reason}) (DOES NOT START)"
        ),
        (Err(reason), _) => format!("layers only: no namespaces on this host ({reason})"),
    }
}

/// Why `m`'s plugin cannot start on this host although everything it asks is granted: a
/// `run_as` on a host that is not root, namespaces required where none can be made.
pub(crate) fn host_problems(m: &Manifest, grants: &Grants) -> Vec<String> {
    let c = grants.confinement_of(m);
    let mut problems = Vec::new();
    let host = rustix::process::geteuid().as_raw();
    if let Some((uid, gid)) = c.run_as
        && host != 0
    {
        let at = grants
            .run_as_place(&m.name)
            .unwrap_or_else(|| m.file.display().to_string());
        problems.push(format!(
            "{at}: plugin `{}`: `run_as = \"{uid}:{gid}\"` needs a root host: this host runs as uid {host} and only root can start a process as another user; run the host as root, or remove `run_as` (the plugin then runs as the host's user)",
            m.name
        ));
    }
    if c.namespaces == NamespacesMode::Required
        && matches!(m.runner, Runner::Process)
        && let Err(reason) = tether_broker::confine::worlds_available()
    {
        problems.push(format!(
            "{}: plugin `{}` does not start here: namespaces are required (by the {}) but this host cannot make a plugin's world: {reason}; allow user namespaces, or set `namespaces = \"preferred\"`",
            m.file.display(),
            m.name,
            if m.confinement.namespaces == NamespacesMode::Required {
                "manifest"
            } else {
                "operator's grants"
            }
        ));
    }
    problems
}

/// The network mode and, for `none`, the mechanism this host enforces it with.
fn network(m: &Manifest) -> String {
    match NetworkMechanism::for_mode(m.confinement.network, true) {
        Some(mechanism) => format!("{} ({mechanism})", m.confinement.network),
        None => m.confinement.network.to_string(),
    }
}

/// The user a plugin confined as `c` runs as: `run_as` (root hosts only); else a root host's
/// run as unprivileged ids of
/// [`DEFAULT_PLUGIN_IDS`](tether_broker::confine::DEFAULT_PLUGIN_IDS), never as root unless
/// `allow_root` where no world is made; another host's as the host's own.
fn uid(c: &Confinement) -> String {
    use tether_broker::confine::{DEFAULT_PLUGIN_IDS, PluginIds};
    let host = rustix::process::geteuid().as_raw();
    match c.run_as {
        Some((uid, gid)) if host != 0 => {
            return format!(
                "{host} (the host's); run_as {uid}:{gid} needs a root host (DOES NOT START)"
            );
        }
        Some((0, gid)) => return format!("0:{gid} (run_as: the host's root, allow_root)"),
        Some((uid, gid)) => return format!("{uid}:{gid} (run_as)"),
        None if host != 0 => return format!("{host} (the host's)"),
        None => {}
    }
    let no_world =
        c.namespaces == NamespacesMode::Off || tether_broker::confine::worlds_available().is_err();
    if c.allow_root && no_world {
        return "0 (the host's root without a world: allow_root)".to_owned();
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
