//! The launch plan: everything about one launch that can be decided without touching the
//! system. From the settings, the handshake, the host's environment, the private and delivered
//! directories and the TLS identity it computes the plugin's environment, its sandbox rules,
//! what the janitor must clean up and its working directory. Pure: unit-tested without
//! processes; the stages in [`stages`](super::stages) do the IO.
//!
//! The working directory is always one the host chose for the plugin: the configured
//! [`current_dir`](crate::PluginClientBuilder::current_dir) (an explicit grant), else the
//! private directory. The host's own working directory is never granted: it is used only to
//! resolve a relative program path, which would otherwise be looked up in the plugin's
//! directory.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use rustls_pki_types::CertificateDer;
use tether_proto::env::LaunchEnv;

use crate::confine::reachable::Paths;
use crate::launch::env::{self, PluginEnv};
use crate::launch::interpreted::runtime::ResolvedRuntime;
use crate::launch::settings::{HandshakeConfig, Settings};

/// What a launch needs from the world, gathered before planning.
#[derive(Debug)]
pub(crate) struct PlanInputs<'a> {
    /// The host's environment (only allowed names pass).
    pub(crate) host_env: Vec<(OsString, OsString)>,
    /// The per-launch private directory (socket, `TMPDIR`).
    pub(crate) private_dir: &'a Path,
    /// The delivered secrets/config, when anything was granted.
    pub(crate) delivered: Option<Delivered<'a>>,
    /// The host's certificate for AutoMTLS; `None` in plaintext.
    pub(crate) client_cert: Option<CertificateDer<'static>>,
    /// The host's working directory, when it has one: a relative program path is resolved
    /// against it (never granted to the plugin).
    pub(crate) host_cwd: Option<PathBuf>,
    /// Whether the plugin runs in a world: then `private_dir` and `delivered` are the
    /// plugin's view of its world's own tmpfs, which is neither a host path to allow nor one
    /// for the janitor.
    pub(crate) in_world: bool,
    /// The launching span's W3C trace context (`TRACEPARENT`, `TRACESTATE`), when one is
    /// recorded: the plugin's start-up continues the host's trace (unless the launch's
    /// [`Telemetry::trace_context`](crate::launch::Telemetry::trace_context) is off).
    pub(crate) trace: Vec<(&'static str, String)>,
}

/// Where the delivered files of one launch are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Delivered<'a> {
    /// The directory holding `secrets/` and `config/` (read-only for the plugin, cleaned up by
    /// the janitor).
    pub(crate) dir: &'a Path,
    /// Its `secrets/`, when secrets were delivered.
    pub(crate) secrets: Option<&'a Path>,
    /// Its `config/`, when config files were delivered.
    pub(crate) config: Option<&'a Path>,
}

/// The plan of one launch.
#[derive(Debug)]
pub(crate) struct LaunchPlan {
    /// The plugin's complete environment.
    pub(crate) env: PluginEnv,
    /// The file-system rules of its sandbox, besides the system paths and the binary's
    /// directory (known only once the program is resolved: [`LaunchPlan::allow_program`]).
    pub(crate) paths: Paths,
    /// The directories the janitor removes if the host dies.
    pub(crate) janitor_dirs: Vec<PathBuf>,
    /// The directory the plugin starts in: the configured one, else the private directory.
    pub(crate) working_dir: PathBuf,
    /// The program to execute: the configured one, made absolute against the host's working
    /// directory when it is a relative path (the plugin starts in another directory); a bare
    /// name is left for the `PATH` lookup (done by the start stage, which may look at files).
    pub(crate) program: PathBuf,
    /// Its `argv[0]`: the configured program, or the real interpreter of a resolved runtime
    /// ([`LaunchPlan::allow_runtime`]).
    pub(crate) argv0: PathBuf,
    /// Its arguments.
    pub(crate) args: Vec<OsString>,
}

