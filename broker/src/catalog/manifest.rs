//! Plugin manifests: one TOML file per plugin describing how to launch and confine it.
//!
//! [`Manifest::parse`] is sans-IO (text in, value or [`CatalogFileError`] out); every error names
//! the file, the line and the key.

use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::catalog::confinement::{PathStyle, RawConfinement};
pub use crate::catalog::errors::{CatalogFileError, CatalogFileErrors, FileKind};
use crate::catalog::keys::{self, Schema};
use crate::catalog::runner::{self, RawGvisor, RawKubernetes, RawRunner, interpreter_hint};
pub use crate::catalog::text::MAX_NAME_LEN;
use crate::catalog::text::{check_name, line_column};
use crate::confine::confinement::Confinement;
use crate::confine::sandbox::Limits;
use crate::launch::interpreted::runtime::Runtime;
use crate::launch::runner::options::Runner;

/// Idle timeout of a plugin whose manifest sets none: stopped after this long unused.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// Restarts after crashes allowed within [`RestartPolicy::window`] before a plugin is
/// reported as crashing repeatedly, when the manifest sets no `restart.max_restarts`.
pub const DEFAULT_MAX_RESTARTS: u32 = 5;

/// First wait before restarting a crashed plugin (doubled after each further crash), when the
/// manifest sets no `restart.initial_backoff`.
pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_millis(100);

/// Longest wait before restarting a crashed plugin, when the manifest sets no
/// `restart.max_backoff`.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(10);

/// A crash older than this no longer counts towards `max_restarts`, when the manifest sets no
/// `restart.window`.
pub const DEFAULT_RESTART_WINDOW: Duration = Duration::from_secs(60);

/// A parsed, checked plugin manifest.
///
/// ```
/// let text = r#"
/// name = "kv"
/// command = "bin/kv-plugin"
/// secrets = ["db-password"]
/// sandbox = "enforce"
/// idle_timeout = "30s"
/// [handshake]
/// cookie_key = "BASIC_PLUGIN"
/// cookie_value = "hello"
/// app_versions = [1]
/// [limits]
/// memory_mib = 256
/// "#;
/// let m = tether_broker::Manifest::parse(text, "/etc/tether/plugins/kv.toml".as_ref())?;
/// assert_eq!(m.name, "kv");
/// assert_eq!(m.command, std::path::Path::new("/etc/tether/plugins/bin/kv-plugin"));
/// assert_eq!(m.secrets, ["db-password"]);
/// assert_eq!(m.confinement.limits.memory_mib, Some(256));
/// # Ok::<(), tether_broker::catalog::CatalogFileErrors>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Manifest {
    /// The plugin's name, unique in a catalog.
    pub name: String,
    /// The manifest file.
    pub file: PathBuf,
    /// The plugin binary: `command` resolved against the manifest's directory.
    pub command: PathBuf,
    /// Command-line arguments.
    pub args: Vec<String>,
    /// Expected SHA-256 of the binary (lower-case hex), checked before every launch.
    pub sha256: Option<String>,
    /// Magic cookie name.
    pub cookie_key: String,
    /// Magic cookie value.
    pub cookie_value: String,
    /// App protocol versions the host offers this plugin.
    pub app_versions: Vec<u32>,
    /// Names of the secrets the plugin asks for.
    pub secrets: Vec<String>,
    /// Names of the config files the plugin asks for.
    pub config: Vec<String>,
    /// What the plugin asks to be allowed: the keys `sandbox`, `network`, `seccomp`,
    /// `namespaces`, `run_as`, `env_allow`, `env` (fixed values: `env = { NAME = "value" }`),
    /// `sandbox_allow_exec`, `sandbox_allow_read` and the table `[limits]`. All but `[limits]` need the operator's grant when they loosen the
    /// default (see [`Grants`](crate::Grants)); what the plugin launches with is
    /// [`Grants::confinement_of`](crate::Grants::confinement_of) this. `sandbox_allow_*` paths
    /// are resolved when the manifest is parsed; see [`Manifest::parse`]. The host-only parts
    /// (`plugin_ids`, `allow_root`, the network mechanism) stay at their defaults.
    pub confinement: Confinement,
    /// Where the plugin runs (manifest key `runner`: `"process"`, the default, `"gvisor"` or
    /// `"kubernetes"`). The table `[gvisor]` sets the sandbox's cgroup limits `memory_mib` and
    /// `cpu_millis`, see [`GvisorOptions::memory_mib`](crate::launch::GvisorOptions::memory_mib)
    /// and [`GvisorOptions::cpu_millis`](crate::launch::GvisorOptions::cpu_millis). The table
    /// `[kubernetes]` describes the plugin's Pod: `image` (required, pinned by digest),
    /// `memory_limit` and `cpu_limit` (Kubernetes quantities) and `runtime_class`; with it,
    /// `command` is the program's absolute path in the image. The Pod runner needs the
    /// operator's grant (`runner = "kubernetes"` in the grants file, see
    /// [`Grants::kubernetes_runner`](crate::Grants::kubernetes_runner)) and the cargo feature
    /// `kubernetes`; the host's part of it (namespace, cluster, owner…) is
    /// [`SupervisorBuilder::kubernetes`](crate::SupervisorBuilder::kubernetes).
    pub runner: Runner,
    /// Which interpreter runs it (`runtime = "auto" | "native" | "python" | "node"`, default
    /// `auto`): see [`PluginClientBuilder::runtime`](crate::PluginClientBuilder::runtime).
    /// Needs no grant: it allows reading the interpreter's install and the plugin's own
    /// sources, never writing, and never a directory broader than two levels.
    pub runtime: Runtime,
    /// Stopped after this long unused.
    pub idle_timeout: Duration,
    /// What happens when it crashes.
    pub restart: RestartPolicy,
    /// Where the `name` value is in [`file`](Self::file): 1-based line and column.
    pub(crate) name_at: (usize, usize),
    /// The line of each top-level key in [`file`](Self::file) (a refused request names it).
    pub(crate) key_lines: std::collections::BTreeMap<String, usize>,
}

