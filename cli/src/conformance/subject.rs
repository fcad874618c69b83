//! The plugin under test: how to start it by hand and through `tether_broker`, and the
//! timeouts the checks use.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tether_broker::{HandshakeConfig, PluginClient, PluginClientBuilder, SandboxMode, Timeouts};

use crate::catalog_origin::Origin;
use crate::error::CliError;
use crate::installation::Installation;
use crate::target::{Choice, parse_command, parse_cookie};

use crate::args::{ConformanceArgs, GivenArgs};
use crate::given;
use crate::host_stub::HostStub;

/// The app protocol version the checks offer first without `--app-version` (go-plugin's
/// examples speak 1); a plugin that answers another is then checked with its own.
pub(crate) const DEFAULT_APP_VERSION: u32 = 1;

/// The plugin, as given by `--cmd`/`--cookie` or `--catalog DIR NAME`.
#[derive(Debug)]
pub(crate) struct Subject {
    /// How the report names it.
    pub(crate) name: String,
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
    pub(crate) cookie_key: String,
    pub(crate) cookie_value: String,
    /// The app protocol versions the plugin is expected to support (offered by the checks).
    pub(crate) app_versions: Vec<u32>,
    /// Whether `app_versions` is the default (no `--app-version`, no catalog): the checks
    /// then adopt the version the plugin announces.
    pub(crate) versions_from_plugin: bool,
    /// The working directory of every launch (a fresh temporary one: example plugins keep
    /// their data in it).
    pub(crate) current_dir: Option<PathBuf>,
    pub(crate) start_timeout: Duration,
    pub(crate) grace: Duration,
    pub(crate) host_death_timeout: Duration,
    /// What to change when the plugin's program cannot be started at all: `--cmd`, or the
    /// manifest's `command` at its `file:line`.
    pub(crate) start_remedy: String,
    /// What every launch is given (`--secret`, `--config`, `--env`, `--host-proto`), read
    /// and checked before anything starts.
    given: GivenArgs,
    /// `--env`'s values, which the hand-started launches set too.
    pub(crate) env: Vec<(String, String)>,
    /// The host services of `--host-proto`, served to every launch, recording its calls.
    pub(crate) host_stub: Option<HostStub>,
    /// `-H`: the metadata of every call the checks make.
    pub(crate) metadata: tonic::metadata::MetadataMap,
    /// `--call`, `--data` and `--call-time`: the call that exercises the plugin.
    pub(crate) call: Option<UserCall>,
    catalog: Option<(Installation, String)>,
    _work: tempfile::TempDir,
}

/// The call of `--call` that exercises the plugin.
#[derive(Debug)]
pub(crate) struct UserCall {
    /// `SERVICE/METHOD`.
    pub(crate) method: String,
    /// The request, as JSON.
    pub(crate) json: String,
    /// How long it may take.
    pub(crate) timeout: Duration,
}

impl Subject {
    pub(crate) fn from_args(args: &ConformanceArgs) -> Result<Self, CliError> {
        let work = tempfile::tempdir().map_err(|e| CliError::BadCommand {
            cmd: String::new(),
            reason: format!("cannot make a temporary working directory: {e}"),
        })?;
        let mut start_remedy = "give --cmd a program that exists and is executable".to_owned();
        let (name, program, words, (cookie_key, cookie_value), app_versions, catalog) =
            match args.which.choice()? {
                Choice::Catalog { dir, plugin } => {
                    let install = Installation::load_dir(dir, Origin::Flag, &args.which.install)?;
                    let m = install.manifest(plugin)?.clone();
                    // A program that is nowhere: every place searched, as `call` says it.
                    install.check_binary(plugin)?;
                    start_remedy = command_remedy(&m);
                    (
                        format!("{plugin} (catalog {})", dir.display()),
                        m.command,
                        m.args,
                        (m.cookie_key, m.cookie_value),
                        m.app_versions,
                        Some((install, plugin.to_owned())),
                    )
                }
                Choice::Command { cmd, cookie } => {
                    let (program, words) = parse_command(cmd)?;
                    let (key, value) = parse_cookie(cookie)?;
                    // The launches run in a temporary working directory (plugins such as the
                    // examples keep data in theirs): relative paths of the user's (`./plugin`,
                    // `python3 plugin.py`) are made absolute.
                    (
                        cmd.to_owned(),
                        PathBuf::from(absolute_if_relative_path(&program)),
                        words.iter().map(|w| absolute_if_relative_path(w)).collect(),
                        (key.to_owned(), value.to_owned()),
                        if args.app_versions.is_empty() {
                            vec![DEFAULT_APP_VERSION]
                        } else {
                            args.app_versions.clone()
                        },
                        None,
                    )
                }
            };
        // Bad flags cost no process: every given value is read before the first launch.
        given::delivery(&args.given)?;
        let env = given::env(&args.given)?
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect();
        let host_stub = given::host_stub(&args.given)?;
        let metadata = given::metadata(&args.headers)?;
        let call = match &args.call {
            Some(method) => {
                crate::descriptors::split_method(method)?;
                Some(UserCall {
                    method: method.clone(),
                    json: args.data.clone(),
                    timeout: args.call_time.into(),
                })
            }
            None => None,
        };
        Ok(Self {
            name,
            program,
            args: words,
            cookie_key,
            cookie_value,
            app_versions,
            versions_from_plugin: args.app_versions.is_empty() && args.which.catalog.is_none(),
            current_dir: Some(work.path().to_owned()),
            start_timeout: args.start_timeout.into(),
            grace: args.grace.into(),
            host_death_timeout: args.host_death_timeout.into(),
            start_remedy,
            given: args.given.clone(),
            env,
            host_stub,
            metadata,
            call,
            catalog,
            _work: work,
        })
    }