impl LaunchPlan {
    /// Plans a launch with `settings` and `handshake` in the world described by `inputs`.
    pub(crate) fn new(
        settings: &Settings,
        handshake: &HandshakeConfig,
        inputs: PlanInputs<'_>,
    ) -> Self {
        let mut launch_env = LaunchEnv::new(handshake.cookie.clone());
        launch_env.app_versions = handshake.app_versions.clone();
        launch_env.ports.min = settings.port_range.0;
        launch_env.ports.max = settings.port_range.1;
        launch_env.client_cert = inputs.client_cert;
        // go-plugin ≥ 1.5 creates its socket in PLUGIN_UNIX_SOCKET_DIR, older ones (1.0.1:
        // `ioutil.TempFile("", "plugin")`) in the temporary directory: both are private.
        launch_env.unix_socket_dir = Some(inputs.private_dir.to_owned());
        launch_env.tmp_dir = Some(inputs.private_dir.to_owned());
        launch_env.multiplex = settings.multiplex.then_some(true);
        launch_env.secrets_dir = inputs.delivered.and_then(|d| d.secrets).map(Path::to_owned);
        launch_env.config_dir = inputs.delivered.and_then(|d| d.config).map(Path::to_owned);
        // Announced either way, so that a plugin's `host_services()` fails at once when there
        // are none instead of waiting for an announcement that will not come.
        launch_env.host_services = Some(settings.host_services.is_some());
        let mut protocol_vars = launch_env.to_vars();
        if settings.telemetry.trace_context {
            protocol_vars.extend(inputs.trace.into_iter().map(|(k, v)| (k.into(), v.into())));
        }
        let env = env::build_env(
            inputs.host_env,
            env::allowed_names(&settings.confinement),
            &settings.confinement.env,
            protocol_vars,
            &handshake.cookie.key,
        );

        let mut paths = Paths::default();
        paths
            .exec
            .extend(settings.confinement.sandbox_allow_exec.iter().cloned());
        paths
            .read
            .extend(settings.confinement.sandbox_allow_read.iter().cloned());
        paths
            .granted
            .extend(paths.exec.iter().chain(&paths.read).cloned());
        let mut janitor_dirs = Vec::new();
        if !inputs.in_world {
            janitor_dirs.push(inputs.private_dir.to_owned());
            if let Some(d) = &inputs.delivered {
                paths.read.push(d.dir.to_owned());
                janitor_dirs.push(d.dir.to_owned());
            }
            paths.read_write.push(inputs.private_dir.to_owned());
        }
        // Its working directory: the configured one (an explicit grant), else the private
        // directory. Never the host's.
        // Absolute, as the program: a plugin in a world starts from its own root, where a
        // path relative to the host's directory reaches nothing.
        let working_dir = match (&settings.current_dir, &inputs.host_cwd) {
            (Some(dir), Some(cwd)) if dir.is_relative() => {
                let dir = against(cwd, dir);
                paths.read_write.push(dir.clone());
                dir
            }
            (Some(dir), _) => {
                paths.read_write.push(dir.clone());
                dir.clone()
            }
            (None, _) => inputs.private_dir.to_owned(),
        };
        let program = match &inputs.host_cwd {
            Some(cwd)
                if settings.program.is_relative() && settings.program.components().count() > 1 =>
            {
                against(cwd, &settings.program)
            }
            _ => settings.program.clone(),
        };
        Self {
            env,
            paths,
            janitor_dirs,
            working_dir,
            program,
            argv0: settings.program.clone(),
            args: settings.args.clone(),
        }
    }

    /// [`janitor_dirs`](Self::janitor_dirs) as the janitor takes them.
    pub(crate) fn janitor_paths(&self) -> Vec<&Path> {
        self.janitor_dirs.iter().map(PathBuf::as_path).collect()
    }

    /// Runs the plugin on the real interpreter of `runtime` (its `argv[0]` too, so that a
    /// virtualenv finds its `pyvenv.cfg`), and lets it read and execute the interpreter's
    /// prefixes and read its import directories and the script's project.
    pub(crate) fn allow_runtime(&mut self, runtime: &ResolvedRuntime) {
        self.program.clone_from(&runtime.program);
        self.argv0.clone_from(&runtime.program);
        self.args.clone_from(&runtime.args);
        self.paths.exec.extend(runtime.read_exec.iter().cloned());
        self.paths.read.extend(runtime.read.iter().cloned());
    }

    /// The plugin's `PATH`, where a bare program name is looked up.
    pub(crate) fn path_var(&self) -> Option<&OsString> {
        self.env.vars.get(std::ffi::OsStr::new("PATH"))
    }

    /// Lets the plugin read and execute the directory of its resolved binary.
    pub(crate) fn allow_program(&mut self, binary_dir: PathBuf) {
        self.paths.exec.insert(0, binary_dir);
    }
}

