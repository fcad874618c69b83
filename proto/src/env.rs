//! The launch half of the handshake: the environment variables a host sets for a plugin.
//!
//! [`LaunchEnv`] is everything the host tells a plugin at launch. The host writes it with
//! [`LaunchEnv::to_vars`]; the plugin reads it with [`LaunchEnv::from_lookup`], which takes a
//! lookup function (such as [`std::env::var_os`]) instead of reading the process environment,
//! so every rule is testable without processes. The constants below are the variables' names:
//! go-plugin's, so Go hosts and plugins understand them; the `TETHER_*` names are tether's own
//! additions that Go peers ignore.
//!
//! ```
//! use std::collections::HashMap;
//! use tether_proto::env::{LaunchEnv, MagicCookie};
//!
//! // Host: what to set in the plugin's (otherwise empty) environment.
//! let mut sent = LaunchEnv::new(MagicCookie::new("BASIC_PLUGIN", "hello"));
//! sent.app_versions = vec![1, 2];
//! sent.multiplex = Some(true);
//! let vars: HashMap<_, _> = sent.to_vars().into_iter().collect();
//!
//! // Plugin: read it back, checking the cookie it expects.
//! let lookup = |name: &str| vars.get(std::ffi::OsStr::new(name)).cloned();
//! let received = LaunchEnv::from_lookup(&MagicCookie::new("BASIC_PLUGIN", "hello"), lookup)?;
//! assert_eq!(received, sent);
//! # Ok::<(), tether_proto::env::LaunchEnvError>(())
//! ```

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use rustls_pki_types::CertificateDer;

use crate::tls::{self, TlsError};
use crate::version::{self, VersionListError};

/// Comma-separated app protocol versions the host supports, e.g. `1,2`.
pub const PROTOCOL_VERSIONS: &str = "PLUGIN_PROTOCOL_VERSIONS";

/// Lowest TCP port a plugin may listen on when it serves over TCP.
pub const MIN_PORT: &str = "PLUGIN_MIN_PORT";

/// Highest TCP port a plugin may listen on when it serves over TCP.
pub const MAX_PORT: &str = "PLUGIN_MAX_PORT";

/// AutoMTLS: the host's certificate, PEM encoded. Its presence turns TLS on.
pub const CLIENT_CERT: &str = "PLUGIN_CLIENT_CERT";

/// Set (to `true`) when the host supports go-plugin's multiplexed broker.
pub const MULTIPLEX_GRPC: &str = "PLUGIN_MULTIPLEX_GRPC";

/// Directory in which the plugin should create its unix socket.
pub const UNIX_SOCKET_DIR: &str = "PLUGIN_UNIX_SOCKET_DIR";

/// Group that should own the plugin's unix socket.
pub const UNIX_SOCKET_GROUP: &str = "PLUGIN_UNIX_SOCKET_GROUP";

/// The temporary directory. Hosts set it to the plugin's private directory too, because
/// go-plugin before 1.5 (which ignores `PLUGIN_UNIX_SOCKET_DIR`) creates its socket there.
pub const TMPDIR: &str = "TMPDIR";

/// tether: absolute path of the plugin's private directory of granted secrets.
pub const SECRETS_DIR: &str = "TETHER_SECRETS_DIR";

/// tether: absolute path of the plugin's private directory of granted config files.
pub const CONFIG_DIR: &str = "TETHER_CONFIG_DIR";

/// tether: whether the host serves *host services* (services every plugin reaches on the
/// well-known broker id, without being sent one): [`HOST_SERVICES_SERVED`] or
/// [`HOST_SERVICES_NONE`]. tether hosts always set it; go-plugin hosts never do, and then a
/// plugin cannot know before it dials (see [`LaunchEnv::host_services`]).
pub const HOST_SERVICES: &str = "TETHER_HOST_SERVICES";

