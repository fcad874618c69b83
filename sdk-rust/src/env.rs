//! The launch half of the handshake, read from the environment without doing any IO.
//!
//! [`Launch::read`] takes a lookup function instead of reading `std::env` itself, so every rule
//! (cookie, versions, ports, certificate) is unit-tested with a map.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use tether_proto::env;
use tether_proto::rustls_pki_types::CertificateDer;
use tether_proto::{tls, version};

use crate::error::Error;
use crate::settings::{Config, Transport};

/// Everything the host told the plugin at launch, checked and parsed.
#[derive(Debug)]
pub(crate) struct Launch {
    /// The negotiated app protocol version.
    pub(crate) app_version: u32,
    /// AutoMTLS: the host's certificate; `None` means plaintext.
    pub(crate) client_cert: Option<CertificateDer<'static>>,
    /// Where to create the unix socket, if the host said.
    pub(crate) socket_dir: Option<PathBuf>,
    /// Ports to try, for [`Transport::Tcp`] (defaults otherwise; never read for unix sockets).
    pub(crate) ports: PortRange,
    /// `PLUGIN_UNIX_SOCKET_GROUP`, which is not supported yet and only warned about.
    pub(crate) socket_group: Option<OsString>,
    /// `PLUGIN_MULTIPLEX_GRPC`: `None` when the host did not set it (then the handshake must
    /// not carry field 7), else whether it asks for the multiplexed broker.
    pub(crate) multiplex: Option<bool>,
}

/// An inclusive range of TCP ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PortRange {
    pub(crate) min: u16,
    pub(crate) max: u16,
}

impl Default for PortRange {
    fn default() -> Self {
        Self {
            min: env::DEFAULT_MIN_PORT,
            max: env::DEFAULT_MAX_PORT,
        }
    }
}

