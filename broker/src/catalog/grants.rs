//! The host's policy: which plugin may receive which secrets and config files, and which
//! loosenings of its confinement its manifest may ask for.
//!
//! A manifest is written by the plugin's author; the grants file by the operator. Everything a
//! manifest asks for beyond the defaults — a secret, a config file, `sandbox = "off"`,
//! `network = "host"`, `seccomp = "off"`, `namespaces = "off"`, a `run_as` user, an
//! `env_allow` name, an `env` value, a `sandbox_allow_*` path — takes effect only when granted here, and a
//! plugin asking for more does not start ([`NotGranted`] names the grants line to add).
//!
//! Some things only the operator decides, whatever a manifest says: the user a plugin runs as
//! (`run_as`, `allow_root`) and whether plugins must have a world of their own (the top-level
//! `namespaces`); [`Grants::confinement_of`] applies them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::catalog::manifest::Manifest;
use crate::catalog::request::{NotGranted, Remedy, Request};
use crate::catalog::text::toml_key;
use crate::confine::confinement::Confinement;
use crate::confine::network::NetworkMode;
use crate::confine::paths::normalized;
use crate::confine::sandbox::SandboxMode;
use crate::confine::seccomp::SeccompMode;
use crate::confine::world::NamespacesMode;

/// Which plugin may receive which secrets and config files, and which loosenings of its
/// confinement it may ask for. Nothing is granted by default.
///
/// In code:
/// ```
/// use tether_broker::confine::NetworkMode;
/// let grants = tether_broker::Grants::new()
///     .secret("kv", "db-password")
///     .config("kv", "settings.json")
///     .network("kv", NetworkMode::Host)
///     .env_allow("kv", "HOME")
///     .env("kv", "KV_MODE", "fast")
///     .sandbox_allow_read("kv", "/srv/kv-data");
/// assert!(grants.allows_secret("kv", "db-password"));
/// assert!(!grants.allows_secret("other", "db-password"));
/// ```
/// Or as a TOML file ([`Grants::parse`], [`Grants::load`]):
/// ```toml
/// [plugins.kv]
/// secrets = ["db-password"]
/// config = ["settings.json"]
/// network = "host"                      # may use the host's network
/// env_allow = ["HOME"]                  # may receive these host variables
/// env = { KV_MODE = "fast" }            # may be given these fixed values, exactly
/// sandbox_allow_read = ["/srv/kv-data"] # may read below these (and their subdirectories)
/// calls = ["db"]                        # may call catalog plugin `db` through the host
/// # sandbox = "best-effort" | "off"      # may run with less file-system confinement
/// # seccomp = "off"                      # may run without the system-call filter
/// # namespaces = "off"                   # may run without a world of its own
/// # sandbox_allow_exec = ["/opt/tools"]  # may read and execute below these
/// # run_as = "65534:65534"              # runs as this uid:gid (root hosts), asked or not
/// # allow_root = true                    # run_as may be uid or gid 0 (the host's root)
/// # runner = "kubernetes"                # may run in a Pod (its values in a Secret there)
/// ```
/// A top-level key sets the policy for every plugin:
/// ```toml
/// namespaces = "required"   # no plugin starts without a world of its own
/// #            "preferred"  # (the default) a world where the host can make one
/// #            "off"        # no worlds: every plugin runs with the other layers only
/// ```
/// A granted path covers the manifest's path when it is the same directory or a parent of it,
/// both taken after symbolic links are resolved (and the manifest's `${VAR}`s expanded);
/// relative grant paths are relative to the grants file's directory. `sandbox = "off"` also
/// grants `best-effort`; a `sandbox_allow_exec` path also covers a `sandbox_allow_read` below it.
///
/// `run_as = "UID:GID"` is the operator's choice of the plugin's user on a root host: the
/// plugin runs as it whether or not its manifest asks, and a manifest's `run_as` is granted
/// only when it names the same ids. uid or gid 0 also needs `allow_root = true` (a grants file
/// without it is refused at that line); so does a root host's plugin running as the host's
/// root where no world can be made. A non-root host cannot switch users: a plugin with
/// `run_as` does not start there (located at its grants line).
///
/// The top-level `namespaces = "required"` cannot be defeated by a manifest: a manifest's
/// `namespaces = "off"` is refused (and a plugin's `namespaces = "off"` grant under it is an
/// error of the grants file); a manifest may always ask `"required"`, even under `"off"`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    pub(crate) plugins: BTreeMap<String, Grant>,
    /// The operator's policy for every plugin (top-level `namespaces`).
    pub(crate) namespaces: NamespacesMode,
    /// Its line in [`file`](Self::file).
    pub(crate) namespaces_line: Option<usize>,
    pub(crate) file: Option<PathBuf>,
    /// Where each plugin's table is in [`file`](Self::file): line and column of its name.
    pub(crate) places: BTreeMap<String, (usize, usize)>,
    /// Where each plugin's keys are in [`file`](Self::file): the line where each key's value
    /// starts (a list's `[`), so that advice can name the line to extend or change rather
    /// than ask for the key again.
    pub(crate) key_lines: BTreeMap<String, BTreeMap<String, usize>>,
}

/// One plugin's grant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) secrets: BTreeSet<String>,
    pub(crate) config: BTreeSet<String>,
    /// The catalog plugins it may call through the host.
    pub(crate) calls: BTreeSet<String>,
    /// Whether its manifest may choose the Pod runner (`runner = "kubernetes"`).
    pub(crate) kubernetes_runner: bool,
    /// The loosest confinement its manifest may ask for: the loosest sandbox mode, the
    /// network and seccomp modes, the variables and the directories (with those below them);
    /// and what the operator decides for it: `run_as`, `allow_root`, `namespaces = "required"`.
    pub(crate) confinement: Confinement,
}