/// [`HOST_SERVICES`]' value when the host serves host services.
pub const HOST_SERVICES_SERVED: &str = "served";

/// [`HOST_SERVICES`]' value when the host serves none: dialling them fails at once.
pub const HOST_SERVICES_NONE: &str = "none";

/// Default lowest TCP port (go-plugin's default).
pub const DEFAULT_MIN_PORT: u16 = 10_000;

/// Default highest TCP port (go-plugin's default).
pub const DEFAULT_MAX_PORT: u16 = 25_000;

/// Every variable name the protocol defines. A host that clears the environment passes these
/// (and the cookie) explicitly.
pub const ALL: &[&str] = &[
    PROTOCOL_VERSIONS,
    MIN_PORT,
    MAX_PORT,
    CLIENT_CERT,
    MULTIPLEX_GRPC,
    UNIX_SOCKET_DIR,
    UNIX_SOCKET_GROUP,
    TMPDIR,
    SECRETS_DIR,
    CONFIG_DIR,
    HOST_SERVICES,
];

/// What a go-plugin plugin prints when it was started without its host's cookie (go-plugin's
/// message, word for word): it was most likely run by hand.
pub const NOT_LAUNCHED_BY_HOST_MESSAGE: &str = "This binary is a plugin. These are not meant to be executed directly.\n\
     Please execute the program that consumes these plugins, which will\n\
     load any plugins automatically";

/// go-plugin's magic cookie: the variable `key` set to `value`. It only tells a plugin binary
/// that it was started by its application's host rather than by a person; it is not a
/// security feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MagicCookie {
    /// The variable's name (go-plugin's `MagicCookieKey`).
    pub key: String,
    /// The variable's value (go-plugin's `MagicCookieValue`).
    pub value: OsString,
}

impl MagicCookie {
    /// The cookie `key=value`.
    #[must_use]
    pub fn new(key: impl Into<String>, value: impl Into<OsString>) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
        }
    }
}

/// An inclusive range of TCP ports, `PLUGIN_MIN_PORT..=PLUGIN_MAX_PORT`.
///
/// A host writes whatever it was given; [`LaunchEnv::from_lookup`] only returns ranges with
/// `min <= max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    /// The lowest port.
    pub min: u16,
    /// The highest port.
    pub max: u16,
}

impl PortRange {
    /// go-plugin's default range, used for a bound the host does not set.
    pub const DEFAULT: Self = Self {
        min: DEFAULT_MIN_PORT,
        max: DEFAULT_MAX_PORT,
    };
}

impl Default for PortRange {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Everything a host tells a plugin at launch, in environment variables.
///
/// An empty variable counts as unset, as in go-plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LaunchEnv {
    /// The magic cookie.
    pub cookie: MagicCookie,
    /// [`PROTOCOL_VERSIONS`]: the app protocol versions the host supports, in its order.
    pub app_versions: Vec<u32>,
    /// [`MIN_PORT`] and [`MAX_PORT`]: where a plugin serving over TCP may listen.
    pub ports: PortRange,
    /// [`CLIENT_CERT`]: AutoMTLS is on and this is the host's certificate; `None` means
    /// plaintext.
    pub client_cert: Option<CertificateDer<'static>>,
    /// [`UNIX_SOCKET_DIR`]: the directory in which to create the unix socket.
    pub unix_socket_dir: Option<PathBuf>,
    /// [`UNIX_SOCKET_GROUP`]: the group that should own the unix socket.
    pub unix_socket_group: Option<OsString>,
    /// [`TMPDIR`]: the temporary directory (tether hosts set it to the private directory).
    pub tmp_dir: Option<PathBuf>,
    /// [`MULTIPLEX_GRPC`]: `None` when the host did not set it (then the handshake must not
    /// carry go-plugin's seventh field), else whether it asks for the multiplexed broker.
    pub multiplex: Option<bool>,
    /// [`SECRETS_DIR`]: the plugin's private directory of granted secrets.
    pub secrets_dir: Option<PathBuf>,
    /// [`CONFIG_DIR`]: the plugin's private directory of granted config files.
    pub config_dir: Option<PathBuf>,
    /// [`HOST_SERVICES`]: `Some(true)` when the host serves host services, `Some(false)` when
    /// it serves none, `None` when it did not say (go-plugin hosts, older tether hosts) or
    /// said something this version does not know (read as "not said", so that a newer host's
    /// value never stops a plugin from starting).
    pub host_services: Option<bool>,
}