/// `program` (relative) made absolute against the host's working directory `cwd`, its leading
/// `.` and `..` taken away against `cwd`: exact, as the working directory has no symbolic
/// link in it (`getcwd`), and needed where the plugin does not start in `cwd` (its world has
/// no `cwd/..` to walk through).
pub(crate) fn against(cwd: &Path, program: &Path) -> PathBuf {
    use std::path::Component;
    let mut dir = cwd.to_path_buf();
    let mut rest = program.components();
    loop {
        let before = rest.clone();
        match rest.next() {
            Some(Component::CurDir) => {}
            Some(Component::ParentDir) => {
                dir.pop();
            }
            _ => return dir.join(before.as_path()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::*;
    use crate::PluginClientBuilder;

    fn settings(builder: PluginClientBuilder) -> Settings {
        builder.settings
    }

    fn inputs<'a>(private_dir: &'a Path, delivered: Option<Delivered<'a>>) -> PlanInputs<'a> {
        PlanInputs {
            host_env: vec![
                ("PATH".into(), "/usr/bin".into()),
                ("HOME".into(), "/root".into()),
                ("AWS_SECRET_ACCESS_KEY".into(), "hunter2".into()),
            ],
            private_dir,
            delivered,
            client_cert: Some(CertificateDer::from(vec![1, 2, 3])),
            host_cwd: Some("/home/operator".into()),
            in_world: false,
            trace: vec![],
        }
    }

    #[test]
    fn the_launching_spans_trace_context_reaches_the_plugin_and_a_hosts_own_traceparent_does_not() {
        let dir = Path::new("/run/p");
        let mut inputs = inputs(dir, None);
        inputs
            .host_env
            .push(("TRACEPARENT".into(), "00-host-own".into()));
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        inputs.trace = vec![("TRACEPARENT", parent.to_owned())];
        let plan = LaunchPlan::new(
            &settings(PluginClientBuilder::new("/opt/p/plugin")),
            &HandshakeConfig::new("COOKIE", "v"),
            inputs,
        );
        assert_eq!(
            plan.env.vars.get(OsStr::new("TRACEPARENT")).unwrap(),
            parent
        );
        assert!(!plan.env.vars.contains_key(OsStr::new("TRACESTATE")));
    }

    #[test]
    fn a_launch_told_to_send_no_trace_context_gives_the_plugin_no_traceparent() {
        let dir = Path::new("/run/p");
        let mut inputs = inputs(dir, None);
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        inputs.trace = vec![("TRACEPARENT", parent.to_owned())];
        let builder = PluginClientBuilder::new("/opt/p/plugin")
            .telemetry(crate::launch::Telemetry::default().trace_context(false));
        let plan = LaunchPlan::new(
            &settings(builder),
            &HandshakeConfig::new("COOKIE", "v"),
            inputs,
        );
        assert!(!plan.env.vars.contains_key(OsStr::new("TRACEPARENT")));
    }

    #[test]
    fn the_plan_passes_only_allowed_host_variables_and_the_protocols() {
        let handshake = HandshakeConfig::new("COOKIE", "v").app_versions([1, 2]);
        let plan = LaunchPlan::new(
            &settings(PluginClientBuilder::new("/opt/p/plugin")),
            &handshake,
            inputs(Path::new("/tmp/tether-x"), None),
        );
        let vars = &plan.env.vars;
        assert_eq!(vars.get(OsStr::new("PATH")).unwrap(), "/usr/bin");
        assert!(!vars.contains_key(OsStr::new("HOME")));
        assert!(!vars.contains_key(OsStr::new("AWS_SECRET_ACCESS_KEY")));
        assert_eq!(vars.get(OsStr::new("COOKIE")).unwrap(), "v");
        assert_eq!(
            vars.get(OsStr::new("PLUGIN_PROTOCOL_VERSIONS")).unwrap(),
            "1,2"
        );
        assert!(
            vars.get(OsStr::new("PLUGIN_CLIENT_CERT"))
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        assert_eq!(
            vars.get(OsStr::new("PLUGIN_UNIX_SOCKET_DIR")).unwrap(),
            "/tmp/tether-x"
        );
        assert_eq!(vars.get(OsStr::new("TMPDIR")).unwrap(), "/tmp/tether-x");
        assert!(!vars.contains_key(OsStr::new("TETHER_SECRETS_DIR")));
        assert_eq!(plan.path_var().unwrap(), "/usr/bin");
    }

    #[test]
    fn delivered_files_are_announced_readable_and_left_to_the_janitor() {
        let delivered = Delivered {
            dir: Path::new("/dev/shm/tether-delivery-1"),
            secrets: Some(Path::new("/dev/shm/tether-delivery-1/secrets")),
            config: None,
        };
        let plan = LaunchPlan::new(
            &settings(PluginClientBuilder::new("p")),
            &HandshakeConfig::new("K", "V"),
            inputs(Path::new("/tmp/tether-x"), Some(delivered)),
        );
        assert_eq!(
            plan.env.vars.get(OsStr::new("TETHER_SECRETS_DIR")).unwrap(),
            "/dev/shm/tether-delivery-1/secrets"
        );
        assert!(!plan.env.vars.contains_key(OsStr::new("TETHER_CONFIG_DIR")));
        assert!(
            plan.paths
                .read
                .contains(&PathBuf::from("/dev/shm/tether-delivery-1"))
        );
        assert_eq!(
            plan.janitor_dirs,
            [
                PathBuf::from("/tmp/tether-x"),
                PathBuf::from("/dev/shm/tether-delivery-1")
            ]
        );
    }

    #[test]
    fn in_a_world_the_private_and_delivered_directories_are_the_plugins_view_and_not_host_paths() {
        let delivered = Delivered {
            dir: Path::new("/run/tether/tether-delivery-1"),
            secrets: Some(Path::new("/run/tether/tether-delivery-1/secrets")),
            config: None,
        };
        let mut world = inputs(Path::new("/tmp"), Some(delivered));
        world.in_world = true;
        let plan = LaunchPlan::new(
            &settings(PluginClientBuilder::new("p")),
            &HandshakeConfig::new("K", "V"),
            world,
        );
        assert_eq!(plan.env.vars.get(OsStr::new("TMPDIR")).unwrap(), "/tmp");
        assert_eq!(
            plan.env.vars.get(OsStr::new("TETHER_SECRETS_DIR")).unwrap(),
            "/run/tether/tether-delivery-1/secrets"
        );
        assert_eq!(plan.working_dir, Path::new("/tmp"));
        assert!(plan.janitor_dirs.is_empty(), "{:?}", plan.janitor_dirs);
        assert!(plan.paths.read_write.is_empty() && plan.paths.read.is_empty());
    }

    #[test]
    fn a_configured_working_directory_is_the_plugins_and_writable() {
        let plan = LaunchPlan::new(
            &settings(PluginClientBuilder::new("p").current_dir("/var/lib/tether/state/kv")),
            &HandshakeConfig::new("K", "V"),
            inputs(Path::new("/tmp/tether-x"), None),
        );
        assert_eq!(plan.working_dir, Path::new("/var/lib/tether/state/kv"));
        assert!(
            plan.paths
                .read_write
                .contains(&PathBuf::from("/var/lib/tether/state/kv"))
        );
        // A relative one is the host's directory's, made absolute.
        let relative = LaunchPlan::new(
            &settings(PluginClientBuilder::new("p").current_dir("../site/state/kv")),
            &HandshakeConfig::new("K", "V"),
            inputs(Path::new("/tmp/tether-x"), None),
        );
        assert_eq!(relative.working_dir, Path::new("/home/site/state/kv"));
        assert!(
            relative
                .paths
                .read_write
                .contains(&PathBuf::from("/home/site/state/kv"))
        );
        assert!(
            !plan
                .paths
                .read_write
                .contains(&PathBuf::from("/home/operator"))
        );
    }

    #[test]
    fn without_a_configured_working_directory_the_plugin_starts_in_its_private_one_and_never_gets_the_hosts()
     {
        let plan = LaunchPlan::new(
            &settings(PluginClientBuilder::new("p")),
            &HandshakeConfig::new("K", "V"),
            inputs(Path::new("/tmp/tether-x"), None),
        );
        assert_eq!(plan.working_dir, Path::new("/tmp/tether-x"));
        assert_eq!(plan.paths.read_write, [PathBuf::from("/tmp/tether-x")]);
        let granted = plan
            .paths
            .read
            .iter()
            .chain(&plan.paths.exec)
            .chain(&plan.paths.read_write);
        for path in granted {
            assert!(
                !Path::new("/home/operator").starts_with(path),
                "{} grants the host's working directory",
                path.display()
            );
        }
    }

    #[test]
    fn a_relative_program_path_is_resolved_against_the_hosts_directory_and_a_bare_name_is_not() {
        let plan = LaunchPlan::new(
            &settings(PluginClientBuilder::new("target/debug/kv-plugin")),
            &HandshakeConfig::new("K", "V"),
            inputs(Path::new("/tmp/tether-x"), None),
        );
        assert_eq!(
            plan.program,
            Path::new("/home/operator/target/debug/kv-plugin")
        );
        // Leading `.` and `..` are taken away against the host's directory.
        let plan = LaunchPlan::new(
            &settings(PluginClientBuilder::new("./../p/./target/kv-plugin")),
            &HandshakeConfig::new("K", "V"),
            inputs(Path::new("/tmp/tether-x"), None),
        );
        assert_eq!(plan.program, Path::new("/home/p/target/kv-plugin"));
        for program in ["kv-plugin", "/opt/p/kv-plugin"] {
            let plan = LaunchPlan::new(
                &settings(PluginClientBuilder::new(program)),
                &HandshakeConfig::new("K", "V"),
                inputs(Path::new("/tmp/tether-x"), None),
            );
            assert_eq!(plan.program, Path::new(program));
        }
    }

    #[test]
    fn the_programs_directory_comes_first_among_the_executable_paths() {
        let mut plan = LaunchPlan::new(
            &settings(PluginClientBuilder::new("p").sandbox_allow_exec("/opt/python")),
            &HandshakeConfig::new("K", "V"),
            inputs(Path::new("/tmp/tether-x"), None),
        );
        plan.allow_program("/opt/p".into());
        assert_eq!(
            plan.paths.exec,
            [PathBuf::from("/opt/p"), PathBuf::from("/opt/python")]
        );
    }

    #[test]
    fn a_resolved_runtime_replaces_the_program_and_allows_only_its_directories() {
        let mut plan = LaunchPlan::new(
            &settings(PluginClientBuilder::new("python3").arg("kv.py")),
            &HandshakeConfig::new("K", "V"),
            inputs(Path::new("/tmp/tether-x"), None),
        );
        assert_eq!(plan.program, Path::new("python3"));
        plan.allow_runtime(&ResolvedRuntime {
            interpreter: crate::launch::interpreted::runtime::Interpreter::Python,
            program: "/v/bin/python".into(),
            args: vec!["/srv/kv/kv.py".into()],
            script: Some("/srv/kv/kv.py".into()),
            read_exec: vec!["/v".into(), "/opt/py".into()],
            read: vec!["/srv/kv".into()],
        });
        assert_eq!(
            (plan.program.as_path(), plan.argv0.as_path()),
            (Path::new("/v/bin/python"), Path::new("/v/bin/python"))
        );
        assert_eq!(plan.args, [OsString::from("/srv/kv/kv.py")]);
        assert_eq!(
            plan.paths.exec,
            [PathBuf::from("/v"), PathBuf::from("/opt/py")]
        );
        assert!(plan.paths.read.contains(&PathBuf::from("/srv/kv")));
        assert!(!plan.paths.read_write.contains(&PathBuf::from("/srv/kv")));
    }

    #[test]
    fn the_host_says_whether_it_serves_host_services() {
        let var = |builder: PluginClientBuilder| {
            let plan = LaunchPlan::new(
                &settings(builder),
                &HandshakeConfig::new("K", "V"),
                inputs(Path::new("/tmp/tether-x"), None),
            );
            plan.env
                .vars
                .get(OsStr::new("TETHER_HOST_SERVICES"))
                .cloned()
        };
        assert_eq!(var(PluginClientBuilder::new("p")).unwrap(), "none");
        let health = tonic_health::server::health_reporter().1;
        let served = PluginClientBuilder::new("p").host_service(health);
        assert_eq!(var(served).unwrap(), "served");
    }

    #[test]
    fn plaintext_launches_send_no_client_certificate_and_multiplexing_is_offered_only_when_asked() {
        let mut no_tls = inputs(Path::new("/tmp/tether-x"), None);
        no_tls.client_cert = None;
        let plan = LaunchPlan::new(
            &settings(PluginClientBuilder::new("p")),
            &HandshakeConfig::new("K", "V"),
            no_tls,
        );
        assert!(!plan.env.vars.contains_key(OsStr::new("PLUGIN_CLIENT_CERT")));
        assert!(
            !plan
                .env
                .vars
                .contains_key(OsStr::new("PLUGIN_MULTIPLEX_GRPC"))
        );
        let plan = LaunchPlan::new(
            &settings(PluginClientBuilder::new("p").multiplex(true)),
            &HandshakeConfig::new("K", "V"),
            inputs(Path::new("/tmp/tether-x"), None),
        );
        assert_eq!(
            plan.env
                .vars
                .get(OsStr::new("PLUGIN_MULTIPLEX_GRPC"))
                .unwrap(),
            "true"
        );
        assert_eq!(
            plan.env.vars.get(OsStr::new("PLUGIN_MIN_PORT")).unwrap(),
            "10000"
        );
    }
}