impl Grants {
    /// Grants nothing.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn grant(&mut self, plugin: impl Into<String>) -> &mut Grant {
        self.plugins.entry(plugin.into()).or_default()
    }

    /// Grants `plugin` the secret `name`.
    #[must_use]
    pub fn secret(mut self, plugin: impl Into<String>, name: impl Into<String>) -> Self {
        self.grant(plugin).secrets.insert(name.into());
        self
    }

    /// Grants `plugin` the config file `name`.
    #[must_use]
    pub fn config(mut self, plugin: impl Into<String>, name: impl Into<String>) -> Self {
        self.grant(plugin).config.insert(name.into());
        self
    }

    /// Lets `plugin`'s manifest ask for anything up to `allowed` (its sandbox, network,
    /// seccomp and namespaces modes, `run_as`, variables and directories; `plugin_ids`, the
    /// network mechanism and `limits` are not compared), replacing what was granted before —
    /// the value the manifest's [`confinement`](crate::Manifest::confinement) is checked
    /// against. Its `run_as`, `allow_root` and a `namespaces` of `Required` are also imposed
    /// ([`confinement_of`](Self::confinement_of)).
    ///
    /// ```
    /// use tether_broker::confine::{Confinement, NetworkMode};
    /// let grants = tether_broker::Grants::new()
    ///     .confinement("kv", Confinement::default().network(NetworkMode::Host).sandbox_allow_read("/srv"));
    /// ```
    #[must_use]
    pub fn confinement(mut self, plugin: impl Into<String>, allowed: Confinement) -> Self {
        self.grant(plugin).confinement = allowed;
        self
    }

    /// Lets `plugin`'s manifest ask for sandbox `mode` (`Off` also allows `BestEffort`).
    #[must_use]
    pub fn sandbox(mut self, plugin: impl Into<String>, mode: SandboxMode) -> Self {
        self.grant(plugin).confinement.sandbox = mode;
        self
    }

    /// Lets `plugin`'s manifest ask for network `mode` (`Host`).
    #[must_use]
    pub fn network(mut self, plugin: impl Into<String>, mode: NetworkMode) -> Self {
        self.grant(plugin).confinement.network = mode;
        self
    }

    /// Lets `plugin`'s manifest ask for seccomp `mode` (`Off`).
    #[must_use]
    pub fn seccomp(mut self, plugin: impl Into<String>, mode: SeccompMode) -> Self {
        self.grant(plugin).confinement.seccomp = mode;
        self
    }

    /// Sets the policy for every plugin (the top-level `namespaces`): `Required` refuses to
    /// start a plugin without a world of its own (and any manifest's `namespaces = "off"`),
    /// `Off` runs every plugin without one (a manifest may still require one).
    #[must_use]
    pub fn namespaces(mut self, mode: NamespacesMode) -> Self {
        self.namespaces = mode;
        self
    }

    /// Runs `plugin` as `uid`:`gid` on a root host (`run_as = "UID:GID"`), whether or not its
    /// manifest asks; a manifest's `run_as` is granted only when it is the same. uid or gid 0
    /// also needs [`allow_root`](Self::allow_root).
    #[must_use]
    pub fn run_as(mut self, plugin: impl Into<String>, uid: u32, gid: u32) -> Self {
        self.grant(plugin).confinement.run_as = Some((uid, gid));
        self
    }

    /// Lets `plugin` run as the host's root (`allow_root = true`): a `run_as` of uid or gid 0,
    /// or, where a root host cannot make it a world, the host's own uid 0 (see
    /// [`Confinement::allow_root`]).
    #[must_use]
    pub fn allow_root(mut self, plugin: impl Into<String>) -> Self {
        self.grant(plugin).confinement.allow_root = true;
        self
    }

    /// The operator's namespaces policy for every plugin.
    #[must_use]
    pub fn namespaces_policy(&self) -> NamespacesMode {
        self.namespaces
    }

    /// Where `plugin`'s `run_as` is decided, for messages: `FILE:LINE` of the grants file, or
    /// `the grants` for grants made in code; `None` when the grants set none.
    #[must_use]
    pub fn run_as_place(&self, plugin: &str) -> Option<String> {
        self.plugins.get(plugin)?.confinement.run_as?;
        Some(match (&self.file, self.key_line(plugin, "run_as")) {
            (Some(file), Some(line)) => format!("{}:{line}", file.display()),
            (Some(file), None) => file.display().to_string(),
            (None, _) => "the grants".to_owned(),
        })
    }

    /// The confinement `manifest`'s plugin launches with: the manifest's own (checked with
    /// [`check`](Self::check) first), with what the operator decides for it — its grant's
    /// `run_as` and `allow_root`, and its world: `required` when the manifest, its grant or
    /// the top-level policy says so, else `off` when a granted manifest or the policy says so,
    /// else `preferred`.
    #[must_use]
    pub fn confinement_of(&self, manifest: &Manifest) -> Confinement {
        let mut confinement = manifest.confinement.clone();
        let Some(grant) = self.plugins.get(&manifest.name) else {
            confinement.namespaces = world(
                self.namespaces,
                NamespacesMode::Preferred,
                confinement.namespaces,
            );
            return confinement;
        };
        if grant.confinement.run_as.is_some() {
            confinement.run_as = grant.confinement.run_as;
        }
        confinement.allow_root = grant.confinement.allow_root;
        confinement.namespaces = world(
            self.namespaces,
            grant.confinement.namespaces,
            confinement.namespaces,
        );
        confinement
    }

    /// Lets `plugin`'s manifest pass the host's variable `name` (`env_allow`).
    #[must_use]
    pub fn env_allow(mut self, plugin: impl Into<String>, name: impl Into<String>) -> Self {
        self.grant(plugin).confinement.env_allow.push(name.into());
        self
    }

    /// Lets `plugin`'s manifest set the variable `name` to `value`, exactly (`env = { NAME =
    /// "value" }`; another value of the same name is refused).
    #[must_use]
    pub fn env(
        mut self,
        plugin: impl Into<String>,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> Self {
        let confinement = &mut self.grant(plugin).confinement;
        confinement
            .env
            .push((name.into().into(), value.into().into()));
        self
    }

    /// Lets `plugin`'s manifest allow reading and executing below `path` or any directory
    /// under it (`sandbox_allow_exec`, and `sandbox_allow_read` too).
    #[must_use]
    pub fn sandbox_allow_exec(
        mut self,
        plugin: impl Into<String>,
        path: impl Into<PathBuf>,
    ) -> Self {
        self.grant(plugin)
            .confinement
            .sandbox_allow_exec
            .push(path.into());
        self
    }

    /// Lets `plugin`'s manifest allow reading below `path` or any directory under it
    /// (`sandbox_allow_read`).
    #[must_use]
    pub fn sandbox_allow_read(
        mut self,
        plugin: impl Into<String>,
        path: impl Into<PathBuf>,
    ) -> Self {
        self.grant(plugin)
            .confinement
            .sandbox_allow_read
            .push(path.into());
        self
    }

    /// Lets `plugin`'s manifest choose the Pod runner (`runner = "kubernetes"`; file: the same
    /// line under `[plugins.NAME]`): the plugin then runs in a Pod anywhere in the cluster and
    /// its granted values travel in a Secret there. The process and gVisor runners need no
    /// grant.
    #[must_use]
    pub fn kubernetes_runner(mut self, plugin: impl Into<String>) -> Self {
        self.grant(plugin).kubernetes_runner = true;
        self
    }

    /// Whether `plugin`'s manifest may choose the Pod runner.
    #[must_use]
    pub fn allows_kubernetes_runner(&self, plugin: &str) -> bool {
        self.plugins
            .get(plugin)
            .is_some_and(|g| g.kubernetes_runner)
    }

    /// Whether `plugin` may receive the secret `name`.
    #[must_use]
    pub fn allows_secret(&self, plugin: &str, name: &str) -> bool {
        self.plugins
            .get(plugin)
            .is_some_and(|g| g.secrets.contains(name))
    }

    /// Whether `plugin` may receive the config file `name`.
    #[must_use]
    pub fn allows_config(&self, plugin: &str, name: &str) -> bool {
        self.plugins
            .get(plugin)
            .is_some_and(|g| g.config.contains(name))
    }

    /// Lets plugin `caller` call catalog plugin `callee` through the host
    /// (`tether.plugins.v1.Plugins/Open`; file: `calls = ["callee"]` under
    /// `[plugins.caller]`).
    pub fn calls(mut self, caller: impl Into<String>, callee: impl Into<String>) -> Self {
        self.grant(caller).calls.insert(callee.into());
        self
    }

    /// Whether plugin `caller` may call catalog plugin `callee` through the host.
    #[must_use]
    pub fn allows_call(&self, caller: &str, callee: &str) -> bool {
        self.plugins
            .get(caller)
            .is_some_and(|g| g.calls.contains(callee))
    }

    /// Why `caller` may not call `callee` and what to add where: the grants file and line of
    /// `caller`'s `calls` list or table when there is one.
    #[must_use]
    pub fn call_refusal(&self, caller: &str, callee: &str) -> String {
        let file = self
            .file
            .as_ref()
            .map_or_else(|| "the grants".to_owned(), |f| f.display().to_string());
        let table = format!("[plugins.{}]", toml_key(caller));
        let advice = match (self.key_line(caller, "calls"), self.places.get(caller)) {
            (Some(line), _) => format!("add {callee:?} to the `calls` list at {file}:{line}"),
            (None, Some((line, _))) => {
                format!("add `calls = [{callee:?}]` under `{table}` at {file}:{line}")
            }
            (None, None) => format!("add `{table}` with `calls = [{callee:?}]` to {file}"),
        };
        format!("plugin `{caller}` may not call plugin `{callee}`: not granted; {advice}")
    }

    /// The line of `key`'s value under `[plugins.PLUGIN]` in the grants [`file`](Self::file),
    /// when it has that key.
    fn key_line(&self, plugin: &str, key: &str) -> Option<usize> {
        self.key_lines.get(plugin)?.get(key).copied()
    }

    /// What makes `request` of `plugin` start, when the operator may grant it: extending or
    /// changing the key the plugin's table already has, else adding it.
    fn remedy(&self, plugin: &str, request: &Request) -> Remedy {
        let line = self
            .key_line(plugin, request.key())
            .and_then(|line| u32::try_from(line).ok());
        match (line, request.entry()) {
            (None, _) => Remedy::Grant,
            (Some(line), Some(_)) => Remedy::Extend { line },
            (Some(line), None) => Remedy::Change { line },
        }
    }

    /// The grants file these grants were read from, if any.
    #[must_use]
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The plugins granted anything (a table `[plugins.NAME]`, even an empty one, or a builder
    /// call), by name, each with where its name is in the grants [`file`](Self::file) (line
    /// and column) when it was read from one; those a catalog does not have are its
    /// [`strangers`](Self::strangers).
    pub fn plugins(&self) -> impl Iterator<Item = (&str, Option<(usize, usize)>)> {
        self.plugins
            .keys()
            .map(|name| (name.as_str(), self.places.get(name).copied()))
    }

    /// Checks everything `manifest` requests.
    ///
    /// # Errors
    /// The first request that is not granted (all of them: [`refusals`](Self::refusals)).
    pub fn check(&self, manifest: &Manifest) -> Result<(), NotGranted> {
        match self.refusals(manifest).into_iter().next() {
            Some(refused) => Err(refused),
            None => Ok(()),
        }
    }

    /// Every request of `manifest` that is not granted, in manifest-key order: secrets,
    /// config, sandbox, network, seccomp, namespaces, run_as, env_allow, env,
    /// sandbox_allow_exec, sandbox_allow_read, runner; each with the line of its key in the manifest.
    /// Paths are compared after resolving symbolic links, so this reads the file system.
    #[must_use]
    pub fn refusals(&self, manifest: &Manifest) -> Vec<NotGranted> {
        let empty = Grant::default();
        let grant = self.plugins.get(&manifest.name).unwrap_or(&empty);
        let forbidden_off = self.namespaces == NamespacesMode::Required;
        let mut refused = Vec::new();
        let mut refuse = |request: Request| {
            let forbidden = forbidden_off && matches!(request, Request::Namespaces(_));
            let remedy = if forbidden {
                Remedy::DropIt {
                    policy_line: self
                        .namespaces_line
                        .and_then(|line| u32::try_from(line).ok()),
                }
            } else {
                self.remedy(&manifest.name, &request)
            };
            refused.push(NotGranted {
                plugin: manifest.name.clone(),
                // Every request is a key of the manifest's file: 1 only if it were not.
                manifest_line: manifest.key_lines.get(request.key()).copied().unwrap_or(1),
                request,
                manifest: manifest.file.clone(),
                grants_file: self.file.clone(),
                remedy,
            });
        };
        for name in manifest
            .secrets
            .iter()
            .filter(|n| !grant.secrets.contains(*n))
        {
            refuse(Request::Secret(name.clone()));
        }
        for name in manifest
            .config
            .iter()
            .filter(|n| !grant.config.contains(*n))
        {
            refuse(Request::Config(name.clone()));
        }
        let mut allowed = grant.confinement.clone();
        if forbidden_off {
            // The policy for every plugin: no plugin's grant of `off` counts.
            allowed.namespaces = NamespacesMode::Required;
        }
        for request in ungranted(&manifest.confinement, &allowed) {
            refuse(request);
        }
        if manifest.runner.name() == "kubernetes" && !grant.kubernetes_runner {
            refuse(Request::Runner("kubernetes"));
        }
        refused
    }
}

/// What `asked` loosens beyond the default confinement that `allowed` does not cover, in
/// manifest-key order: sandbox, network, seccomp, namespaces, run_as, env_allow, env (a name
/// with the very value granted), sandbox_allow_exec, sandbox_allow_read. `sandbox = "off"` covers `best-effort`; a directory
/// covers itself and what is below it; an exec directory covers reading too; `run_as` is
/// covered by the same ids only (and root ids only with `allow_root`). The host-only parts
/// (`plugin_ids`, the network mechanism, `env_allow_defaults`) are not compared, as no
/// manifest sets them; nor are `limits`, which a manifest sets without a grant.
fn ungranted(asked: &Confinement, allowed: &Confinement) -> Vec<Request> {
    let mut refused = Vec::new();
    let sandbox_granted = match asked.sandbox {
        SandboxMode::Enforce => true,
        SandboxMode::BestEffort => allowed.sandbox != SandboxMode::Enforce,
        SandboxMode::Off => allowed.sandbox == SandboxMode::Off,
    };
    if !sandbox_granted {
        refused.push(Request::Sandbox(asked.sandbox));
    }
    if asked.network != NetworkMode::None && allowed.network != asked.network {
        refused.push(Request::Network(asked.network));
    }
    if asked.seccomp != SeccompMode::Default && allowed.seccomp != asked.seccomp {
        refused.push(Request::Seccomp(asked.seccomp));
    }
    // `required` and `preferred` ask for nothing; `off` gives up the world.
    if asked.namespaces == NamespacesMode::Off && allowed.namespaces != NamespacesMode::Off {
        refused.push(Request::Namespaces(asked.namespaces));
    }
    if let Some((uid, gid)) = asked.run_as
        && (allowed.run_as != asked.run_as || ((uid == 0 || gid == 0) && !allowed.allow_root))
    {
        refused.push(Request::RunAs(uid, gid));
    }
    for name in asked
        .env_allow
        .iter()
        .filter(|n| !allowed.env_allow.contains(*n))
    {
        refused.push(Request::EnvAllow(name.clone()));
    }
    for (name, value) in &asked.env {
        if !allowed.env.iter().any(|(n, v)| n == name && v == value) {
            refused.push(Request::Env(Box::new((
                name.to_string_lossy().into_owned(),
                value.to_string_lossy().into_owned(),
            ))));
        }
    }
    for path in &asked.sandbox_allow_exec {
        if !allowed.sandbox_allow_exec.iter().any(|g| covers(g, path)) {
            refused.push(Request::SandboxAllowExec(path.clone()));
        }
    }
    for path in &asked.sandbox_allow_read {
        let mut granted = allowed
            .sandbox_allow_read
            .iter()
            .chain(&allowed.sandbox_allow_exec);
        if !granted.any(|g| covers(g, path)) {
            refused.push(Request::SandboxAllowRead(path.clone()));
        }
    }
    refused
}

/// A plugin's world from the operator's `policy`, its grant's `granted` mode and the mode its
/// manifest `asked` (granted): `required` wins, then `off`.
fn world(policy: NamespacesMode, granted: NamespacesMode, asked: NamespacesMode) -> NamespacesMode {
    use NamespacesMode::{Off, Preferred, Required};
    if [policy, granted, asked].contains(&Required) {
        Required
    } else if asked == Off || policy == Off {
        Off
    } else {
        Preferred
    }
}

/// Whether the granted directory `granted` covers `requested`: the same directory or a parent
/// of it, after symbolic links are resolved (lexically normalised when a path does not exist,
/// so `..` cannot climb out of a grant).
fn covers(granted: &Path, requested: &Path) -> bool {
    resolved(requested).starts_with(resolved(granted))
}

fn resolved(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| normalized(path))
}