/// Why [`LaunchEnv::from_lookup`] refused the environment.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchEnvError {
    /// The cookie variable is not set: the plugin was most likely run by hand. Displays
    /// go-plugin's message for humans ([`NOT_LAUNCHED_BY_HOST_MESSAGE`]).
    #[error("{NOT_LAUNCHED_BY_HOST_MESSAGE}")]
    CookieMissing {
        /// The cookie's variable name.
        key: String,
    },
    /// The cookie variable has another value (an empty one included): the plugin was launched
    /// by the host of another application. Displays the same message as
    /// [`LaunchEnvError::CookieMissing`].
    #[error("{NOT_LAUNCHED_BY_HOST_MESSAGE}")]
    CookieMismatch {
        /// The cookie's variable name.
        key: String,
    },
    /// A variable whose value must be text is not valid UTF-8.
    #[error("environment variable {name} is not valid UTF-8")]
    NotUnicode {
        /// The variable's name.
        name: &'static str,
    },
    /// [`PROTOCOL_VERSIONS`] is not a comma-separated list of numbers.
    #[error("{PROTOCOL_VERSIONS} from the host is invalid: {0}")]
    InvalidVersions(#[source] VersionListError),
    /// [`CLIENT_CERT`] does not hold exactly one PEM certificate.
    #[error("{CLIENT_CERT} from the host is not usable: {0}")]
    InvalidClientCert(#[source] TlsError),
    /// [`MIN_PORT`] or [`MAX_PORT`] is not a port number.
    #[error("environment variable {name}={value:?} is not a TCP port number (0-65535)")]
    InvalidPort {
        /// The variable's name.
        name: &'static str,
        /// Its value.
        value: String,
    },
    /// [`MIN_PORT`] is greater than [`MAX_PORT`].
    #[error("{MIN_PORT} ({min}) is greater than {MAX_PORT} ({max})")]
    PortRangeReversed {
        /// The lowest port.
        min: u16,
        /// The highest port.
        max: u16,
    },
}

impl LaunchEnvError {
    /// Whether the cookie is missing or wrong, i.e. the plugin was not launched by its host and
    /// the message is for a human who ran it by hand.
    #[must_use]
    pub fn is_not_launched_by_host(&self) -> bool {
        matches!(
            self,
            Self::CookieMissing { .. } | Self::CookieMismatch { .. }
        )
    }
}

impl LaunchEnv {
    /// The environment of a plaintext unix-socket launch with `cookie` and nothing else: no
    /// app versions offered, the default ports, no directories, no multiplexing.
    #[must_use]
    pub fn new(cookie: MagicCookie) -> Self {
        Self {
            cookie,
            app_versions: Vec::new(),
            ports: PortRange::DEFAULT,
            client_cert: None,
            unix_socket_dir: None,
            unix_socket_group: None,
            tmp_dir: None,
            multiplex: None,
            secrets_dir: None,
            config_dir: None,
            host_services: None,
        }
    }

    /// The variables a host sets, in a fixed order: cookie, versions, ports, socket directory
    /// and group, `TMPDIR`, certificate, multiplexing, secrets and config directories, host
    /// services. Unset
    /// fields are left out; the versions and ports are always written.
    #[must_use]
    pub fn to_vars(&self) -> Vec<(OsString, OsString)> {
        let mut vars: Vec<(OsString, OsString)> = vec![
            (self.cookie.key.clone().into(), self.cookie.value.clone()),
            (
                PROTOCOL_VERSIONS.into(),
                version::format_list(&self.app_versions).into(),
            ),
            (MIN_PORT.into(), self.ports.min.to_string().into()),
            (MAX_PORT.into(), self.ports.max.to_string().into()),
        ];
        let mut push = |name: &str, value: Option<OsString>| {
            if let Some(value) = value {
                vars.push((name.into(), value));
            }
        };
        push(
            UNIX_SOCKET_DIR,
            self.unix_socket_dir.clone().map(Into::into),
        );
        push(UNIX_SOCKET_GROUP, self.unix_socket_group.clone());
        push(TMPDIR, self.tmp_dir.clone().map(Into::into));
        push(
            CLIENT_CERT,
            self.client_cert
                .as_ref()
                .map(|der| tls::cert_to_pem(der).into()),
        );
        push(
            MULTIPLEX_GRPC,
            self.multiplex
                .map(|on| if on { "true" } else { "false" }.into()),
        );
        push(SECRETS_DIR, self.secrets_dir.clone().map(Into::into));
        push(CONFIG_DIR, self.config_dir.clone().map(Into::into));
        push(
            HOST_SERVICES,
            self.host_services.map(|served| {
                if served {
                    HOST_SERVICES_SERVED
                } else {
                    HOST_SERVICES_NONE
                }
                .into()
            }),
        );
        vars
    }

    /// Reads what the host set through `lookup` (which returns a variable's value, like
    /// [`std::env::var_os`]), checking `cookie` before anything else.
    ///
    /// go-plugin's rules: an empty variable counts as unset; unset versions mean none offered;
    /// an unset port bound takes its default ([`PortRange::DEFAULT`]); [`MULTIPLEX_GRPC`] is
    /// read with Go's `strconv.ParseBool`, anything but a true value (unparsable ones
    /// included) meaning `false`. go-plugin reads the port variables only when it serves over
    /// TCP: a plugin that serves over a unix socket hides them from `lookup`.
    ///
    /// # Errors
    /// The first problem, in this order: [`LaunchEnvError::CookieMissing`] or
    /// [`CookieMismatch`](LaunchEnvError::CookieMismatch), then
    /// [`NotUnicode`](LaunchEnvError::NotUnicode) or
    /// [`InvalidVersions`](LaunchEnvError::InvalidVersions),
    /// [`InvalidClientCert`](LaunchEnvError::InvalidClientCert),
    /// [`InvalidPort`](LaunchEnvError::InvalidPort) or
    /// [`PortRangeReversed`](LaunchEnvError::PortRangeReversed).
    pub fn from_lookup(
        cookie: &MagicCookie,
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Self, LaunchEnvError> {
        match lookup(&cookie.key) {
            None => {
                return Err(LaunchEnvError::CookieMissing {
                    key: cookie.key.clone(),
                });
            }
            Some(value) if value != cookie.value => {
                return Err(LaunchEnvError::CookieMismatch {
                    key: cookie.key.clone(),
                });
            }
            Some(_) => {}
        }
        let os = |name: &str| lookup(name).filter(|value| !value.is_empty());
        let text = |name: &'static str| -> Result<Option<String>, LaunchEnvError> {
            os(name)
                .map(|value| {
                    value
                        .into_string()
                        .map_err(|_| LaunchEnvError::NotUnicode { name })
                })
                .transpose()
        };

        let app_versions = version::parse_list(&text(PROTOCOL_VERSIONS)?.unwrap_or_default())
            .map_err(LaunchEnvError::InvalidVersions)?;
        let client_cert = text(CLIENT_CERT)?
            .map(|pem| tls::parse_cert_pem(&pem))
            .transpose()
            .map_err(LaunchEnvError::InvalidClientCert)?;
        let port = |name: &'static str, default: u16| -> Result<u16, LaunchEnvError> {
            match text(name)? {
                None => Ok(default),
                Some(value) => value
                    .parse()
                    .map_err(|_| LaunchEnvError::InvalidPort { name, value }),
            }
        };
        let ports = PortRange {
            min: port(MIN_PORT, DEFAULT_MIN_PORT)?,
            max: port(MAX_PORT, DEFAULT_MAX_PORT)?,
        };
        if ports.min > ports.max {
            return Err(LaunchEnvError::PortRangeReversed {
                min: ports.min,
                max: ports.max,
            });
        }
        Ok(Self {
            cookie: cookie.clone(),
            app_versions,
            ports,
            client_cert,
            unix_socket_dir: os(UNIX_SOCKET_DIR).map(PathBuf::from),
            unix_socket_group: os(UNIX_SOCKET_GROUP),
            tmp_dir: os(TMPDIR).map(PathBuf::from),
            multiplex: os(MULTIPLEX_GRPC).map(|value| parse_go_bool(&value)),
            secrets_dir: os(SECRETS_DIR).map(PathBuf::from),
            config_dir: os(CONFIG_DIR).map(PathBuf::from),
            host_services: match os(HOST_SERVICES).as_deref().and_then(OsStr::to_str) {
                Some(HOST_SERVICES_SERVED) => Some(true),
                Some(HOST_SERVICES_NONE) => Some(false),
                _ => None,
            },
        })
    }
}