/// When and how fast a crashed plugin is started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RestartPolicy {
    /// Crashes within [`window`](Self::window) after which the plugin is not restarted.
    pub max_restarts: u32,
    /// Wait before the first restart; doubled for each further crash.
    pub initial_backoff: Duration,
    /// Upper bound of the wait.
    pub max_backoff: Duration,
    /// How long a crash counts.
    pub window: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        Self {
            max_restarts: DEFAULT_MAX_RESTARTS,
            initial_backoff: DEFAULT_INITIAL_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
            window: DEFAULT_RESTART_WINDOW,
        }
    }
}

impl RestartPolicy {
    /// The wait before restarting after `recent_crashes` crashes (1 = the first).
    #[must_use]
    pub fn backoff(&self, recent_crashes: u32) -> Duration {
        let doublings = recent_crashes.saturating_sub(1).min(31);
        self.initial_backoff
            .saturating_mul(1 << doublings)
            .min(self.max_backoff)
    }
}

/// A manifest's own keys; the confinement keys it shares with the grants file are read by a
/// second pass into [`RawConfinement`] (unknown keys are found before either, by
/// [`keys::check`]).
#[derive(Deserialize)]
struct RawManifest {
    name: Spanned<String>,
    command: Spanned<String>,
    #[serde(default)]
    args: Vec<Spanned<String>>,
    sha256: Option<Spanned<String>>,
    handshake: RawHandshake,
    #[serde(default)]
    secrets: Vec<Spanned<String>>,
    #[serde(default)]
    config: Vec<Spanned<String>>,
    #[serde(default)]
    limits: Limits,
    runner: Option<Spanned<RawRunner>>,
    gvisor: Option<Spanned<RawGvisor>>,
    kubernetes: Option<Spanned<RawKubernetes>>,
    #[serde(default)]
    runtime: Runtime,
    idle_timeout: Option<Spanned<String>>,
    #[serde(default)]
    restart: RawRestart,
}

