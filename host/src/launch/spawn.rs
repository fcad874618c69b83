//! Before and at spawn: the plugin's private directory, its environment, the process itself.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::fs::Permissions;
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tempfile::TempDir;
use tokio::process::{Child, Command};

use crate::launch::builder::Settings;
use crate::launch::plan::LaunchPlan;

/// Longest unix socket path portable across the unix kernels tether runs on (`sun_path` is
/// 108 bytes on Linux and 104 on macOS and the BSDs, terminating NUL included).
pub const MAX_SOCKET_PATH_LEN: usize = 103;
/// Bytes reserved in [`MAX_SOCKET_PATH_LEN`] for the socket's file name inside the private
/// directory (go-plugin names it `plugin` + up to 10 digits).
pub const SOCKET_NAME_RESERVE: usize = 24;
/// Prefix of every private directory's name.
pub(crate) const PRIVATE_DIR_PREFIX: &str = "tether-";
/// Random characters after [`PRIVATE_DIR_PREFIX`].
pub(crate) const PRIVATE_DIR_RANDOM_LEN: usize = 6;
/// Longest runtime directory ([`PluginClientBuilder::runtime_dir`](crate::launch::PluginClientBuilder::runtime_dir)) in bytes: a socket in a
/// private directory (`/tether-XXXXXX/`) inside it must still fit [`MAX_SOCKET_PATH_LEN`] with
/// [`SOCKET_NAME_RESERVE`] bytes for its name.
pub const MAX_RUNTIME_DIR_LEN: usize = MAX_SOCKET_PATH_LEN
    - SOCKET_NAME_RESERVE
    - (PRIVATE_DIR_PREFIX.len() + PRIVATE_DIR_RANDOM_LEN + 2);
/// The host environment variables passed to every plugin unless
/// [`PluginClientBuilder::env_allow_defaults`](crate::launch::PluginClientBuilder::env_allow_defaults) turns them off.
///
/// The plugin's environment starts empty: host variables often hold credentials (cloud keys,
/// tokens, `SSH_AUTH_SOCK`) and a plugin should get only what it is given. These are passed
/// because they are harmless and commonly needed:
/// - `PATH`: plugins that run helper programs find them as the host would;
/// - `LANG`, `LANGUAGE`, `LC_ALL`, `LC_CTYPE`, `LC_MESSAGES`: text encoding and messages in the
///   user's language;
/// - `TZ`: timestamps in plugin logs match the host's.
///
/// Deliberately not passed: `HOME` and `USER` (they point at the user's configuration and
/// credential files; allow them with [`PluginClientBuilder::env_allow`](crate::launch::PluginClientBuilder::env_allow) when a plugin needs
/// them) and `TMPDIR` (always set to the plugin's private directory).
pub const DEFAULT_ENV_ALLOWLIST: &[&str] = &[
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
];

/// Where private directories go when the host's temporary directory is too long.
const FALLBACK_RUNTIME_DIR: &str = "/tmp";

/// A per-launch directory, mode `0700`, that holds the plugin's socket and is its `TMPDIR`.
/// Removed with everything in it when dropped or [closed](Self::close).
#[derive(Debug)]
pub(crate) struct PrivateDir {
    dir: TempDir,
}

impl PrivateDir {
    /// Creates a private directory in `configured`, else in the host's temporary directory
    /// (or [`FALLBACK_RUNTIME_DIR`] when that is too long for sockets).
    pub(crate) fn create(configured: Option<&Path>) -> io::Result<Self> {
        let base = match configured {
            Some(dir) => {
                let dir = dir.canonicalize()?;
                check_runtime_dir_len(&dir)?;
                dir
            }
            None => {
                let tmp = std::env::temp_dir().canonicalize();
                match tmp {
                    Ok(tmp) if check_runtime_dir_len(&tmp).is_ok() => tmp,
                    _ => PathBuf::from(FALLBACK_RUNTIME_DIR),
                }
            }
        };
        let dir = tempfile::Builder::new()
            .prefix(PRIVATE_DIR_PREFIX)
            .rand_bytes(PRIVATE_DIR_RANDOM_LEN)
            .permissions(Permissions::from_mode(0o700))
            .tempdir_in(base)?;
        Ok(Self { dir })
    }