#[cfg(test)]
mod tests {
    use tether_proto::ValueKind;

    use super::*;
    use crate::catalog::errors::FileKind;

    fn manifest_with(extra: &str) -> Manifest {
        let text = format!(
            "name = \"a\"\ncommand = \"a\"\n{extra}\n[handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\n"
        );
        Manifest::parse(&text, Path::new("/cat/a.toml")).unwrap()
    }

    fn manifest(secrets: &str) -> Manifest {
        manifest_with(&format!("secrets = {secrets}"))
    }

    #[test]
    fn a_request_that_is_not_granted_names_plugin_secret_and_the_grants_line() {
        let grants = Grants::new().secret("a", "x").secret("b", "y");
        grants.check(&manifest("[\"x\"]")).unwrap();
        let err = grants.check(&manifest("[\"x\", \"y\"]")).unwrap_err();
        assert_eq!(
            (err.plugin.as_str(), &err.request, err.value_kind()),
            ("a", &Request::Secret("y".into()), Some(ValueKind::Secret))
        );
        let text = err.to_string();
        assert!(
            text.starts_with("plugin `a` requests `secrets = [\"y\"]` in /cat/a.toml"),
            "{text}"
        );
        assert!(
            text.contains("add `secrets = [\"y\"]` under `[plugins.a]`"),
            "{text}"
        );
    }

