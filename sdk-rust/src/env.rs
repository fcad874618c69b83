//! The launch half of the handshake: what the host set in the environment, read through
//! [`LaunchEnv`] without doing any IO, and the app protocol version chosen from it.

use std::ffi::OsString;

use tether_proto::env::{self, LaunchEnv, MagicCookie};
use tether_proto::version;

use crate::error::Error;
use crate::options::{ServeOptions, Transport};

/// Everything the host told the plugin at launch, checked and parsed.
#[derive(Debug)]
pub(crate) struct Launch {
    /// The negotiated app protocol version.
    pub(crate) app_version: u32,
    /// The variables as the host set them. Its ports are the defaults for
    /// [`Transport::Unix`], for which the port variables are not read.
    pub(crate) env: LaunchEnv,
}

impl Launch {
    /// Checks the cookie, then reads the other variables through `lookup` (which returns a
    /// variable's value, like [`std::env::var_os`]) and chooses the app protocol version.
    pub(crate) fn read(
        options: &ServeOptions,
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Self, Error> {
        let cookie = MagicCookie::new(&options.cookie_key, &options.cookie_value);
        // go-plugin reads the port variables only when it serves over TCP.
        let env = LaunchEnv::from_lookup(&cookie, |name| match options.transport {
            Transport::Unix if name == env::MIN_PORT || name == env::MAX_PORT => None,
            _ => lookup(name),
        })?;
        let app_version = version::choose(&env.app_versions, &options.app_versions)
            .ok_or(Error::NoAppVersions)?;
        Ok(Self { app_version, env })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use tether_proto::env::LaunchEnvError;

    use super::*;
    use crate::error::NOT_LAUNCHED_BY_HOST_MESSAGE;

    fn options() -> ServeOptions {
        ServeOptions::new("BASIC_PLUGIN", "hello")
    }

    fn read(options: &ServeOptions, vars: &[(&str, &str)]) -> Result<Launch, Error> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        Launch::read(options, |name| vars.get(name).cloned())
    }

    #[test]
    fn a_missing_cookie_is_reported_with_the_go_plugin_message() {
        let err = read(&options(), &[("PLUGIN_PROTOCOL_VERSIONS", "1")]).unwrap_err();
        assert!(matches!(
            &err,
            Error::LaunchEnv(LaunchEnvError::CookieMissing { key }) if key == "BASIC_PLUGIN"
        ));
        assert!(err.is_not_launched_by_host());
        assert_eq!(err.to_string(), NOT_LAUNCHED_BY_HOST_MESSAGE);
        assert!(err.to_string().starts_with("This binary is a plugin."));
    }

    #[test]
    fn a_wrong_cookie_value_is_reported_with_the_same_message() {
        let err = read(&options(), &[("BASIC_PLUGIN", "hellO")]).unwrap_err();
        assert!(matches!(
            err,
            Error::LaunchEnv(LaunchEnvError::CookieMismatch { .. })
        ));
        assert!(err.is_not_launched_by_host());
        assert_eq!(err.to_string(), NOT_LAUNCHED_BY_HOST_MESSAGE);
    }

    #[test]
    fn other_launch_errors_are_not_about_a_human_running_the_plugin() {
        let err = read(
            &options(),
            &[("BASIC_PLUGIN", "hello"), ("PLUGIN_CLIENT_CERT", "not pem")],
        )
        .unwrap_err();
        assert!(matches!(
            err,
            Error::LaunchEnv(LaunchEnvError::InvalidClientCert(_))
        ));
        assert!(!err.is_not_launched_by_host());
    }

    #[test]
    fn the_highest_common_app_version_is_chosen() {
        let options = options().app_versions([1, 2, 3]);
        let launch = read(
            &options,
            &[
                ("BASIC_PLUGIN", "hello"),
                ("PLUGIN_PROTOCOL_VERSIONS", "2,1,4"),
            ],
        )
        .unwrap();
        assert_eq!(launch.app_version, 2);
    }

    #[test]
    fn without_a_common_version_the_plugin_answers_its_lowest() {
        let options = options().app_versions([3, 2]);
        let launch = read(
            &options,
            &[("BASIC_PLUGIN", "hello"), ("PLUGIN_PROTOCOL_VERSIONS", "1")],
        )
        .unwrap();
        assert_eq!(launch.app_version, 2);
        let unset = read(&options, &[("BASIC_PLUGIN", "hello")]).unwrap();
        assert_eq!(unset.app_version, 2);
    }

    #[test]
    fn port_variables_are_ignored_for_unix_sockets_and_read_for_tcp() {
        let vars = [("BASIC_PLUGIN", "hello"), ("PLUGIN_MIN_PORT", "bad")];
        assert!(read(&options(), &vars).is_ok());
        let err = read(&options().transport(Transport::Tcp), &vars).unwrap_err();
        assert!(matches!(
            err,
            Error::LaunchEnv(LaunchEnvError::InvalidPort { .. })
        ));
        let vars = [("BASIC_PLUGIN", "hello"), ("PLUGIN_MIN_PORT", "20000")];
        let unix = read(&options(), &vars).unwrap();
        assert_eq!(unix.env.ports, env::PortRange::DEFAULT);
        let tcp = read(&options().transport(Transport::Tcp), &vars).unwrap();
        assert_eq!(tcp.env.ports.min, 20_000);
    }
}