impl Launch {
    /// Checks the cookie, then reads the other variables through `lookup` (which returns a
    /// variable's value, like [`std::env::var_os`]). An empty value counts as unset.
    pub(crate) fn read(
        config: &Config,
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Self, Error> {
        check_cookie(
            &config.cookie_key,
            &config.cookie_value,
            lookup(&config.cookie_key).as_deref(),
        )?;
        let var = |name: &'static str| -> Result<Option<String>, Error> {
            match lookup(name) {
                None => Ok(None),
                Some(value) if value.is_empty() => Ok(None),
                Some(value) => value
                    .into_string()
                    .map(Some)
                    .map_err(|_| Error::EnvNotUnicode { name }),
            }
        };

        let offered = version::parse_list(&var(env::PROTOCOL_VERSIONS)?.unwrap_or_default())
            .map_err(Error::InvalidProtocolVersions)?;
        let app_version =
            version::choose(&offered, &config.app_versions).ok_or(Error::NoAppVersions)?;

        let client_cert = var(env::CLIENT_CERT)?
            .map(|pem| tls::parse_cert_pem(&pem))
            .transpose()
            .map_err(Error::InvalidClientCert)?;

        let ports = match config.transport {
            Transport::Tcp => parse_port_range(
                var(env::MIN_PORT)?.as_deref(),
                var(env::MAX_PORT)?.as_deref(),
            )?,
            Transport::Unix => PortRange::default(),
        };

        let non_empty = |name| lookup(name).filter(|v| !v.is_empty());
        Ok(Self {
            app_version,
            client_cert,
            socket_dir: non_empty(env::UNIX_SOCKET_DIR).map(PathBuf::from),
            ports,
            socket_group: non_empty(env::UNIX_SOCKET_GROUP),
            multiplex: non_empty(env::MULTIPLEX_GRPC).map(|v| parse_go_bool(&v)),
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

/// Checks that the cookie variable `key` was `found` with value `expected`.
pub(crate) fn check_cookie(key: &str, expected: &str, found: Option<&OsStr>) -> Result<(), Error> {
    match found {
        None => Err(Error::CookieMissing {
            key: key.to_owned(),
        }),
        Some(value) if value == OsStr::new(expected) => Ok(()),
        Some(_) => Err(Error::CookieMismatch {
            key: key.to_owned(),
        }),
    }
}

/// Parses `PLUGIN_MIN_PORT`/`PLUGIN_MAX_PORT`; an unset bound takes tether's (and go-plugin's
/// documented) default.
pub(crate) fn parse_port_range(min: Option<&str>, max: Option<&str>) -> Result<PortRange, Error> {
    let parse = |name: &'static str, value: Option<&str>, default: u16| match value {
        None => Ok(default),
        Some(v) => v.parse::<u16>().map_err(|_| Error::InvalidPort {
            name,
            value: v.to_owned(),
        }),
    };
    let range = PortRange {
        min: parse(env::MIN_PORT, min, env::DEFAULT_MIN_PORT)?,
        max: parse(env::MAX_PORT, max, env::DEFAULT_MAX_PORT)?,
    };
    if range.min > range.max {
        return Err(Error::PortRangeReversed {
            min: range.min,
            max: range.max,
        });
    }
    Ok(range)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::error::NOT_LAUNCHED_BY_HOST_MESSAGE;

    fn config() -> Config {
        Config::new("BASIC_PLUGIN", "hello")
    }

    fn read(config: &Config, vars: &[(&str, &str)]) -> Result<Launch, Error> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        Launch::read(config, |name| vars.get(name).cloned())
    }

    #[test]
    fn a_missing_cookie_is_reported_with_the_go_plugin_message() {
        let err = read(&config(), &[("PLUGIN_PROTOCOL_VERSIONS", "1")]).unwrap_err();
        assert!(matches!(&err, Error::CookieMissing { key } if key == "BASIC_PLUGIN"));
        assert!(err.is_not_launched_by_host());
        assert_eq!(err.to_string(), NOT_LAUNCHED_BY_HOST_MESSAGE);
        assert!(err.to_string().starts_with("This binary is a plugin."));
    }

    #[test]
    fn a_wrong_cookie_value_is_reported_with_the_same_message() {
        let err = read(&config(), &[("BASIC_PLUGIN", "hellO")]).unwrap_err();
        assert!(matches!(err, Error::CookieMismatch { .. }));
        assert_eq!(err.to_string(), NOT_LAUNCHED_BY_HOST_MESSAGE);
    }

    #[test]
    fn an_empty_cookie_counts_as_wrong_not_as_missing() {
        assert!(matches!(
            check_cookie("K", "v", Some(OsStr::new(""))),
            Err(Error::CookieMismatch { .. })
        ));
        assert!(check_cookie("K", "v", Some(OsStr::new("v"))).is_ok());
    }

    #[test]
    fn the_cookie_is_checked_before_any_other_variable() {
        let err = read(
            &config(),
            &[
                ("PLUGIN_PROTOCOL_VERSIONS", "x"),
                ("PLUGIN_CLIENT_CERT", "junk"),
            ],
        )
        .unwrap_err();
        assert!(matches!(err, Error::CookieMissing { .. }));
    }

    #[test]
    fn the_highest_common_app_version_is_chosen() {
        let config = config().app_versions([1, 2, 3]);
        let launch = read(
            &config,
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
        let config = config().app_versions([3, 2]);
        let launch = read(
            &config,
            &[("BASIC_PLUGIN", "hello"), ("PLUGIN_PROTOCOL_VERSIONS", "1")],
        )
        .unwrap();
        assert_eq!(launch.app_version, 2);
        let unset = read(&config, &[("BASIC_PLUGIN", "hello")]).unwrap();
        assert_eq!(unset.app_version, 2);
    }

    #[test]
    fn a_malformed_version_list_is_an_error() {
        let err = read(
            &config(),
            &[
                ("BASIC_PLUGIN", "hello"),
                ("PLUGIN_PROTOCOL_VERSIONS", "1,two"),
            ],
        )
        .unwrap_err();
        assert!(matches!(err, Error::InvalidProtocolVersions(_)));
    }

    #[test]
    fn no_client_cert_means_plaintext_and_an_empty_one_too() {
        let launch = read(&config(), &[("BASIC_PLUGIN", "hello")]).unwrap();
        assert!(launch.client_cert.is_none());
        let launch = read(
            &config(),
            &[("BASIC_PLUGIN", "hello"), ("PLUGIN_CLIENT_CERT", "")],
        )
        .unwrap();
        assert!(launch.client_cert.is_none());
    }

    #[test]
    fn a_client_cert_turns_tls_on_and_garbage_is_an_error() {
        let host = tls::Identity::generate().unwrap();
        let launch = read(
            &config(),
            &[
                ("BASIC_PLUGIN", "hello"),
                ("PLUGIN_CLIENT_CERT", &host.cert_pem()),
            ],
        )
        .unwrap();
        assert_eq!(launch.client_cert.as_ref(), Some(host.cert_der()));

        let err = read(
            &config(),
            &[("BASIC_PLUGIN", "hello"), ("PLUGIN_CLIENT_CERT", "not pem")],
        )
        .unwrap_err();
        assert!(matches!(err, Error::InvalidClientCert(_)));
    }

    #[test]
    fn the_socket_dir_and_group_are_passed_through_when_set() {
        let launch = read(
            &config(),
            &[
                ("BASIC_PLUGIN", "hello"),
                ("PLUGIN_UNIX_SOCKET_DIR", "/run/x"),
                ("PLUGIN_UNIX_SOCKET_GROUP", ""),
            ],
        )
        .unwrap();
        assert_eq!(launch.socket_dir, Some(PathBuf::from("/run/x")));
        assert_eq!(launch.socket_group, None);
    }

    #[test]
    fn multiplexing_is_known_only_when_the_host_set_the_variable() {
        let multiplex = |value: Option<&str>| {
            let mut vars = vec![("BASIC_PLUGIN", "hello")];
            if let Some(v) = value {
                vars.push(("PLUGIN_MULTIPLEX_GRPC", v));
            }
            read(&config(), &vars).unwrap().multiplex
        };
        assert_eq!(multiplex(None), None);
        assert_eq!(multiplex(Some("")), None);
        assert_eq!(multiplex(Some("true")), Some(true));
        assert_eq!(multiplex(Some("1")), Some(true));
        assert_eq!(multiplex(Some("false")), Some(false));
        assert_eq!(multiplex(Some("yes")), Some(false));
    }

    #[test]
    fn unset_port_bounds_take_the_go_plugin_defaults() {
        assert_eq!(
            parse_port_range(None, None).unwrap(),
            PortRange {
                min: 10_000,
                max: 25_000
            }
        );
        assert_eq!(
            parse_port_range(Some("20000"), None).unwrap(),
            PortRange {
                min: 20_000,
                max: 25_000
            }
        );
    }

    #[test]
    fn a_port_that_is_not_a_u16_is_rejected_with_its_variable_name() {
        let err = parse_port_range(Some("70000"), None).unwrap_err();
        assert!(
            matches!(err, Error::InvalidPort { name: "PLUGIN_MIN_PORT", ref value } if value == "70000")
        );
        let err = parse_port_range(None, Some(" 1")).unwrap_err();
        assert!(matches!(
            err,
            Error::InvalidPort {
                name: "PLUGIN_MAX_PORT",
                ..
            }
        ));
    }

    #[test]
    fn a_reversed_port_range_is_rejected_but_a_single_port_is_fine() {
        assert!(matches!(
            parse_port_range(Some("3000"), Some("2000")),
            Err(Error::PortRangeReversed {
                min: 3000,
                max: 2000
            })
        ));
        assert_eq!(
            parse_port_range(Some("3000"), Some("3000")).unwrap(),
            PortRange {
                min: 3000,
                max: 3000
            }
        );
    }

    #[test]
    fn port_variables_are_ignored_for_unix_sockets_and_read_for_tcp() {
        let vars = [("BASIC_PLUGIN", "hello"), ("PLUGIN_MIN_PORT", "bad")];
        assert!(read(&config(), &vars).is_ok());
        let err = read(&config().transport(Transport::Tcp), &vars).unwrap_err();
        assert!(matches!(err, Error::InvalidPort { .. }));
    }
}