/// Go's `strconv.ParseBool` for `true` (what go-plugin plugins accept); anything else,
/// unparsable values included, is `false` as there.
fn parse_go_bool(value: &OsStr) -> bool {
    matches!(
        value.to_str(),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True")
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use proptest::prelude::*;

    use super::*;

    fn cookie() -> MagicCookie {
        MagicCookie::new("BASIC_PLUGIN", "hello")
    }

    fn read(vars: &[(&str, &str)]) -> Result<LaunchEnv, LaunchEnvError> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        LaunchEnv::from_lookup(&cookie(), |name| vars.get(name).cloned())
    }

    fn read_vars(vars: Vec<(OsString, OsString)>) -> Result<LaunchEnv, LaunchEnvError> {
        let vars: HashMap<OsString, OsString> = vars.into_iter().collect();
        LaunchEnv::from_lookup(&cookie(), |name| vars.get(OsStr::new(name)).cloned())
    }

    #[test]
    fn a_missing_cookie_is_reported_with_the_go_plugin_message() {
        let err = read(&[(PROTOCOL_VERSIONS, "1")]).unwrap_err();
        assert!(matches!(&err, LaunchEnvError::CookieMissing { key } if key == "BASIC_PLUGIN"));
        assert!(err.is_not_launched_by_host());
        assert_eq!(err.to_string(), NOT_LAUNCHED_BY_HOST_MESSAGE);
    }

    #[test]
    fn a_wrong_or_empty_cookie_value_is_a_mismatch_with_the_same_message() {
        for value in ["hellO", ""] {
            let err = read(&[("BASIC_PLUGIN", value)]).unwrap_err();
            assert!(
                matches!(&err, LaunchEnvError::CookieMismatch { key } if key == "BASIC_PLUGIN"),
                "{value:?}: {err:?}"
            );
            assert!(err.is_not_launched_by_host());
            assert_eq!(err.to_string(), NOT_LAUNCHED_BY_HOST_MESSAGE);
        }
    }

    #[test]
    fn the_cookie_is_checked_before_any_other_variable() {
        let junk = [
            (PROTOCOL_VERSIONS, "x"),
            (CLIENT_CERT, "junk"),
            (MIN_PORT, "-1"),
        ];
        assert!(matches!(
            read(&junk).unwrap_err(),
            LaunchEnvError::CookieMissing { .. }
        ));
        let mut wrong = junk.to_vec();
        wrong.push(("BASIC_PLUGIN", "other"));
        assert!(matches!(
            read(&wrong).unwrap_err(),
            LaunchEnvError::CookieMismatch { .. }
        ));
    }

    #[test]
    fn only_the_cookie_is_required_and_everything_else_has_a_default() {
        let env = read(&[("BASIC_PLUGIN", "hello")]).unwrap();
        assert_eq!(env, LaunchEnv::new(cookie()));
        assert_eq!(
            env.ports,
            PortRange {
                min: 10_000,
                max: 25_000
            }
        );
    }

    #[test]
    fn empty_variables_count_as_unset() {
        let names = [
            PROTOCOL_VERSIONS,
            MIN_PORT,
            MAX_PORT,
            CLIENT_CERT,
            MULTIPLEX_GRPC,
            UNIX_SOCKET_DIR,
            UNIX_SOCKET_GROUP,
            TMPDIR,
            SECRETS_DIR,
            CONFIG_DIR,
        ];
        let mut vars: Vec<(&str, &str)> = names.iter().map(|n| (*n, "")).collect();
        vars.push(("BASIC_PLUGIN", "hello"));
        assert_eq!(read(&vars).unwrap(), LaunchEnv::new(cookie()));
    }

    #[test]
    fn versions_are_read_in_the_hosts_order_and_a_malformed_list_is_an_error() {
        let env = read(&[("BASIC_PLUGIN", "hello"), (PROTOCOL_VERSIONS, "2, 1,4,")]).unwrap();
        assert_eq!(env.app_versions, [2, 1, 4]);
        let err = read(&[("BASIC_PLUGIN", "hello"), (PROTOCOL_VERSIONS, "1,two")]).unwrap_err();
        assert!(
            matches!(&err, LaunchEnvError::InvalidVersions(VersionListError::NotANumber(v)) if v == "two")
        );
    }

    #[test]
    fn a_text_variable_that_is_not_utf8_is_an_error_naming_it() {
        use std::os::unix::ffi::OsStringExt as _;
        let lookup = |name: &str| match name {
            "BASIC_PLUGIN" => Some(OsString::from("hello")),
            CLIENT_CERT => Some(OsString::from_vec(vec![0xff, 0xfe])),
            _ => None,
        };
        let err = LaunchEnv::from_lookup(&cookie(), lookup).unwrap_err();
        assert!(matches!(
            err,
            LaunchEnvError::NotUnicode { name: CLIENT_CERT }
        ));
    }

    #[test]
    fn a_client_cert_turns_tls_on_and_garbage_is_an_error() {
        let host = tls::Identity::generate().unwrap();
        let env = read(&[("BASIC_PLUGIN", "hello"), (CLIENT_CERT, &host.cert_pem())]).unwrap();
        assert_eq!(env.client_cert.as_ref(), Some(host.cert_der()));
        let err = read(&[("BASIC_PLUGIN", "hello"), (CLIENT_CERT, "not pem")]).unwrap_err();
        assert!(matches!(err, LaunchEnvError::InvalidClientCert(_)));
    }

    #[test]
    fn an_unset_port_bound_takes_the_go_plugin_default() {
        let env = read(&[("BASIC_PLUGIN", "hello"), (MIN_PORT, "20000")]).unwrap();
        assert_eq!(
            env.ports,
            PortRange {
                min: 20_000,
                max: 25_000
            }
        );
    }

    #[test]
    fn a_port_that_is_not_a_u16_is_rejected_with_its_variable_name() {
        let err = read(&[("BASIC_PLUGIN", "hello"), (MIN_PORT, "70000")]).unwrap_err();
        assert!(
            matches!(&err, LaunchEnvError::InvalidPort { name: MIN_PORT, value } if value == "70000")
        );
        let err = read(&[("BASIC_PLUGIN", "hello"), (MAX_PORT, " 1")]).unwrap_err();
        assert!(matches!(
            err,
            LaunchEnvError::InvalidPort { name: MAX_PORT, .. }
        ));
    }

    #[test]
    fn a_reversed_port_range_is_rejected_but_a_single_port_is_fine() {
        let err = read(&[
            ("BASIC_PLUGIN", "hello"),
            (MIN_PORT, "3000"),
            (MAX_PORT, "2000"),
        ])
        .unwrap_err();
        assert!(matches!(
            err,
            LaunchEnvError::PortRangeReversed {
                min: 3000,
                max: 2000
            }
        ));
        let env = read(&[
            ("BASIC_PLUGIN", "hello"),
            (MIN_PORT, "3000"),
            (MAX_PORT, "3000"),
        ])
        .unwrap();
        assert_eq!(
            env.ports,
            PortRange {
                min: 3000,
                max: 3000
            }
        );
    }

    #[test]
    fn multiplexing_is_known_only_when_set_and_read_as_go_reads_a_bool() {
        let multiplex = |value: &str| {
            read(&[("BASIC_PLUGIN", "hello"), (MULTIPLEX_GRPC, value)])
                .unwrap()
                .multiplex
        };
        for value in ["1", "t", "T", "true", "TRUE", "True"] {
            assert_eq!(multiplex(value), Some(true), "{value}");
        }
        for value in ["0", "f", "false", "yes", "tRuE"] {
            assert_eq!(multiplex(value), Some(false), "{value}");
        }
        assert_eq!(multiplex(""), None);
    }

    #[test]
    fn directories_are_passed_through() {
        let env = read(&[
            ("BASIC_PLUGIN", "hello"),
            (UNIX_SOCKET_DIR, "/run/x"),
            (UNIX_SOCKET_GROUP, "wheel"),
            (TMPDIR, "/run/x"),
            (SECRETS_DIR, "/dev/shm/s"),
        ])
        .unwrap();
        assert_eq!(env.unix_socket_dir.as_deref(), Some(Path::new("/run/x")));
        assert_eq!(env.unix_socket_group.as_deref(), Some(OsStr::new("wheel")));
        assert_eq!(env.tmp_dir.as_deref(), Some(Path::new("/run/x")));
        assert_eq!(env.secrets_dir.as_deref(), Some(Path::new("/dev/shm/s")));
        assert_eq!(env.config_dir, None);
    }

    #[test]
    fn host_services_are_announced_as_served_or_none_and_unknown_values_mean_not_said() {
        let said = |value| read(&[("BASIC_PLUGIN", "hello"), (HOST_SERVICES, value)]);
        assert_eq!(said("served").unwrap().host_services, Some(true));
        assert_eq!(said("none").unwrap().host_services, Some(false));
        assert_eq!(said("some-future-value").unwrap().host_services, None);
        assert_eq!(
            read(&[("BASIC_PLUGIN", "hello")]).unwrap().host_services,
            None
        );
    }

    #[test]
    fn a_host_writes_the_variables_in_a_fixed_order_leaving_unset_ones_out() {
        let mut env = LaunchEnv::new(cookie());
        env.app_versions = vec![1, 3];
        env.unix_socket_dir = Some("/tmp/t".into());
        env.tmp_dir = Some("/tmp/t".into());
        env.multiplex = Some(true);
        env.config_dir = Some("/tmp/c".into());
        let vars: Vec<(String, String)> = env
            .to_vars()
            .into_iter()
            .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
            .collect();
        let expected = [
            ("BASIC_PLUGIN", "hello"),
            ("PLUGIN_PROTOCOL_VERSIONS", "1,3"),
            ("PLUGIN_MIN_PORT", "10000"),
            ("PLUGIN_MAX_PORT", "25000"),
            ("PLUGIN_UNIX_SOCKET_DIR", "/tmp/t"),
            ("TMPDIR", "/tmp/t"),
            ("PLUGIN_MULTIPLEX_GRPC", "true"),
            ("TETHER_CONFIG_DIR", "/tmp/c"),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(vars, expected);
    }

    #[test]
    fn a_client_cert_is_written_as_the_identitys_pem() {
        let host = tls::Identity::generate().unwrap();
        let mut env = LaunchEnv::new(cookie());
        env.client_cert = Some(host.cert_der().clone());
        let pem = env
            .to_vars()
            .into_iter()
            .find(|(k, _)| k == CLIENT_CERT)
            .map(|(_, v)| v);
        assert_eq!(pem, Some(host.cert_pem().into()));
    }

    #[test]
    fn every_name_written_is_a_protocol_name_or_the_cookie() {
        let mut env = LaunchEnv::new(cookie());
        env.unix_socket_dir = Some("/a".into());
        env.unix_socket_group = Some("g".into());
        env.tmp_dir = Some("/a".into());
        env.client_cert = Some(CertificateDer::from(vec![1, 2, 3]));
        env.multiplex = Some(false);
        env.secrets_dir = Some("/s".into());
        env.config_dir = Some("/c".into());
        env.host_services = Some(false);
        let names: Vec<OsString> = env.to_vars().into_iter().map(|(k, _)| k).collect();
        assert_eq!(names.len(), ALL.len() + 1);
        assert_eq!(names[0], "BASIC_PLUGIN");
        assert!(names[1..].iter().all(|n| ALL.iter().any(|a| n == a)));
    }

    fn non_empty_path() -> impl Strategy<Value = Option<PathBuf>> {
        proptest::option::of("/[a-z0-9/._-]{0,40}".prop_map(PathBuf::from))
    }

    fn launch_env() -> impl Strategy<Value = LaunchEnv> {
        (
            proptest::collection::vec(any::<u32>(), 0..5),
            any::<u16>(),
            any::<u16>(),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 1..600)),
            (non_empty_path(), non_empty_path()),
            proptest::option::of("[a-z_][a-z0-9_-]{0,15}"),
            proptest::option::of(any::<bool>()),
            (non_empty_path(), non_empty_path()),
            proptest::option::of(any::<bool>()),
        )
            .prop_map(
                |(versions, a, b, cert, (socket_dir, tmp_dir), group, multiplex, (s, c), h)| {
                    let mut env = LaunchEnv::new(cookie());
                    env.app_versions = versions;
                    env.ports = PortRange {
                        min: a.min(b),
                        max: a.max(b),
                    };
                    env.client_cert = cert.map(CertificateDer::from);
                    env.unix_socket_dir = socket_dir;
                    env.unix_socket_group = group.map(OsString::from);
                    env.tmp_dir = tmp_dir;
                    env.multiplex = multiplex;
                    env.secrets_dir = s;
                    env.config_dir = c;
                    env.host_services = h;
                    env
                },
            )
    }

    proptest! {
        #[test]
        fn what_a_host_writes_a_plugin_reads_back(env in launch_env()) {
            prop_assert_eq!(read_vars(env.to_vars()).unwrap(), env);
        }

        #[test]
        fn any_values_are_read_without_panicking(
            values in proptest::collection::vec(proptest::option::of(".{0,40}"), 12)
        ) {
            let names = [
                "BASIC_PLUGIN", PROTOCOL_VERSIONS, MIN_PORT, MAX_PORT, CLIENT_CERT, MULTIPLEX_GRPC,
                UNIX_SOCKET_DIR, UNIX_SOCKET_GROUP, TMPDIR, SECRETS_DIR, CONFIG_DIR, HOST_SERVICES,
            ];
            let vars: HashMap<&str, OsString> = names
                .iter()
                .zip(values)
                .filter_map(|(n, v)| v.map(|v| (*n, OsString::from(v))))
                .collect();
            let _ = LaunchEnv::from_lookup(&cookie(), |name| vars.get(name).cloned());
        }
    }
}