/// The keys a manifest may have: those of the structs it is deserialized into.
fn schema() -> Schema {
    Schema::of::<RawManifest>()
        .and::<RawConfinement>()
        .table("handshake", Schema::of::<RawHandshake>())
        .table("limits", Schema::of::<Limits>())
        .table("restart", Schema::of::<RawRestart>())
        .table("gvisor", Schema::of::<RawGvisor>())
        .table("kubernetes", Schema::of::<RawKubernetes>())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHandshake {
    cookie_key: Spanned<String>,
    cookie_value: Spanned<String>,
    #[serde(default = "default_versions")]
    app_versions: Spanned<Vec<u32>>,
}

fn default_versions() -> Spanned<Vec<u32>> {
    Spanned::new(0..0, vec![1])
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRestart {
    max_restarts: Option<u32>,
    initial_backoff: Option<Spanned<String>>,
    max_backoff: Option<Spanned<String>>,
    window: Option<Spanned<String>>,
}

impl Manifest {
    /// Parses and checks the manifest `text` read from `file` (whose directory `command` is
    /// relative to).
    ///
    /// # Errors
    /// [`CatalogFileErrors`]: every unknown key (all of them, each located), or else the first
    /// other problem, each naming file, line and key: bad types, an absolute
    /// `command` or one with `..`, NUL bytes, bad or duplicate names, malformed durations or
    /// hashes, and sandbox allowances that name an unset environment variable.
    ///
    /// # Sandbox allowances
    /// `sandbox_allow_exec` and `sandbox_allow_read` list directories the confined plugin may
    /// also read and execute, or only read (they map to
    /// [`PluginClientBuilder::sandbox_allow_exec`](crate::PluginClientBuilder::sandbox_allow_exec)
    /// and `sandbox_allow_read`). An entry is an absolute path or one relative to the
    /// manifest's directory (`..` is allowed: these only widen reading and executing, never
    /// writing). Because interpreter locations differ between machines, an entry may use the
    /// host's environment: `${NAME}` (an error when `NAME` is unset or empty) or
    /// `${NAME:-default}` (the default then), e.g.
    /// `sandbox_allow_exec = ["${PYENV_ROOT:-/usr}"]`. Variables are expanded once, when the
    /// manifest is parsed; a path that does not exist makes the launch fail with a sandbox
    /// error naming it.
    ///
    /// # What needs the operator's grant
    /// A manifest is written by the plugin's author. `sandbox = "best-effort" | "off"`,
    /// `sandbox_allow_exec`, `sandbox_allow_read`, `env_allow`, `env` (each name with its
    /// value), `network = "host"`, `seccomp = "off"`, `namespaces = "off"` and `run_as = "UID:GID"` (the user a root
    /// host runs the plugin as: two numeric ids) take effect only when the grants file allows
    /// them for this plugin
    /// (see [`Grants`](crate::Grants)), like `secrets` and `config`; otherwise the plugin does
    /// not start.
    pub fn parse(text: &str, file: &Path) -> Result<Self, CatalogFileErrors> {
        let document = keys::document(text, file, FileKind::Manifest)?;
        let declared = keys::string(&document, "name");
        keys::check(&document, &schema(), file, text, FileKind::Manifest)
            .map_err(|e| e.declared_by(declared))?;
        let mut manifest = Self::parse_known(text, file)
            .map_err(|e| CatalogFileErrors::from(e).declared_by(declared))?;
        manifest.key_lines = keys::lines(&document, text);
        Ok(manifest)
    }

    /// [`parse`](Self::parse) of a file whose keys are all known: the first problem.
    fn parse_known(text: &str, file: &Path) -> Result<Self, CatalogFileError> {
        let located = |e: toml::de::Error| {
            let offset = e.span().map_or(0, |s| s.start);
            CatalogFileError::at(file, text, offset, None, e.message().trim().to_owned())
        };
        let raw: RawManifest = toml::from_str(text).map_err(located)?;
        let raw_confinement: RawConfinement = toml::from_str(text).map_err(located)?;
        let check = Checker { file, text };

        check.no_nul(&raw.name, "name")?;
        check.name(&raw.name, "name")?;
        check.no_nul(&raw.command, "command")?;
        let runner = runner::choose(
            raw.runner.as_ref(),
            raw.gvisor.as_ref(),
            raw.kubernetes.as_ref(),
        )
        .map_err(|(offset, key, why)| {
            CatalogFileError::at(file, text, offset, Some(key.to_owned()), why)
        })?;
        let dir = file.parent().unwrap_or(Path::new("."));
        let command = if runner.name() == "kubernetes" {
            check.path_in_image(&raw.command, raw.sha256.as_ref())?
        } else {
            dir.join(check.relative_path(&raw.command, "command")?)
        };
        if raw.command.get_ref().split('/').count() == 1 {
            // A bare name would be looked up on no PATH: say how interpreters are run.
            if let Some(hint) = interpreter_hint(raw.command.get_ref()) {
                return Err(check.error(&raw.command, "command", hint));
            }
        }
        for arg in &raw.args {
            check.no_nul(arg, "args")?;
        }
        let sha256 = match &raw.sha256 {
            Some(hash) => Some(check.sha256(hash)?),
            None => None,
        };
        check.no_nul(&raw.handshake.cookie_key, "handshake.cookie_key")?;
        check.no_nul(&raw.handshake.cookie_value, "handshake.cookie_value")?;
        if raw.handshake.cookie_key.get_ref().is_empty()
            || raw.handshake.cookie_key.get_ref().contains('=')
        {
            return Err(check.error(
                &raw.handshake.cookie_key,
                "handshake.cookie_key",
                "must be a non-empty environment variable name without `=`",
            ));
        }
        if raw.handshake.app_versions.get_ref().is_empty() {
            return Err(check.error(
                &raw.handshake.app_versions,
                "handshake.app_versions",
                "must list at least one version",
            ));
        }
        let secrets = check.names(&raw.secrets, "secrets")?;
        let config = check.names(&raw.config, "config")?;
        check.unique(raw_confinement.env_allow(), "env_allow")?;
        let confinement = raw_confinement
            .read(dir, PathStyle::Expanded, |value, key, why| {
                check.error(value, key, why)
            })?
            .limits(raw.limits);
        let idle_timeout = match &raw.idle_timeout {
            Some(d) => check.duration(d, "idle_timeout")?,
            None => DEFAULT_IDLE_TIMEOUT,
        };
        let defaults = RestartPolicy::default();
        let restart = RestartPolicy {
            max_restarts: raw.restart.max_restarts.unwrap_or(defaults.max_restarts),
            initial_backoff: check.opt_duration(
                raw.restart.initial_backoff.as_ref(),
                "restart.initial_backoff",
                defaults.initial_backoff,
            )?,
            max_backoff: check.opt_duration(
                raw.restart.max_backoff.as_ref(),
                "restart.max_backoff",
                defaults.max_backoff,
            )?,
            window: check.opt_duration(
                raw.restart.window.as_ref(),
                "restart.window",
                defaults.window,
            )?,
        };
        let name_at = line_column(text, raw.name.span().start);
        Ok(Self {
            name_at,
            key_lines: std::collections::BTreeMap::new(),
            name: raw.name.into_inner(),
            file: file.to_owned(),
            command,
            args: raw.args.into_iter().map(Spanned::into_inner).collect(),
            sha256,
            cookie_key: raw.handshake.cookie_key.into_inner(),
            cookie_value: raw.handshake.cookie_value.into_inner(),
            app_versions: raw.handshake.app_versions.into_inner(),
            secrets,
            config,
            confinement,
            runner,
            runtime: raw.runtime,
            idle_timeout,
            restart,
        })
    }

    /// The manifest's directory: `command` is relative to it.
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.file.parent().unwrap_or(Path::new("."))
    }

    /// The 1-based line of the top-level `key` in [`file`](Self::file), when the manifest
    /// sets it: an error about the key's value names the place to fix as `file:line`.
    ///
    /// ```
    /// let text = "name = \"kv\"\ncommand = \"bin/kv\"\n[handshake]\ncookie_key = \"K\"\ncookie_value = \"V\"\n";
    /// let m = tether_broker::Manifest::parse(text, "/cat/kv.toml".as_ref())?;
    /// assert_eq!(m.line_of("command"), Some(2));
    /// assert_eq!(m.line_of("args"), None);
    /// # Ok::<(), tether_broker::catalog::CatalogFileErrors>(())
    /// ```
    #[must_use]
    pub fn line_of(&self, key: &str) -> Option<usize> {
        self.key_lines.get(key).copied()
    }
}

/// Checks of single values, turning failures into located errors.
struct Checker<'a> {
    file: &'a Path,
    text: &'a str,
}