    /// `grants` edited as `advice` (a [`NotGranted`] message) says, literally: an entry put
    /// first in the list at the line it names, the line it names replaced, or a line added
    /// under the table (the table appended when there is none).
    fn follow(advice: &str, grants: &str) -> String {
        let todo = advice.split_once("To allow it, ").unwrap().1;
        let todo = todo.split(", or remove").next().unwrap();
        let line_of = |place: &str| place.rsplit(':').next().unwrap().parse::<usize>().unwrap();
        let mut lines: Vec<String> = grants.lines().map(str::to_owned).collect();
        if let Some(rest) = todo.strip_prefix("change `") {
            let (place, value) = rest
                .split_once(" at ")
                .unwrap()
                .1
                .split_once(" to `")
                .unwrap();
            lines[line_of(place) - 1] = value.trim_end_matches('`').to_owned();
        } else if let Some(rest) = todo.strip_prefix("set `") {
            // `NAME = "value"` set in the inline table at the line named: replaced or added.
            let (entry, place) = rest.split_once("` in the `").unwrap();
            let name = entry.split(" = ").next().unwrap();
            let line = &mut lines[line_of(place) - 1];
            let (key, table) = line.split_once('{').unwrap();
            let kept = table
                .trim_end_matches('}')
                .split(',')
                .map(str::trim)
                .filter(|pair| !pair.is_empty() && !pair.starts_with(&format!("{name} =")));
            let pairs: Vec<&str> = std::iter::once(entry).chain(kept).collect();
            *line = format!("{key}{{ {} }}", pairs.join(", "));
        } else if let Some(rest) = todo.strip_prefix("add `") {
            let (value, rest) = rest.split_once("` under `").unwrap();
            let table = rest.split('`').next().unwrap();
            match lines.iter().position(|l| l == table) {
                Some(at) => lines.insert(at + 1, value.to_owned()),
                None => lines.extend([table.to_owned(), value.to_owned()]),
            }
        } else {
            let (entry, list) = todo
                .strip_prefix("add ")
                .unwrap()
                .split_once(" to the `")
                .unwrap();
            let line = &mut lines[line_of(list) - 1];
            let open = line.find('[').unwrap() + 1;
            line.insert_str(open, &format!("{entry}, "));
        }
        lines.join("\n") + "\n"
    }

