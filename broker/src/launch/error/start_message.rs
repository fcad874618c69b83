//! How a [`StartError`] reads: one sentence naming the plugin, what went wrong and what to do
//! (the flag of `tether call`/`inspect`, the manifest or grants key, the builder's setter),
//! then what the plugin printed. Only a failure the sandbox plausibly caused advises loosening
//! it.

use std::fmt;

use tether_proto::text::escape;

use super::refusal::{Incompatibility, version_mismatch};
use super::start_error::{StartError, StartErrorKind};

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use StartErrorKind as K;
        let plugin = self.plugin();
        match self.kind() {
            K::Prepare { what, source } => write!(
                f,
                "cannot prepare the launch of plugin `{plugin}`: {what} failed: {source}; check that the private-directory base exists, is writable and is short"
            ),
            K::RunAsNeedsRoot {
                uid,
                gid,
                host_uid,
                set_at,
            } => {
                let at = set_at.as_ref().map(|p| format!(" (`run_as` at {p})"));
                write!(
                    f,
                    "plugin `{plugin}` is to run as uid {uid}, gid {gid}{}, but the host runs as uid {host_uid} and only root can start a process as another user (phase: {}); run the host as root, or drop `run_as` (the plugin then runs as the host's user)",
                    at.unwrap_or_default(),
                    self.phase()
                )
            }
            K::World(source) => write!(
                f,
                "plugin `{plugin}` cannot start (phase: {}): {source}",
                self.phase()
            ),
            K::Integrity(source) => {
                write!(f, "plugin `{plugin}` is refused before start: {source}")
            }
            K::Sandbox { mode, source } => write!(
                f,
                "plugin `{plugin}` cannot be confined (sandbox mode `{mode}`): {source}"
            ),
            K::Runtime(source) => write!(
                f,
                "cannot prepare the interpreter of plugin `{plugin}`: {source}"
            ),
            K::SandboxDenied {
                status,
                mode,
                denial,
            } => write!(
                f,
                "plugin `{plugin}` exited ({status}) during start-up ({}) and was most likely refused something by its sandbox (mode `{mode}`: Landlock allows only its program's directory, the system paths, its private and working directories and what was explicitly allowed){denial}.",
                self.phase()
            ),
            K::NetworkDenied { status, refusal } => write!(
                f,
                "plugin `{plugin}` exited ({status}) during start-up ({}) because its network refused it a connection or a listening socket{refusal}.",
                self.phase()
            ),
            K::NotInstalled { status, missing } => write!(
                f,
                "plugin `{plugin}` exited ({status}) during start-up ({}) because a module it imports is not installed{missing}.",
                self.phase()
            ),
            K::RunnerMissing {
                runner,
                program,
                hint,
            } => write!(
                f,
                "plugin `{plugin}` runs under the {runner} runner, but {} is not installed: {hint}",
                program.display()
            ),
            K::Runner { runner, problem } => write!(
                f,
                "the {runner} runner could not start plugin `{plugin}`: {problem}"
            ),
            K::Spawn { program, source } => write!(
                f,
                "cannot start plugin `{plugin}` ({}): {source}; check that the path exists and is executable",
                program.display()
            ),
            K::Timeout { timeout } => write!(
                f,
                "plugin `{plugin}` printed no handshake within {timeout:?}; check that it is a go-plugin-compatible plugin, or raise the start timeout."
            ),
            K::Exited { status } => write!(
                f,
                "plugin `{plugin}` exited ({status}) during start-up ({}); its stderr usually says why.",
                self.phase()
            ),
            K::CookieRefused { status, cookie_key } => write!(
                f,
                "plugin `{plugin}` refused the host's magic cookie: it exited ({status}) before its handshake, saying it was not launched by its host. The host set the cookie variable `{cookie_key}` (its value is not shown); the plugin expects another key or value: set the cookie its author chose, as `cookie_key` and `cookie_value` under `[handshake]` in its manifest (`--cookie KEY=VALUE` for tether call/inspect, `HandshakeConfig::new(key, value)` in code)."
            ),
            K::StdoutClosed => write!(
                f,
                "plugin `{plugin}` closed its stdout without printing a handshake; a plugin must print its handshake line on stdout."
            ),
            K::TooMuchOutput { limit } => write!(
                f,
                "plugin `{plugin}` printed {limit} on stdout before its handshake; a plugin must print its handshake line first (or raise the stray-output limits)."
            ),
            K::SilentAfterStray {
                first_line,
                lines,
                waited,
            } => {
                let (lines, are) = match lines {
                    1 => ("1 line".to_owned(), "is"),
                    n => (format!("{n} lines"), "are"),
                };
                write!(
                    f,
                    "plugin `{plugin}` printed {lines} on stdout that {are} not a handshake (the first: \"{}\") and then no handshake within {waited:?}; the first line a plugin prints on stdout must be its handshake: write logs, debug output and banners to stderr (or, for a plugin that prints a banner first and starts slowly, raise `Timeouts::after_stray`).",
                    escape(first_line)
                )
            }
            K::Malformed { line, error } => write!(
                f,
                "plugin `{plugin}` printed a malformed handshake line {line:?}: {error}; the plugin does not speak the go-plugin handshake correctly."
            ),
            K::Incompatible {
                reason: Incompatibility::AppVersion { got },
                offered,
            } => return f.write_str(&version_mismatch(plugin, *got, offered)),
            K::Incompatible { reason, offered } => write!(
                f,
                "plugin `{plugin}` is incompatible with this host: {reason} (the host offered app protocol versions {offered:?}); use a plugin built for this host."
            ),
            K::NoAutoMtls => write!(
                f,
                "plugin `{plugin}` does not support AutoMTLS: its handshake carries no certificate; upgrade the plugin, or start it with `.plaintext()` if an unauthenticated, unencrypted connection is acceptable."
            ),
            K::Address { address, problem } => write!(
                f,
                "plugin `{plugin}` announced address {}, which the host refuses: {problem}.",
                escape(address)
            ),
            K::Connect { address, source } => write!(
                f,
                "cannot connect to plugin `{plugin}` at {}: {source}; the plugin announced an address it does not serve on.",
                escape(address)
            ),
            K::Tls { address, source } => write!(
                f,
                "the TLS handshake with plugin `{plugin}` at {} failed: {source}; the plugin must present the certificate from its handshake line and accept the host's PLUGIN_CLIENT_CERT.",
                escape(address)
            ),
            K::ConnectTimeout { address, timeout } => write!(
                f,
                "connecting to plugin `{plugin}` at {} took longer than {timeout:?}; the plugin accepts connections but does not answer (or raise the connect timeout).",
                escape(address)
            ),
            K::HealthCheck(source) => write!(
                f,
                "the health check of plugin `{plugin}` failed: {source}; a plugin must serve grpc.health.v1.Health for service \"plugin\"."
            ),
            K::Unhealthy { status } => write!(
                f,
                "plugin `{plugin}` reports health status {status} instead of SERVING; it is not ready to serve, see its stderr."
            ),
            K::HealthTimeout { timeout } => write!(
                f,
                "the health check of plugin `{plugin}` took longer than {timeout:?}; the plugin is stuck (or raise the health timeout)."
            ),
        }?;
        match self.output() {
            Some(output) => write!(f, "{output}"),
            None => Ok(()),
        }
    }
}