impl Checker<'_> {
    fn error<T>(
        &self,
        value: &Spanned<T>,
        key: &str,
        message: impl fmt::Display,
    ) -> CatalogFileError {
        CatalogFileError::at(
            self.file,
            self.text,
            value.span().start,
            Some(key.to_owned()),
            message.to_string(),
        )
    }

    fn no_nul(&self, value: &Spanned<String>, key: &str) -> Result<(), CatalogFileError> {
        if value.get_ref().contains('\0') {
            return Err(self.error(value, key, "contains a NUL byte"));
        }
        Ok(())
    }

    fn name(&self, value: &Spanned<String>, key: &str) -> Result<(), CatalogFileError> {
        check_name(value.get_ref()).map_err(|why| self.error(value, key, why))
    }

    fn names(
        &self,
        values: &[Spanned<String>],
        key: &str,
    ) -> Result<Vec<String>, CatalogFileError> {
        for value in values {
            self.no_nul(value, key)?;
            self.name(value, key)?;
        }
        self.unique(values, key)
    }

    fn unique(
        &self,
        values: &[Spanned<String>],
        key: &str,
    ) -> Result<Vec<String>, CatalogFileError> {
        let mut seen = std::collections::BTreeSet::new();
        for value in values {
            self.no_nul(value, key)?;
            if !seen.insert(value.get_ref().as_str()) {
                return Err(self.error(
                    value,
                    key,
                    format!("`{}` is listed twice", value.get_ref()),
                ));
            }
        }
        Ok(values.iter().map(|v| v.get_ref().clone()).collect())
    }

    /// The Pod runner's `command`: the program's absolute path in the image, without `..`;
    /// `sha256` is refused (the image's digest pins the program).
    fn path_in_image(
        &self,
        value: &Spanned<String>,
        sha256: Option<&Spanned<String>>,
    ) -> Result<PathBuf, CatalogFileError> {
        if let Some(hash) = sha256 {
            return Err(self.error(
                hash,
                "sha256",
                "pins a program on this host, but the Pod runner runs the one in the image, \
                 which `kubernetes.image`'s digest pins: remove `sha256`",
            ));
        }
        let path = Path::new(value.get_ref());
        if !path.is_absolute() || path.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(self.error(
                value,
                "command",
                "with the Pod runner is the program's absolute path in the image, without \
                 `..` (e.g. \"/plugin/kv\")",
            ));
        }
        Ok(path.to_owned())
    }

    fn relative_path(
        &self,
        value: &Spanned<String>,
        key: &str,
    ) -> Result<PathBuf, CatalogFileError> {
        let path = Path::new(value.get_ref());
        if value.get_ref().is_empty() {
            return Err(self.error(value, key, "is empty"));
        }
        if path.is_absolute() {
            return Err(self.error(
                value,
                key,
                "is an absolute path; it must be relative to the manifest's directory (put the \
                 program, or a link to it, in the catalog, e.g. `bin/NAME`)",
            ));
        }
        if path.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(self.error(
                value,
                key,
                "contains `..`; it must stay inside the manifest's directory",
            ));
        }
        Ok(path.to_owned())
    }

    fn sha256(&self, value: &Spanned<String>) -> Result<String, CatalogFileError> {
        let hex = value.get_ref();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(self.error(value, "sha256", "must be 64 hexadecimal digits"));
        }
        Ok(hex.to_ascii_lowercase())
    }

    fn duration(&self, value: &Spanned<String>, key: &str) -> Result<Duration, CatalogFileError> {
        humantime::parse_duration(value.get_ref()).map_err(|e| {
            self.error(
                value,
                key,
                format!("{e}; write a duration such as \"30s\" or \"5m\""),
            )
        })
    }

    fn opt_duration(
        &self,
        value: Option<&Spanned<String>>,
        key: &str,
        default: Duration,
    ) -> Result<Duration, CatalogFileError> {
        value.map_or(Ok(default), |v| self.duration(v, key))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::catalog::text::{expand_env, toml_string};
    use crate::confine::network::NetworkMode;
    use crate::confine::sandbox::SandboxMode;
    use crate::confine::seccomp::SeccompMode;

    #[test]
    fn environment_variables_in_sandbox_paths_are_expanded_with_defaults() {
        let env = |name: &str| (name == "ROOT").then(|| "/opt/py".to_owned());
        assert_eq!(expand_env("${ROOT}/lib", env).unwrap(), "/opt/py/lib");
        assert_eq!(expand_env("${NOPE:-/usr}", env).unwrap(), "/usr");
        assert_eq!(expand_env("${ROOT:-/usr}", env).unwrap(), "/opt/py");
        assert_eq!(expand_env("plain/path", env).unwrap(), "plain/path");
        let unset = expand_env("${NOPE}/bin", env).unwrap_err();
        assert!(unset.contains("`NOPE`, which is not set"), "{unset}");
        for bad in ["$ROOT", "${ROOT", "${1X}", "${}", "a$"] {
            assert!(expand_env(bad, env).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_interpreter_as_the_command_is_refused_saying_to_link_the_script_into_the_catalog() {
        for interpreter in ["node", "python3", "python3.11", "python"] {
            let text = GOOD.replace(
                "command = \"bin/kv\"",
                &format!("command = \"{interpreter}\""),
            );
            let err = parse(&text).unwrap_err().to_string();
            assert!(
                err.contains(&format!("names the interpreter `{interpreter}`")),
                "{err}"
            );
            assert!(err.contains("`#!` line"), "{err}");
        }
        // Other bare names are programs in the catalog's directory, as before.
        let text = GOOD.replace("command = \"bin/kv\"", "command = \"kv-plugin\"");
        assert!(parse(&text).is_ok());
        let text = GOOD.replace("command = \"bin/kv\"", "command = \"python3x\"");
        assert!(parse(&text).is_ok());
    }

    #[test]
    fn sandbox_allowances_are_absolute_or_relative_to_the_manifest() {
        let text = GOOD.replace(
            "sandbox = \"best-effort\"\n",
            "sandbox = \"best-effort\"\nsandbox_allow_exec = [\"/opt/node\", \"${TETHER_TEST_SURELY_UNSET:-/usr/local}\"]\nsandbox_allow_read = [\"../src\"]\n",
        );
        let m = parse(&text).unwrap();
        assert_eq!(
            m.confinement.sandbox_allow_exec,
            [Path::new("/opt/node"), Path::new("/usr/local")]
        );
        assert_eq!(m.confinement.sandbox_allow_read, [Path::new("/cat/../src")]);
    }

    #[test]
    fn a_sandbox_allowance_with_an_unset_variable_is_refused_with_its_line() {
        let text = GOOD.replace(
            "sandbox = \"best-effort\"\n",
            "sandbox = \"best-effort\"\nsandbox_allow_exec = [\"${TETHER_TEST_SURELY_UNSET}/bin\"]\n",
        );
        let err = parse(&text).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("sandbox_allow_exec"), "{err}");
        assert!(err.message.contains("TETHER_TEST_SURELY_UNSET"), "{err}");
        assert_eq!(err.line, 8, "{err}");
    }

    const GOOD: &str = r#"name = "kv"
command = "bin/kv"
args = ["--verbose"]
secrets = ["a", "b"]
config = ["settings.json"]
env_allow = ["HOME"]
sandbox = "best-effort"
idle_timeout = "2s"

[handshake]
cookie_key = "BASIC_PLUGIN"
cookie_value = "hello"
app_versions = [1, 2]

[limits]
memory_mib = 64
cpu_seconds = 10
open_files = 128
processes = 16

[restart]
max_restarts = 3
initial_backoff = "50ms"
"#;

    /// The first problem, as most tests look at one.
    fn parse(text: &str) -> Result<Manifest, CatalogFileError> {
        Manifest::parse(text, Path::new("/cat/kv.toml")).map_err(|e| e.first().clone())
    }

    #[test]
    fn a_complete_manifest_is_parsed_with_paths_relative_to_its_directory() {
        let m = parse(GOOD).unwrap();
        assert_eq!(m.name, "kv");
        assert_eq!(m.command, Path::new("/cat/bin/kv"));
        assert_eq!(m.args, ["--verbose"]);
        assert_eq!(m.secrets, ["a", "b"]);
        assert_eq!(m.config, ["settings.json"]);
        assert_eq!(m.confinement.env_allow, ["HOME"]);
        assert_eq!(m.confinement.sandbox, SandboxMode::BestEffort);
        assert_eq!(m.idle_timeout, Duration::from_secs(2));
        assert_eq!(m.app_versions, [1, 2]);
        assert_eq!(m.confinement.limits.memory_mib, Some(64));
        assert_eq!(m.confinement.limits.processes, Some(16));
        assert_eq!(m.restart.max_restarts, 3);
        assert_eq!(m.restart.initial_backoff, Duration::from_millis(50));
        assert_eq!(m.restart.max_backoff, DEFAULT_MAX_BACKOFF);
        assert_eq!(
            (m.confinement.network, m.confinement.seccomp, m.runtime),
            (NetworkMode::None, SeccompMode::Default, Runtime::Auto)
        );
    }

    #[test]
    fn network_seccomp_and_runtime_are_read_and_misspelt_values_located() {
        let m = parse(&GOOD.replace(
            "idle_timeout",
            "network = \"host\"\nseccomp = \"off\"\nruntime = \"python\"\nidle_timeout",
        ))
        .unwrap();
        assert_eq!(
            (m.confinement.network, m.confinement.seccomp, m.runtime),
            (NetworkMode::Host, SeccompMode::Off, Runtime::Python)
        );
        let err =
            parse(&GOOD.replace("idle_timeout", "runtime = \"ruby\"\nidle_timeout")).unwrap_err();
        assert_eq!(
            (err.line, err.key.as_deref()),
            (8, Some("runtime")),
            "{err}"
        );
    }

    #[test]
    fn a_gvisor_table_sets_the_sandbox_limits_and_is_refused_for_the_process_runner() {
        let m = parse(&format!(
            "runner = \"gvisor\"\n{GOOD}\n[gvisor]\nmemory_mib = 256\ncpu_millis = 500\n"
        ))
        .unwrap();
        let Runner::Gvisor(options) = &m.runner else {
            panic!("{:?}", m.runner)
        };
        assert_eq!(
            (options.memory_mib, options.cpu_millis),
            (Some(256), Some(500))
        );
        let err = parse(&format!("{GOOD}\n[gvisor]\nmemory_mib = 256\n")).unwrap_err();
        assert!(
            err.to_string().contains("runs under the process runner"),
            "{err}"
        );
        let err = parse(&format!(
            "runner = \"gvisor\"\n{GOOD}\n[gvisor]\ncpu_millis = 0\n"
        ))
        .unwrap_err();
        assert!(err.to_string().contains("gvisor.cpu_millis"), "{err}");
        let err = parse(&format!(
            "runner = \"gvisor\"\n{GOOD}\n[gvisor]\nmemory = 1\n"
        ))
        .unwrap_err();
        assert!(err.to_string().contains("memory"), "{err}");
    }

    #[test]
    fn a_manifest_chooses_the_gvisor_runner_and_the_process_runner_is_the_default() {
        assert_eq!(parse(GOOD).unwrap().runner, Runner::Process);
        let m = parse(&format!("runner = \"gvisor\"\n{GOOD}")).unwrap();
        assert_eq!(m.runner.name(), "gvisor");
        assert!(parse(&format!("runner = \"docker\"\n{GOOD}")).is_err());
    }

    #[test]
    fn the_sandbox_is_enforced_unless_the_manifest_says_otherwise() {
        let m = parse(&GOOD.replace("sandbox = \"best-effort\"\n", "")).unwrap();
        assert_eq!(m.confinement.sandbox, SandboxMode::Enforce);
    }

    #[test]
    fn an_unknown_key_is_named_with_its_line() {
        let err = parse(&GOOD.replace("[limits]\n", "[limits]\nmemroy_mib = 3\n")).unwrap_err();
        assert_eq!(err.line, 16, "{err}");
        assert_eq!(err.key.as_deref(), Some("limits.memroy_mib"), "{err}");
        assert!(
            err.message
                .starts_with("unknown key; expected one of `memory_mib`"),
            "{err}"
        );
        assert!(err.to_string().starts_with("/cat/kv.toml:16:"), "{err}");
    }

    #[test]
    fn a_value_of_the_wrong_type_is_named_with_its_line() {
        let err = parse(&GOOD.replace("memory_mib = 64", "memory_mib = \"lots\"")).unwrap_err();
        assert_eq!(err.line, 16, "{err}");
        assert_eq!(err.key.as_deref(), Some("limits.memory_mib"), "{err}");
    }

    #[test]
    fn absolute_and_escaping_commands_are_refused() {
        let err = parse(&GOOD.replace("bin/kv", "/usr/bin/kv")).unwrap_err();
        assert_eq!((err.line, err.key.as_deref()), (2, Some("command")));
        assert!(err.message.contains("absolute"), "{err}");
        let err = parse(&GOOD.replace("bin/kv", "bin/../../kv")).unwrap_err();
        assert!(err.message.contains(".."), "{err}");
    }

    #[test]
    fn nul_bytes_are_refused() {
        let err = parse(&GOOD.replace("--verbose", "--ver\\u0000bose")).unwrap_err();
        assert_eq!((err.line, err.key.as_deref()), (3, Some("args")));
        assert!(err.message.contains("NUL"), "{err}");
    }

    #[test]
    fn duplicate_and_unsafe_secret_names_are_refused() {
        let err = parse(&GOOD.replace("[\"a\", \"b\"]", "[\"a\", \"a\"]")).unwrap_err();
        assert_eq!((err.line, err.key.as_deref()), (4, Some("secrets")));
        assert!(err.message.contains("twice"), "{err}");
        let err = parse(&GOOD.replace("[\"a\", \"b\"]", "[\"../etc/shadow\"]")).unwrap_err();
        assert!(err.message.contains("not a valid name"), "{err}");
    }

    #[test]
    fn a_bad_duration_and_a_bad_hash_are_explained() {
        let err = parse(&GOOD.replace("\"2s\"", "\"soon\"")).unwrap_err();
        assert_eq!((err.line, err.key.as_deref()), (8, Some("idle_timeout")));
        let err = parse(&GOOD.replace("args", "sha256 = \"abc\"\nargs")).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("sha256"));
        assert!(err.message.contains("64 hexadecimal"), "{err}");
    }

    #[test]
    fn fixed_env_values_are_read_and_protocol_names_refused_at_their_line() {
        let with = |env: &str| GOOD.replace("env_allow", &format!("{env}\nenv_allow"));
        let m = parse(&with(
            "env = { VAULT_PLUGIN_AUTOMTLS_ENABLED = \"true\", B = \"x=y\" }",
        ))
        .unwrap();
        assert_eq!(
            m.confinement.env,
            [
                ("B".into(), "x=y".into()),
                ("VAULT_PLUGIN_AUTOMTLS_ENABLED".into(), "true".into())
            ]
        );
        for (env, why) in [
            ("env = { PLUGIN_MIN_PORT = \"1\" }", "set by the host"),
            ("env = { TMPDIR = \"/x\" }", "set by the host"),
            (
                "env = { \"A=B\" = \"1\" }",
                "not an environment variable name",
            ),
            ("env = { \"\" = \"1\" }", "not an environment variable name"),
            ("env = { A = \"x\\u0000\" }", "NUL"),
            ("env = { A = 1 }", "string"),
        ] {
            let err = parse(&with(env)).unwrap_err();
            assert_eq!(
                (err.line, err.key.as_deref()),
                (6, Some("env")),
                "{env}: {err}"
            );
            assert!(err.message.contains(why), "{env}: {err}");
        }
    }

    #[test]
    fn backoff_doubles_up_to_its_limit() {
        let policy = RestartPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
            ..RestartPolicy::default()
        };
        let waits: Vec<_> = (1..=4).map(|n| policy.backoff(n).as_millis()).collect();
        assert_eq!(waits, [100, 200, 350, 350]);
    }

    /// The parts of a valid manifest the property tests vary.
    #[derive(Debug, Clone)]
    struct Spec {
        name: String,
        command: String,
        args: Vec<String>,
        secrets: Vec<String>,
        env_allow: Vec<String>,
        cookie_value: String,
        app_versions: Vec<u32>,
        memory_mib: Option<u64>,
        max_restarts: Option<u32>,
    }

    fn toml_list(items: &[String]) -> String {
        let quoted: Vec<String> = items.iter().map(|s| toml_string(s)).collect();
        format!("[{}]", quoted.join(", "))
    }

    /// The top-level lines, then the tables.
    fn encode(spec: &Spec) -> (Vec<String>, String) {
        let top = vec![
            format!("name = {}", toml_string(&spec.name)),
            format!("command = {}", toml_string(&spec.command)),
            format!("args = {}", toml_list(&spec.args)),
            format!("secrets = {}", toml_list(&spec.secrets)),
            format!("env_allow = {}", toml_list(&spec.env_allow)),
        ];
        let versions: Vec<String> = spec.app_versions.iter().map(u32::to_string).collect();
        let mut tables = format!(
            "\n[handshake]\ncookie_key = \"K\"\ncookie_value = {}\napp_versions = [{}]\n",
            toml_string(&spec.cookie_value),
            versions.join(", ")
        );
        if let Some(mib) = spec.memory_mib {
            tables.push_str(&format!("\n[limits]\nmemory_mib = {mib}\n"));
        }
        if let Some(n) = spec.max_restarts {
            tables.push_str(&format!("\n[restart]\nmax_restarts = {n}\n"));
        }
        (top, tables)
    }

    fn text(top: &[String], tables: &str) -> String {
        format!("{}\n{tables}", top.join("\n"))
    }

    fn arb_spec() -> impl Strategy<Value = Spec> {
        let name = "[a-z][a-z0-9_-]{0,20}";
        (
            (
                name,
                "[a-z][a-z0-9_-]{0,10}(/[a-z0-9_-][a-z0-9_.-]{0,9}){0,3}",
            ),
            proptest::collection::vec("[^\u{0}]{0,20}", 0..4),
            proptest::collection::btree_set(name, 0..4),
            proptest::collection::btree_set("[A-Z_][A-Z0-9_]{0,10}", 0..3),
            "[^\u{0}]{0,30}",
            proptest::collection::vec(any::<u32>(), 1..4),
            proptest::option::of(any::<u64>().prop_map(|n| n >> 1)),
            proptest::option::of(any::<u32>()),
        )
            .prop_map(
                |(
                    (name, command),
                    args,
                    secrets,
                    env_allow,
                    cookie_value,
                    app_versions,
                    memory_mib,
                    max_restarts,
                )| Spec {
                    name,
                    command,
                    args,
                    secrets: secrets.into_iter().collect(),
                    env_allow: env_allow.into_iter().collect(),
                    cookie_value,
                    app_versions,
                    memory_mib,
                    max_restarts,
                },
            )
    }

    /// Top-level entries that are each wrong in their own way.
    fn arb_bad_line() -> impl Strategy<Value = (&'static str, &'static str)> {
        prop_oneof![
            Just(("unknown_key = 1", "unknown key")),
            Just(("sha256 = \"abc\"", "64 hexadecimal")),
            Just(("idle_timeout = \"soon\"", "")),
            Just(("config = [\"a\", \"a\"]", "twice")),
            Just(("config = [\"../etc/shadow\"]", "not a valid name")),
            Just(("sandbox = \"sometimes\"", "")),
        ]
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics_and_errors_point_into_the_file(
            text in prop_oneof![".{0,400}", "[a-z_\\[\\]=\" \n0-9.,/\\\\]{0,400}"],
        ) {
            if let Err(err) = parse(&text) {
                prop_assert_eq!(&err.file, Path::new("/cat/kv.toml"));
                prop_assert!(err.line >= 1 && err.line <= text.lines().count() + 1, "{}", err);
                prop_assert!(err.column >= 1, "{}", err);
                prop_assert!(err.to_string().starts_with("/cat/kv.toml:"), "{}", err);
            }
        }

        #[test]
        fn encoded_manifests_parse_back_to_what_was_encoded(spec in arb_spec()) {
            let (top, tables) = encode(&spec);
            let text = text(&top, &tables);
            let m = parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
            prop_assert_eq!(&m.name, &spec.name);
            prop_assert_eq!(m.command, Path::new("/cat").join(&spec.command));
            prop_assert_eq!(&m.args, &spec.args);
            prop_assert_eq!(&m.secrets, &spec.secrets);
            prop_assert_eq!(&m.confinement.env_allow, &spec.env_allow);
            prop_assert_eq!(&m.cookie_value, &spec.cookie_value);
            prop_assert_eq!(&m.app_versions, &spec.app_versions);
            prop_assert_eq!(m.confinement.limits.memory_mib, spec.memory_mib);
            prop_assert_eq!(
                m.restart.max_restarts,
                spec.max_restarts.unwrap_or(DEFAULT_MAX_RESTARTS)
            );
        }

        #[test]
        fn a_bad_entry_anywhere_is_reported_at_its_line(
            spec in arb_spec(),
            (bad, says) in arb_bad_line(),
            at in 0_usize..=5,
        ) {
            let (mut top, tables) = encode(&spec);
            top.insert(at, bad.to_owned());
            let text = text(&top, &tables);
            let err = parse(&text).expect_err(&text);
            prop_assert_eq!(err.line, at + 1, "{}\n{}", err, text);
            prop_assert!(err.message.contains(says), "{}", err);
            let prefix = format!("/cat/kv.toml:{}:", at + 1);
            prop_assert!(err.to_string().starts_with(&prefix), "{}", err);
        }

        #[test]
        fn an_absolute_escaping_or_nul_command_is_refused_at_its_line(
            spec in arb_spec(),
            command in prop_oneof![
                "/[a-z]{1,10}",
                "([a-z]{1,5}/){0,2}\\.\\./[a-z]{1,5}",
                "[a-z]{1,5}\u{0}[a-z]{0,5}",
            ],
        ) {
            let (mut top, tables) = encode(&spec);
            top[1] = format!("command = {}", toml_string(&command));
            let err = parse(&text(&top, &tables)).expect_err(&command);
            prop_assert_eq!((err.line, err.key.as_deref()), (2, Some("command")), "{}", err);
        }
    }
}