    /// The directory's absolute path, without symbolic links.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Removes the directory and everything in it.
    pub(crate) fn close(self) -> io::Result<()> {
        self.dir.close()
    }
}

fn check_runtime_dir_len(dir: &Path) -> io::Result<()> {
    let len = dir.as_os_str().len();
    if len > MAX_RUNTIME_DIR_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is {len} bytes long; a plugin's socket path must fit in {MAX_SOCKET_PATH_LEN} \
                 bytes, so the runtime directory may be at most {MAX_RUNTIME_DIR_LEN}",
                dir.display()
            ),
        ));
    }
    Ok(())
}

/// A plugin's complete environment.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct PluginEnv {
    /// The variables, sorted by name.
    pub(crate) vars: BTreeMap<OsString, OsString>,
    /// Names the user tried to set or allow that the protocol owns.
    pub(crate) ignored: BTreeSet<OsString>,
}

/// Builds a plugin's environment from nothing: allowed host variables, then the user's
/// explicit ones, then the protocol's (which always win).
pub(crate) fn build_env<'a>(
    host_env: impl IntoIterator<Item = (OsString, OsString)>,
    allowed: impl IntoIterator<Item = &'a OsStr>,
    explicit: &[(OsString, OsString)],
    protocol: Vec<(OsString, OsString)>,
    cookie_key: &str,
) -> PluginEnv {
    let mut out = PluginEnv::default();
    let allowed: BTreeSet<&OsStr> = allowed.into_iter().collect();
    for name in &allowed {
        if is_reserved_env(name, cookie_key) {
            out.ignored.insert(name.to_os_string());
        }
    }
    for (name, value) in host_env {
        if allowed.contains(name.as_os_str()) && !is_reserved_env(&name, cookie_key) {
            out.vars.insert(name, value);
        }
    }
    for (name, value) in explicit {
        if is_reserved_env(name, cookie_key) {
            out.ignored.insert(name.clone());
        } else {
            out.vars.insert(name.clone(), value.clone());
        }
    }
    out.vars.extend(protocol);
    out
}

/// The names of host variables a launch with `settings` may pass.
pub(crate) fn allowed_names(settings: &Settings) -> impl Iterator<Item = &OsStr> {
    let defaults: &[&str] = if settings.env_allow_defaults {
        DEFAULT_ENV_ALLOWLIST
    } else {
        &[]
    };
    defaults
        .iter()
        .map(OsStr::new)
        .chain(settings.env_allow.iter().map(OsString::as_os_str))
}

/// Where `program` is: itself if it contains a `/`, else the first executable file of that
/// name in `path` (the plugin's `PATH`), else `program` unchanged.
pub(crate) fn resolve_program(program: &Path, path: Option<&OsString>) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    if program.components().count() != 1 || program.is_absolute() {
        return program.to_owned();
    }
    path.into_iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| program.to_owned())
}

/// Spawns the plugin in a session and process group of its own (`pre_exec` calls `setsid`)
/// with exactly the plan's environment, in its working
/// directory, stdin from `/dev/null` and
/// stdout and stderr piped, running `pre_exec` (the confinement) between fork and exec.
/// `exec` is the file to execute (the verified binary's `/proc/self/fd/N`, or the program);
/// `argv[0]` is always the configured program.
pub(crate) fn spawn(
    settings: &Settings,
    plan: &LaunchPlan,
    exec: &Path,
    pre_exec: impl FnMut() -> io::Result<()> + Send + Sync + 'static,
) -> io::Result<Child> {
    let mut cmd = Command::new(exec);
    cmd.arg0(&settings.program)
        .args(&settings.args)
        .env_clear()
        .envs(&plan.env.vars)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // No `process_group(0)`: the confinement's `setsid()` makes the plugin the leader of
        // a session and a process group of its own (pgid = pid), so that signals reach its
        // children too.
        // Ending the plugin is the client's job (it signals the whole group).
        .kill_on_drop(false);
    if let Some(dir) = &plan.working_dir {
        cmd.current_dir(dir);
    }
    // SAFETY: `pre_exec` only makes raw, async-signal-safe system calls on copied values
    // (see `sandbox::Prepared::pre_exec`).
    unsafe {
        cmd.pre_exec(pre_exec);
    }
    cmd.spawn()
}

