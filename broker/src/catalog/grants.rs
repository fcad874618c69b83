//! The host's policy: which plugin may receive which secrets and config files, and which
//! loosenings of its confinement its manifest may ask for.
//!
//! A manifest is written by the plugin's author; the grants file by the operator. Everything a
//! manifest asks for beyond the defaults — a secret, a config file, `sandbox = "off"`,
//! `network = "host"`, `seccomp = "off"`, `namespaces = "off"`, an `env_allow` name, a
//! `sandbox_allow_*` path — takes effect only when granted here, and a plugin asking for more does not start
//! ([`NotGranted`] names the grants line to add).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::catalog::confinement::{PathStyle, RawConfinement};
use crate::catalog::errors::{CatalogFileError, CatalogFileErrors, FileKind};
use crate::catalog::keys::{self, Schema};
use crate::catalog::manifest::Manifest;
use crate::catalog::request::{NotGranted, Request};
use crate::catalog::runner::RawRunner;
use crate::catalog::text::{check_name, line_column, toml_key};
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
/// sandbox_allow_read = ["/srv/kv-data"] # may read below these (and their subdirectories)
/// calls = ["db"]                        # may call catalog plugin `db` through the host
/// # sandbox = "best-effort" | "off"      # may run with less file-system confinement
/// # seccomp = "off"                      # may run without the system-call filter
/// # namespaces = "off"                   # may run without a world of its own
/// # sandbox_allow_exec = ["/opt/tools"]  # may read and execute below these
/// # runner = "kubernetes"                # may run in a Pod (its values in a Secret there)
/// ```
/// A granted path covers the manifest's path when it is the same directory or a parent of it,
/// both taken after symbolic links are resolved (and the manifest's `${VAR}`s expanded);
/// relative grant paths are relative to the grants file's directory. `sandbox = "off"` also
/// grants `best-effort`; a `sandbox_allow_exec` path also covers a `sandbox_allow_read` below it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    plugins: BTreeMap<String, Grant>,
    file: Option<PathBuf>,
    /// Where each plugin's table is in [`file`](Self::file): line and column of its name.
    places: BTreeMap<String, (usize, usize)>,
    /// Where each plugin's `calls` list is in [`file`](Self::file): the line of its first name.
    calls_places: BTreeMap<String, usize>,
}

/// One plugin's grant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Grant {
    secrets: BTreeSet<String>,
    config: BTreeSet<String>,
    /// The catalog plugins it may call through the host.
    calls: BTreeSet<String>,
    /// Whether its manifest may choose the Pod runner (`runner = "kubernetes"`).
    kubernetes_runner: bool,
    /// The loosest confinement its manifest may ask for: the loosest sandbox mode, the
    /// network and seccomp modes, the variables and the directories (with those below them).
    confinement: Confinement,
}

/// One plugin's own keys as written, with the place of every name, so that errors point at
/// it; its confinement keys are read by a second pass ([`GrantsConfinement`]).
#[derive(Deserialize)]
struct RawGrant {
    #[serde(default)]
    secrets: Vec<Spanned<String>>,
    #[serde(default)]
    config: Vec<Spanned<String>>,
    #[serde(default)]
    calls: Vec<Spanned<String>>,
    runner: Option<Spanned<RawRunner>>,
}

#[derive(Deserialize)]
struct GrantsFile {
    #[serde(default)]
    plugins: BTreeMap<Spanned<String>, RawGrant>,
}

/// The grants file's second pass: each plugin's confinement keys.
#[derive(Deserialize)]
struct GrantsConfinement {
    #[serde(default)]
    plugins: BTreeMap<String, RawConfinement>,
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

    /// Lets `plugin`'s manifest ask for anything up to `allowed` (its sandbox, network and
    /// seccomp modes, variables and directories; the host-only parts and `limits` are not
    /// compared), replacing what was granted before — the value the manifest's
    /// [`confinement`](crate::Manifest::confinement) is checked against.
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