    /// A `tether_broker` launch of the plugin: the manifest's (sandbox, grants) for a catalog
    /// plugin; for `--cmd`, unconfined (confinement is not part of the protocol; `tether call`
    /// runs it confined).
    pub(crate) fn host_builder(&self) -> Result<PluginClientBuilder<HandshakeConfig>, String> {
        self.host_builder_with(true)
    }

    /// Whether `--secret` was given (to a `--cmd` plugin).
    pub(crate) fn has_secrets(&self) -> bool {
        !self.given.secret_files.is_empty()
    }

    /// The `--host-proto` files.
    pub(crate) fn host_protos(&self) -> &[PathBuf] {
        &self.given.host_protos
    }

    /// [`host_builder`](Self::host_builder), with or without `--secret`'s secrets.
    pub(crate) fn host_builder_with(
        &self,
        secrets: bool,
    ) -> Result<PluginClientBuilder<HandshakeConfig>, String> {
        let mut given = self.given.clone();
        if !secrets {
            given.secret_files.clear();
        }
        let mut builder = match &self.catalog {
            Some((install, plugin)) => {
                let m = install.manifest(plugin).map_err(|e| e.to_string())?;
                tether_broker::supervisor::launch(
                    m,
                    &install.grants,
                    &install.secrets,
                    &install.config,
                )
                .map_err(|e| e.to_string())?
            }
            None => PluginClient::builder(&self.program)
                .args(&self.args)
                .handshake(
                    HandshakeConfig::new(&self.cookie_key, &self.cookie_value)
                        .app_versions(self.app_versions.clone()),
                )
                // A bare command's files may be anywhere: conformance checks its protocol,
                // not its confinement (no sandbox, no world, whose root holds only what was
                // granted, and a root host's user: it writes where the operator runs it).
                .confinement(
                    tether_broker::confine::Confinement::default()
                        .sandbox(SandboxMode::Off)
                        .namespaces(tether_broker::confine::NamespacesMode::Off)
                        .allow_root(true),
                ),
        };
        if self.catalog.is_none() {
            if let Some(delivery) = given::delivery(&given).map_err(|e| e.to_string())? {
                builder = builder.deliver(delivery);
            }
            for (name, value) in &self.env {
                builder = builder.env(name, value);
            }
        }
        if let Some(stub) = &self.host_stub {
            builder = builder.host_routes(stub.routes());
        }
        let builder = builder.timeouts(
            Timeouts::default()
                .start(self.start_timeout)
                .shutdown_grace(self.grace),
        );
        Ok(match &self.current_dir {
            Some(dir) if self.catalog.is_none() => builder.current_dir(dir),
            _ => builder,
        })
    }
}

/// What to change when a catalog plugin's program cannot be started: its manifest's
/// `command`, at its `file:line`.
fn command_remedy(m: &tether_broker::Manifest) -> String {
    let at = crate::check::command_at(m);
    format!(
        "make {} an executable program (build or install it there), or fix `command` at {at} (a path relative to the manifest's directory)",
        m.command.display()
    )
}

/// `word` made absolute against the current directory when it is a relative path to an
/// existing file or names one with a `/`; else unchanged (a program looked up in `PATH`, an
/// option).
fn absolute_if_relative_path(word: &str) -> String {
    let path = Path::new(word);
    let is_path = path.components().count() > 1 || path.is_file();
    if path.is_absolute() || !is_path || word.starts_with('-') {
        return word.to_owned();
    }
    std::env::current_dir()
        .map(|cwd| cwd.join(path).to_string_lossy().into_owned())
        .unwrap_or_else(|_| word.to_owned())
}
