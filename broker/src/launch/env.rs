//! A plugin's environment, built from nothing: the allowed host variables, the explicit ones,
//! then the protocol's (which always win).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};

use crate::confine::confinement::Confinement;

/// The host environment variables passed to every plugin unless
/// [`Confinement::env_allow_defaults`](crate::confine::Confinement::env_allow_defaults) turns them off.
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

/// The names of host variables a plugin under `confinement` may receive.
pub(crate) fn allowed_names(confinement: &Confinement) -> impl Iterator<Item = &OsStr> {
    let defaults: &[&str] = if confinement.env_allow_defaults {
        DEFAULT_ENV_ALLOWLIST
    } else {
        &[]
    };
    defaults
        .iter()
        .map(OsStr::new)
        .chain(confinement.env_allow.iter().map(OsStr::new))
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
}