    /// Lets `plugin`'s manifest pass the host's variable `name` (`env_allow`).
    #[must_use]
    pub fn env_allow(mut self, plugin: impl Into<String>, name: impl Into<String>) -> Self {
        self.grant(plugin).confinement.env_allow.push(name.into());
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
        let advice = match (self.calls_places.get(caller), self.places.get(caller)) {
            (Some(line), _) => format!("add {callee:?} to the `calls` list at {file}:{line}"),
            (None, Some((line, _))) => {
                format!("add `calls = [{callee:?}]` under `{table}` at {file}:{line}")
            }
            (None, None) => format!("add `{table}` with `calls = [{callee:?}]` to {file}"),
        };
        format!("plugin `{caller}` may not call plugin `{callee}`: not granted; {advice}")
    }

    /// The grants file these grants were read from, if any.
    #[must_use]
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The plugins granted anything (a table `[plugins.NAME]`, even an empty one, or a builder
    /// call), by name, each with where its name is in the grants [`file`](Self::file) (line
    /// and column) when it was read from one. `tether check` warns about those that are not
    /// in the catalog.
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
    /// config, sandbox, network, seccomp, namespaces, env_allow, sandbox_allow_exec,
    /// sandbox_allow_read, runner; each with the line of its key in the manifest.
    /// Paths are compared after resolving symbolic links, so this reads the file system.
    #[must_use]
    pub fn refusals(&self, manifest: &Manifest) -> Vec<NotGranted> {
        let empty = Grant::default();
        let grant = self.plugins.get(&manifest.name).unwrap_or(&empty);
        let mut refused = Vec::new();
        let mut refuse = |request: Request| {
            refused.push(NotGranted {
                plugin: manifest.name.clone(),
                manifest_line: manifest.key_lines.get(request.key()).copied(),
                request,
                manifest: manifest.file.clone(),
                grants_file: self.file.clone(),
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
        for request in ungranted(&manifest.confinement, &grant.confinement) {
            refuse(request);
        }
        if manifest.runner.name() == "kubernetes" && !grant.kubernetes_runner {
            refuse(Request::Runner("kubernetes"));
        }
        refused
    }

    /// Parses a grants file's `text` (`file` names it in errors, and relative paths are
    /// relative to its directory).
    ///
    /// # Errors
    /// [`CatalogFileErrors`] (with [`FileKind::Grants`]), each naming file, line, column and key:
    /// every unknown key, or else the first bad type or value or invalid name.
    pub fn parse(text: &str, file: &Path) -> Result<Self, CatalogFileErrors> {
        let document = keys::document(text, file, FileKind::Grants)?;
        let grant = Schema::of::<RawGrant>().and::<RawConfinement>();
        let schema = Schema::of::<GrantsFile>().table("plugins", Schema::any_key(grant));
        keys::check(&document, &schema, file, text, FileKind::Grants)?;
        Ok(Self::parse_known(text, file)?)
    }

    /// [`parse`](Self::parse) of a file whose keys are all known: the first problem.
    fn parse_known(text: &str, file: &Path) -> Result<Self, CatalogFileError> {
        let error = |offset, key: Option<String>, message: String| {
            let mut e = CatalogFileError::at(file, text, offset, key, message);
            e.file_kind = FileKind::Grants;
            e
        };
        let located = |e: toml::de::Error| {
            let offset = e.span().map_or(0, |s| s.start);
            error(offset, None, e.message().trim().to_owned())
        };
        let parsed: GrantsFile = toml::from_str(text).map_err(located)?;
        let mut confinements = toml::from_str::<GrantsConfinement>(text)
            .map_err(located)?
            .plugins;
        let dir = file.parent().unwrap_or(Path::new("."));
        let mut plugins = BTreeMap::new();
        let mut places = BTreeMap::new();
        let mut calls_places = BTreeMap::new();
        for (plugin, raw) in parsed.plugins {
            places.insert(
                plugin.get_ref().clone(),
                line_column(text, plugin.span().start),
            );
            let table = format!("plugins.{}", toml_key(plugin.get_ref()));
            let at = |value: &Spanned<String>, key: &str, why: String| {
                error(value.span().start, Some(format!("{table}.{key}")), why)
            };
            check_name(plugin.get_ref())
                .map_err(|why| error(plugin.span().start, Some(table.clone()), why))?;
            let mut grant = Grant::default();
            if let Some(runner) = &raw.runner {
                if *runner.get_ref() != RawRunner::Kubernetes {
                    return Err(error(
                        runner.span().start,
                        Some(format!("{table}.runner")),
                        format!(
                            "the {} runner needs no grant; only `runner = \"kubernetes\"` does",
                            runner.get_ref().name()
                        ),
                    ));
                }
                grant.kubernetes_runner = true;
            }
            if let Some(first) = raw.calls.first() {
                calls_places.insert(
                    plugin.get_ref().clone(),
                    line_column(text, first.span().start).0,
                );
            }
            for (key, names, into) in [
                ("secrets", &raw.secrets, &mut grant.secrets),
                ("config", &raw.config, &mut grant.config),
                ("calls", &raw.calls, &mut grant.calls),
            ] {
                for name in names {
                    check_name(name.get_ref()).map_err(|why| at(name, key, why))?;
                    into.insert(name.get_ref().clone());
                }
            }
            grant.confinement = confinements
                .remove(plugin.get_ref())
                .unwrap_or_default()
                .read(dir, PathStyle::Literal, at)?;
            plugins.insert(plugin.into_inner(), grant);
        }
        Ok(Self {
            plugins,
            file: Some(file.to_owned()),
            places,
            calls_places,
        })
    }

    /// Reads and parses the grants file at `path`.
    ///
    /// # Errors
    /// As [`parse`](Self::parse), or when the file cannot be read.
    pub fn load(path: &Path) -> Result<Self, CatalogFileErrors> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            CatalogFileErrors::from(CatalogFileError::whole_file(
                path,
                format!("cannot read: {e}"),
            ))
            .of_kind(FileKind::Grants)
        })?;
        Self::parse(&text, path)
    }
}

/// What `asked` loosens beyond the default confinement that `allowed` does not cover, in
/// manifest-key order: sandbox, network, seccomp, namespaces, env_allow, sandbox_allow_exec,
/// sandbox_allow_read. `sandbox = "off"` covers `best-effort`; a directory covers itself and
/// what is below it; an exec directory covers reading too. The host-only parts (`run_as`, the
/// network mechanism, `env_allow_defaults`) are not compared, as no manifest sets them; nor are
/// `limits`, which a manifest sets without a grant.
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
    for name in asked
        .env_allow
        .iter()
        .filter(|n| !allowed.env_allow.contains(*n))
    {
        refused.push(Request::EnvAllow(name.clone()));
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
        let text = "[plugins.a]\nsecrets = [\"x\"]\nconfig = [\"c.json\"]\nnetwork = \"host\"\nseccomp = \"off\"\nsandbox = \"best-effort\"\nenv_allow = [\"HOME\"]\nsandbox_allow_read = [\"data\"]\nsandbox_allow_exec = [\"/opt/py\"]\n[plugins.b]\nsecrets = [\"y\"]\n";
        let file = Path::new("/etc/tether/grants.toml");
        let parsed = Grants::parse(text, file).unwrap();
        let mut built = Grants::new()
            .secret("a", "x")
            .config("a", "c.json")
            .network("a", NetworkMode::Host)
            .seccomp("a", SeccompMode::Off)
            .sandbox("a", SandboxMode::BestEffort)
            .env_allow("a", "HOME")
            .sandbox_allow_read("a", "/etc/tether/data")
            .sandbox_allow_exec("a", "/opt/py")
            .secret("b", "y");
        built.file = Some(file.to_owned());
        built.places = [("a".to_owned(), (1, 10)), ("b".to_owned(), (10, 10))].into();
        assert_eq!(parsed, built);
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