    #[test]
    fn a_refusal_whose_key_the_grant_already_has_names_its_line_and_following_any_advice_grants_it()
    {
        let file = Path::new("/etc/tether/grants.toml");
        let cases = [
            // (grants file, manifest line, the advice)
            (
                "[plugins.a]\nsecrets = [\"y\"]\n",
                "secrets = [\"x\"]",
                "add \"x\" to the `secrets` list at /etc/tether/grants.toml:2",
            ),
            (
                "[plugins.a]\nsecrets = []\n",
                "secrets = [\"x\"]",
                "add \"x\" to the `secrets` list at /etc/tether/grants.toml:2",
            ),
            (
                "# the operator's\n\n[plugins.b]\nconfig = [\"c\"]\n[plugins.a]\nnetwork = \"host\"\nconfig = [\n  \"c.json\",\n]\n",
                "config = [\"d.json\"]",
                "add \"d.json\" to the `config` list at /etc/tether/grants.toml:7",
            ),
            (
                "[plugins.a]\nenv_allow = [\"HOME\"]\n",
                "env_allow = [\"USER\"]",
                "add \"USER\" to the `env_allow` list at /etc/tether/grants.toml:2",
            ),
            (
                "[plugins.a]\nsandbox_allow_read = [\"/srv/other\"]\n",
                "sandbox_allow_read = [\"/srv/data\"]",
                "add \"/srv/data\" to the `sandbox_allow_read` list at /etc/tether/grants.toml:2",
            ),
            (
                "[plugins.a]\nsandbox = \"best-effort\"\n",
                "sandbox = \"off\"",
                "change `sandbox` at /etc/tether/grants.toml:2 to `sandbox = \"off\"`",
            ),
            (
                "[plugins.a]\nrun_as = \"1000:1000\"\n",
                "run_as = \"65534:65534\"",
                "change `run_as` at /etc/tether/grants.toml:2 to `run_as = \"65534:65534\"`",
            ),
            // `env` is a table: the entry is set in it, whether the name is there or not.
            (
                "[plugins.a]\nenv = { MODE = \"slow\", OTHER = \"1\" }\n",
                "env = { MODE = \"fast\" }",
                "set `MODE = \"fast\"` in the `env` table at /etc/tether/grants.toml:2",
            ),
            (
                "[plugins.a]\nenv = { OTHER = \"1\" }\n",
                "env = { \"A.B\" = \"x\" }",
                "set `\"A.B\" = \"x\"` in the `env` table at /etc/tether/grants.toml:2",
            ),
            // Without the key: the line to add, under the table or with it.
            (
                "[plugins.a]\nnetwork = \"host\"\n",
                "secrets = [\"x\"]",
                "add `secrets = [\"x\"]` under `[plugins.a]` in /etc/tether/grants.toml",
            ),
            (
                "[plugins.b]\nsecrets = [\"x\"]\n",
                "secrets = [\"x\"]",
                "add `secrets = [\"x\"]` under `[plugins.a]` in /etc/tether/grants.toml",
            ),
        ];
        for (grants, asked, advice) in cases {
            let m = manifest_with(asked);
            let err = Grants::parse(grants, file).unwrap().check(&m).unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains(&format!("To allow it, {advice}, or remove")),
                "{grants}: {text}"
            );
            let followed = follow(&text, grants);
            let after = Grants::parse(&followed, file)
                .unwrap_or_else(|e| panic!("following {advice:?} gives:\n{followed}\n{e}"));
            after
                .check(&m)
                .unwrap_or_else(|e| panic!("following {advice:?} gives:\n{followed}\n{e}"));
        }
        let err = Grants::parse("[plugins.a]\nsecrets = []\n", file)
            .unwrap()
            .check(&manifest("[\"x\"]"))
            .unwrap_err();
        assert_eq!(err.remedy, Remedy::Extend { line: 2 });
    }

    #[test]
    fn each_loosening_is_refused_without_its_grant_and_names_the_line_to_add() {
        let file = Path::new("/etc/tether/grants.toml");
        let none = Grants::parse("", file).unwrap();
        for (manifest_line, grants_line) in [
            ("sandbox = \"off\"", "sandbox = \"off\""),
            ("sandbox = \"best-effort\"", "sandbox = \"best-effort\""),
            ("network = \"host\"", "network = \"host\""),
            ("seccomp = \"off\"", "seccomp = \"off\""),
            ("namespaces = \"off\"", "namespaces = \"off\""),
            ("env_allow = [\"HOME\"]", "env_allow = [\"HOME\"]"),
            ("env = { MODE = \"fast\" }", "env = { MODE = \"fast\" }"),
            (
                "env = { \"A.B\" = \"x\\\"y\" }",
                "env = { \"A.B\" = \"x\\\"y\" }",
            ),
            (
                "sandbox_allow_read = [\"/srv/data\"]",
                "sandbox_allow_read = [\"/srv/data\"]",
            ),
            (
                "sandbox_allow_exec = [\"/opt/py\"]",
                "sandbox_allow_exec = [\"/opt/py\"]",
            ),
        ] {
            let m = manifest_with(manifest_line);
            let err = none.check(&m).expect_err(manifest_line);
            assert_eq!(err.request.grants_line(), grants_line);
            let text = err.to_string();
            let add = format!("add `{grants_line}` under `[plugins.a]` in /etc/tether/grants.toml");
            assert!(text.contains(&add), "{text}");
            let granted = Grants::parse(&format!("[plugins.a]\n{grants_line}\n"), file).unwrap();
            granted
                .check(&m)
                .unwrap_or_else(|e| panic!("{manifest_line}: {e}"));
            // Granting it to another plugin grants nothing to this one.
            let other = Grants::parse(&format!("[plugins.b]\n{grants_line}\n"), file).unwrap();
            assert!(other.check(&m).is_err(), "{manifest_line}");
        }
    }

    #[test]
    fn the_confinement_keys_mean_the_same_in_a_manifest_and_in_the_grants_file() {
        let lines = "sandbox = \"best-effort\"\nnetwork = \"host\"\nseccomp = \"off\"\n\
                     namespaces = \"off\"\nenv_allow = [\"HOME\"]\nsandbox_allow_exec = [\"/opt/py\"]\n\
                     sandbox_allow_read = [\"/srv/data\"]";
        let asked = manifest_with(lines).confinement;
        let text = format!("[plugins.a]\n{lines}\n");
        let granted = Grants::parse(&text, Path::new("/etc/tether/grants.toml")).unwrap();
        assert_eq!(granted.plugins["a"].confinement, asked);
        assert_eq!(
            granted.plugins,
            Grants::new().confinement("a", asked.clone()).plugins
        );
        assert!(ungranted(&asked, &asked).is_empty());
        assert_eq!(ungranted(&asked, &Confinement::default()).len(), 7);
    }

    #[test]
    fn a_manifests_run_as_is_granted_only_by_the_same_ids_and_refused_at_its_line() {
        let file = Path::new("/etc/tether/grants.toml");
        let m = manifest_with("run_as = \"65534:65534\"");
        let err = Grants::parse("", file).unwrap().check(&m).unwrap_err();
        assert_eq!(err.request, Request::RunAs(65534, 65534));
        assert_eq!(err.manifest_line, 3);
        let text = err.to_string();
        assert!(
            text.starts_with("plugin `a` requests `run_as = \"65534:65534\"` in /cat/a.toml:3,"),
            "{text}"
        );
        assert!(
            text.contains(
                "add `run_as = \"65534:65534\"` under `[plugins.a]` in /etc/tether/grants.toml"
            ),
            "{text}"
        );
        let same = Grants::parse("[plugins.a]\nrun_as = \"65534:65534\"\n", file).unwrap();
        same.check(&m).unwrap();
        assert_eq!(same.confinement_of(&m).run_as, Some((65534, 65534)));
        let other = Grants::parse("[plugins.a]\nrun_as = \"1000:1000\"\n", file).unwrap();
        assert_eq!(
            other.check(&m).unwrap_err().request,
            Request::RunAs(65534, 65534)
        );
    }

    #[test]
    fn the_operators_run_as_applies_without_a_manifest_asking_and_is_located() {
        let file = Path::new("/etc/tether/grants.toml");
        let grants =
            Grants::parse("[plugins.a]\nsecrets = []\nrun_as = \"4000:4001\"\n", file).unwrap();
        let m = manifest_with("");
        grants.check(&m).unwrap();
        let confinement = grants.confinement_of(&m);
        assert_eq!(
            (confinement.run_as, confinement.allow_root),
            (Some((4000, 4001)), false)
        );
        assert_eq!(
            grants.run_as_place("a").as_deref(),
            Some("/etc/tether/grants.toml:3")
        );
        assert_eq!(grants.run_as_place("b"), None);
        assert_eq!(Grants::new().confinement_of(&m).run_as, None);
        assert_eq!(grants, {
            let mut built = Grants::new().secret("a", "x").run_as("a", 4000, 4001);
            built.plugins.get_mut("a").unwrap().secrets.clear();
            built.file = Some(file.to_owned());
            built.places = [("a".to_owned(), (1, 10))].into();
            built.key_lines = [(
                "a".to_owned(),
                [("secrets".to_owned(), 2), ("run_as".to_owned(), 3)].into(),
            )]
            .into();
            built
        });
    }

    #[test]
    fn root_as_the_plugins_user_needs_allow_root_in_the_grants_file() {
        let file = Path::new("/etc/tether/grants.toml");
        for ids in ["0:0", "0:100", "100:0"] {
            let text = format!("[plugins.a]\nrun_as = \"{ids}\"\n");
            let err = Grants::parse(&text, file).unwrap_err().first().clone();
            assert_eq!(
                (err.line, err.key.as_deref()),
                (2, Some("plugins.a.run_as")),
                "{err}"
            );
            assert!(
                err.message
                    .contains("add `allow_root = true` under `[plugins.a]`"),
                "{err}"
            );
            let allowed = Grants::parse(&format!("{text}allow_root = true\n"), file).unwrap();
            let m = manifest_with(&format!("run_as = \"{ids}\""));
            allowed.check(&m).unwrap();
            assert!(allowed.confinement_of(&m).allow_root);
        }
        // A manifest asking for root: both lines named.
        let err = Grants::new()
            .check(&manifest_with("run_as = \"0:0\""))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("add `run_as = \"0:0\"` and `allow_root = true` under `[plugins.a]`"),
            "{err}"
        );
        // Granted in code without allow_root: still refused.
        let in_code = Grants::new().run_as("a", 0, 0);
        assert!(in_code.check(&manifest_with("run_as = \"0:0\"")).is_err());
        assert!(Grants::parse("[plugins.a]\nrun_as = \"nobody\"\n", file).is_err());
    }

    #[test]
    fn the_operators_namespaces_policy_cannot_be_defeated_by_a_manifest() {
        use NamespacesMode::{Off, Preferred, Required};
        let file = Path::new("/etc/tether/grants.toml");
        let required = Grants::parse(
            "namespaces = \"required\"\n[plugins.a]\nsecrets = []\n",
            file,
        )
        .unwrap();
        assert_eq!(required.namespaces_policy(), Required);
        let off = manifest_with("namespaces = \"off\"");
        let err = required.check(&off).unwrap_err();
        assert_eq!(
            (err.request.clone(), err.remedy),
            (
                Request::Namespaces(Off),
                Remedy::DropIt {
                    policy_line: Some(1)
                }
            )
        );
        let text = err.to_string();
        assert!(text.contains("refuses for every plugin (`namespaces = \"required\"` at /etc/tether/grants.toml:1)"), "{text}");
        assert!(
            text.ends_with("Remove `namespaces` from the manifest"),
            "{text}"
        );
        // Nor by a plugin's grant: in the file an error at its line, in code no effect.
        let err = Grants::parse(
            "namespaces = \"required\"\n[plugins.a]\nnamespaces = \"off\"\n",
            file,
        )
        .unwrap_err()
        .first()
        .clone();
        assert_eq!(
            (err.line, err.key.as_deref()),
            (3, Some("plugins.a.namespaces")),
            "{err}"
        );
        let in_code = Grants::new()
            .confinement("a", Confinement::default().namespaces(Off))
            .namespaces(Required);
        assert!(in_code.check(&off).is_err());
        let plain = manifest_with("");
        assert_eq!(required.confinement_of(&plain).namespaces, Required);
        assert_eq!(
            Grants::new()
                .namespaces(Required)
                .confinement_of(&plain)
                .namespaces,
            Required
        );
        // `off` for every plugin; a manifest may still require a world.
        let all_off = Grants::new().namespaces(Off);
        assert_eq!(all_off.confinement_of(&plain).namespaces, Off);
        let strict = manifest_with("namespaces = \"required\"");
        all_off.check(&strict).unwrap();
        assert_eq!(all_off.confinement_of(&strict).namespaces, Required);
        // A plugin's grant: `required` imposes, `off` only allows.
        let one = Grants::parse("[plugins.a]\nnamespaces = \"required\"\n", file).unwrap();
        assert_eq!(one.confinement_of(&plain).namespaces, Required);
        let allows = Grants::new().confinement("a", Confinement::default().namespaces(Off));
        assert_eq!(allows.confinement_of(&plain).namespaces, Preferred);
        assert_eq!(allows.confinement_of(&off).namespaces, Off);
    }

    #[test]
    fn sandbox_off_grants_best_effort_too_but_not_the_reverse() {
        let off = Grants::new().sandbox("a", SandboxMode::Off);
        off.check(&manifest_with("sandbox = \"best-effort\""))
            .unwrap();
        let best = Grants::new().sandbox("a", SandboxMode::BestEffort);
        let err = best.check(&manifest_with("sandbox = \"off\"")).unwrap_err();
        assert_eq!(err.request, Request::Sandbox(SandboxMode::Off));
    }

    #[test]
    fn a_granted_path_covers_itself_and_what_is_below_it_but_not_a_climb_out() {
        let grants = Grants::new()
            .sandbox_allow_read("a", "/srv/data")
            .sandbox_allow_exec("a", "/opt/py");
        for ok in [
            "sandbox_allow_read = [\"/srv/data\"]",
            "sandbox_allow_read = [\"/srv/data/sub/dir\"]",
            "sandbox_allow_read = [\"/opt/py/lib\"]",
            "sandbox_allow_exec = [\"/opt/py/bin\"]",
        ] {
            grants
                .check(&manifest_with(ok))
                .unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for refused in [
            "sandbox_allow_read = [\"/srv\"]",
            "sandbox_allow_read = [\"/srv/database\"]",
            "sandbox_allow_read = [\"/srv/data/../../etc\"]",
            "sandbox_allow_exec = [\"/srv/data\"]",
        ] {
            assert!(grants.check(&manifest_with(refused)).is_err(), "{refused}");
        }
    }

    #[test]
    fn a_granted_path_is_compared_after_the_manifests_variables_and_symlinks_are_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let m = manifest_with(&format!("sandbox_allow_read = [\"{}\"]", link.display()));
        Grants::new()
            .sandbox_allow_read("a", &real)
            .check(&m)
            .unwrap();
        // A link inside a granted directory that points out of it is not covered.
        let granted = dir.path().join("granted");
        std::fs::create_dir(&granted).unwrap();
        std::os::unix::fs::symlink("/etc", granted.join("out")).unwrap();
        let m = manifest_with(&format!(
            "sandbox_allow_read = [\"{}\"]",
            granted.join("out").display()
        ));
        assert!(
            Grants::new()
                .sandbox_allow_read("a", &granted)
                .check(&m)
                .is_err()
        );
    }

    #[test]
    fn an_env_value_is_granted_only_with_the_very_value_the_grant_names() {
        let m = manifest_with("env = { MODE = \"fast\", LEVEL = \"2\" }");
        let grants = Grants::new().env("a", "MODE", "fast");
        let refused: Vec<_> = grants.refusals(&m).into_iter().map(|r| r.request).collect();
        assert_eq!(
            refused,
            [Request::Env(Box::new(("LEVEL".into(), "2".into())))]
        );
        let other_value = Grants::new()
            .env("a", "MODE", "slow")
            .env("a", "LEVEL", "2");
        let refused: Vec<_> = other_value
            .refusals(&m)
            .into_iter()
            .map(|r| r.request)
            .collect();
        assert_eq!(
            refused,
            [Request::Env(Box::new(("MODE".into(), "fast".into())))]
        );
        let granted = grants.env("a", "LEVEL", "2");
        granted.check(&m).unwrap();
        assert_eq!(
            granted.confinement_of(&m).env,
            [("LEVEL".into(), "2".into()), ("MODE".into(), "fast".into())]
        );
    }

    #[test]
    fn every_refusal_is_listed_for_check() {
        let m = manifest_with(
            "secrets = [\"s\"]\nnetwork = \"host\"\nenv_allow = [\"HOME\", \"USER\"]",
        );
        let keys: Vec<_> = Grants::new()
            .env_allow("a", "USER")
            .refusals(&m)
            .into_iter()
            .map(|r| r.request.key())
            .collect();
        assert_eq!(keys, ["secrets", "network", "env_allow"]);
    }

    #[test]
    fn the_grants_file_equals_the_code_api() {
        let text = "[plugins.a]\nsecrets = [\"x\"]\nconfig = [\"c.json\"]\nnetwork = \"host\"\nseccomp = \"off\"\nsandbox = \"best-effort\"\nenv_allow = [\"HOME\"]\nenv = { MODE = \"fast\" }\nsandbox_allow_read = [\"data\"]\nsandbox_allow_exec = [\"/opt/py\"]\n[plugins.b]\nsecrets = [\"y\"]\n";
        let file = Path::new("/etc/tether/grants.toml");
        let parsed = Grants::parse(text, file).unwrap();
        let mut built = Grants::new()
            .secret("a", "x")
            .config("a", "c.json")
            .network("a", NetworkMode::Host)
            .seccomp("a", SeccompMode::Off)
            .sandbox("a", SandboxMode::BestEffort)
            .env_allow("a", "HOME")
            .env("a", "MODE", "fast")
            .sandbox_allow_read("a", "/etc/tether/data")
            .sandbox_allow_exec("a", "/opt/py")
            .secret("b", "y");
        built.file = Some(file.to_owned());
        built.places = [("a".to_owned(), (1, 10)), ("b".to_owned(), (11, 10))].into();
        built.key_lines = parsed.key_lines.clone();
        assert_eq!(parsed, built);
        assert_eq!(parsed.key_line("a", "sandbox_allow_exec"), Some(10));
        assert_eq!(parsed.key_line("b", "secrets"), Some(12));
        assert_eq!(parsed.key_line("b", "config"), None);
    }

    #[test]
    fn every_unknown_key_of_the_grants_file_is_reported_at_its_line() {
        let text =
            "[plugins.a]\nsecret = [\"x\"]\nnetwork = \"host\"\nnetwrok = \"host\"\n[other]\n";
        let errors = Grants::parse(text, Path::new("/etc/g.toml")).unwrap_err();
        let found: Vec<_> = errors
            .iter()
            .map(|e| (e.line, e.key.as_deref(), e.file_kind))
            .collect();
        assert_eq!(
            found,
            [
                (2, Some("plugins.a.secret"), FileKind::Grants),
                (4, Some("plugins.a.netwrok"), FileKind::Grants),
                (5, Some("other"), FileKind::Grants),
            ],
            "{errors}"
        );
        assert!(
            errors
                .iter()
                .all(|e| e.to_string().ends_with("; fix the grants file"))
        );
    }

    #[test]
    fn a_typo_in_the_grants_file_is_located() {
        let err = Grants::parse("[plugins.a]\nsecret = [\"x\"]\n", Path::new("g.toml"))
            .unwrap_err()
            .first()
            .clone();
        assert_eq!(err.line, 2, "{err}");
        assert!(
            err.message
                .contains("unknown key; expected one of `secrets`"),
            "{err}"
        );
        let err = Grants::parse(
            "[plugins.a]\nnetwork = \"host\"\nnetwrok = \"host\"\n",
            Path::new("g.toml"),
        )
        .unwrap_err()
        .first()
        .clone();
        assert_eq!((err.line, err.column), (3, 1), "{err}");
        let err = Grants::parse(
            "[plugins.a]\n\nnetwork = \"everything\"\n",
            Path::new("g.toml"),
        )
        .unwrap_err()
        .first()
        .clone();
        assert_eq!(err.line, 3, "{err}");
        let err = Grants::parse(
            "[plugins.a]\nenv_allow = [\"OK\",\n  \"A=B\"]\n",
            Path::new("g.toml"),
        )
        .unwrap_err()
        .first()
        .clone();
        assert_eq!(
            (err.line, err.column, err.key.as_deref()),
            (3, 3, Some("plugins.a.env_allow")),
            "{err}"
        );
    }

    #[test]
    fn a_bad_name_in_the_grants_file_is_located_at_its_own_entry_and_asks_to_fix_the_grants_file() {
        let text = "# grants for `k v` and others\n[plugins.kv]\nsecrets = [\"ok\"]\n\n[plugins.b]\nsecrets = [\"x\", \"k v\"]\nconfig = [\"\"]\n";
        let file = Path::new("/etc/tether/grants.toml");
        let err = Grants::parse(text, file).unwrap_err().first().clone();
        assert_eq!(
            (err.line, err.column, err.key.as_deref()),
            (6, 17, Some("plugins.b.secrets")),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with("/etc/tether/grants.toml:6:17: key `plugins.b.secrets`: "),
            "{err}"
        );
        assert!(err.to_string().ends_with("; fix the grants file"), "{err}");
        let err = Grants::parse(&text.replace("\"k v\"", "\"y\""), file)
            .unwrap_err()
            .first()
            .clone();
        assert_eq!(
            (err.line, err.column, err.key.as_deref()),
            (7, 11, Some("plugins.b.config")),
            "an empty name is located too: {err}"
        );
        let err = Grants::parse("[plugins.\"k v\"]\nsecrets = []\n", file)
            .unwrap_err()
            .first()
            .clone();
        assert_eq!(
            (err.line, err.key.as_deref()),
            (1, Some("plugins.\"k v\"")),
            "{err}"
        );
        let err = Grants::parse("[plugins.a]\nsecret = [\"x\"]\n", file)
            .unwrap_err()
            .first()
            .clone();
        assert!(err.to_string().ends_with("; fix the grants file"), "{err}");
    }

    #[test]
    fn a_call_not_granted_names_the_calls_list_the_table_or_the_file_to_add_it_to() {
        let file = Path::new("/etc/tether/grants.toml");
        let text = "[plugins.a]\ncalls = [\"c\"]\n\n[plugins.b]\nsecrets = []\n";
        let grants = Grants::parse(text, file).unwrap();
        assert!(grants.allows_call("a", "c") && !grants.allows_call("a", "b"));
        assert_eq!(
            grants.call_refusal("a", "b"),
            "plugin `a` may not call plugin `b`: not granted; add \"b\" to the `calls` list at /etc/tether/grants.toml:2"
        );
        assert!(
            grants.call_refusal("b", "a").ends_with(
                "add `calls = [\"a\"]` under `[plugins.b]` at /etc/tether/grants.toml:4"
            ),
            "{}",
            grants.call_refusal("b", "a")
        );
        assert!(
            grants
                .call_refusal("x", "a")
                .ends_with("add `[plugins.x]` with `calls = [\"a\"]` to /etc/tether/grants.toml")
        );
        assert!(Grants::new().calls("x", "a").allows_call("x", "a"));
    }
}