/// Whether `name` is set by the protocol and so cannot come from the host or the user.
pub(crate) fn is_reserved_env(name: &OsStr, cookie_key: &str) -> bool {
    name == cookie_key
        || tether_proto::env::ALL
            .iter()
            .any(|reserved| name == *reserved)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt as _;

    use super::*;

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    fn names(env: &PluginEnv) -> Vec<&str> {
        env.vars.keys().filter_map(|k| k.to_str()).collect()
    }

    #[test]
    fn the_environment_holds_only_allowed_host_variables() {
        let host = os(&[
            ("PATH", "/usr/bin"),
            ("AWS_SECRET_ACCESS_KEY", "s3cr3t"),
            ("HOME", "/root"),
            ("LANG", "C.UTF-8"),
        ]);
        let env = build_env(
            host,
            ["PATH", "LANG", "TZ"].map(OsStr::new),
            &[],
            vec![],
            "COOKIE",
        );
        assert_eq!(names(&env), ["LANG", "PATH"]);
        assert!(env.ignored.is_empty());
    }

    #[test]
    fn explicit_variables_override_host_values_but_not_protocol_ones() {
        let host = os(&[("PATH", "/usr/bin"), ("TMPDIR", "/var/tmp")]);
        let explicit = os(&[
            ("PATH", "/opt/bin"),
            ("MODE", "fast"),
            ("PLUGIN_CLIENT_CERT", "forged"),
            ("COOKIE", "other"),
        ]);
        let protocol = os(&[
            ("COOKIE", "hello"),
            ("PLUGIN_CLIENT_CERT", "real"),
            ("TMPDIR", "/tmp/tether-x"),
        ]);
        let env = build_env(
            host,
            ["PATH", "TMPDIR"].map(OsStr::new),
            &explicit,
            protocol,
            "COOKIE",
        );
        let get = |k: &str| env.vars.get(OsStr::new(k)).and_then(|v| v.to_str());
        assert_eq!(get("PATH"), Some("/opt/bin"));
        assert_eq!(get("MODE"), Some("fast"));
        assert_eq!(get("PLUGIN_CLIENT_CERT"), Some("real"));
        assert_eq!(get("COOKIE"), Some("hello"));
        assert_eq!(get("TMPDIR"), Some("/tmp/tether-x"));
        let ignored: Vec<_> = env.ignored.iter().filter_map(|k| k.to_str()).collect();
        assert_eq!(ignored, ["COOKIE", "PLUGIN_CLIENT_CERT", "TMPDIR"]);
    }

    #[test]
    fn a_bare_program_name_is_found_in_the_plugins_path() {
        let path = OsString::from("/nonexistent:/bin:/usr/bin");
        let found = resolve_program(Path::new("sh"), Some(&path));
        assert!(
            found.is_absolute() && found.ends_with("sh"),
            "{}",
            found.display()
        );
        assert_eq!(
            resolve_program(Path::new("./x"), Some(&path)),
            Path::new("./x")
        );
        assert_eq!(
            resolve_program(Path::new("no-such-program-here"), Some(&path)),
            Path::new("no-such-program-here")
        );
    }

    #[test]
    fn a_private_directory_is_short_owner_only_and_removed_on_close() {
        let dir = PrivateDir::create(None).unwrap();
        let path = dir.path().to_owned();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700);
        assert!(path.as_os_str().len() + SOCKET_NAME_RESERVE <= MAX_SOCKET_PATH_LEN);
        assert_eq!(path, path.canonicalize().unwrap());
        std::fs::write(path.join("plugin123"), b"x").unwrap();
        dir.close().unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn a_configured_runtime_directory_that_is_too_long_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let long = base.path().join("d".repeat(MAX_RUNTIME_DIR_LEN));
        std::fs::create_dir(&long).unwrap();
        let err = PrivateDir::create(Some(&long)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
