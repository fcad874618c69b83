"""Why a plugin could not start or stopped serving with an error.

Every error is a :class:`PluginError` whose message names the phase and says what to do. The
classes follow the phases: configuration (the plugin's own code), launch (how the host started
the plugin), listening, TLS, and granted files (secrets and config).
"""

from __future__ import annotations

#: What a plugin prints when it was started without its host's cookie (go-plugin's message,
#: word for word).
NOT_LAUNCHED_BY_HOST_MESSAGE = (
    "This binary is a plugin. These are not meant to be executed directly.\n"
    "Please execute the program that consumes these plugins, which will\n"
    "load any plugins automatically"
)


class PluginError(Exception):
    """Base class of every error the SDK raises."""


class ConfigurationError(PluginError):
    """The plugin's own code is misconfigured (empty cookie, no app versions, a service served
    twice or for a version it does not support). Fix the plugin."""


class NotLaunchedByHost(PluginError):
    """The cookie variable is missing or has another value: the plugin was run by hand or by the
    host of another application. Its message is go-plugin's message for humans."""

    def __init__(self, cookie_key: str, *, mismatch: bool) -> None:
        super().__init__(NOT_LAUNCHED_BY_HOST_MESSAGE)
        #: The cookie's environment variable name.
        self.cookie_key = cookie_key
        #: ``True`` when the variable was set to another value, ``False`` when it was missing.
        self.mismatch = mismatch


class LaunchError(PluginError):
    """A protocol variable the host set is malformed (``PLUGIN_PROTOCOL_VERSIONS``, the port
    range, ``PLUGIN_CLIENT_CERT``, ``PLUGIN_UNIX_SOCKET_GROUP``). The host is broken or
    incompatible."""


class ListenError(PluginError):
    """The plugin could not create or bind its socket (unix socket directory, TCP port range)."""


class TlsError(PluginError):
    """The plugin could not set up AutoMTLS (certificate generation or credentials)."""


class NotGrantedError(PluginError, LookupError):
    """A secret or config file the plugin asked for is not available: the host delivered none of
    that kind, or not this one. The message (the same in every tether SDK) names the manifest
    key and the grants file line to add."""


class InvalidNameError(PluginError, ValueError):
    """A secret or config name that could name another file (empty, ``.``, ``..``, or containing
    ``/`` or NUL)."""


class InvalidContentError(PluginError, ValueError):
    """A granted file that cannot be read as text in the requested encoding (its content is
    never quoted)."""


class GrpcBrokerError(PluginError):
    """A ``GRPCBroker`` operation failed: dialling an id the host never announced (in time), an
    address the plugin refuses to dial, using the broker before the plugin serves or after it
    stopped, or a socket that could not be made. The message names the broker id."""


class PluginRefusedError(GrpcBrokerError):
    """The host did not open a connection to another catalog plugin asked for with
    :meth:`GRPCBroker.open_plugin <tether_plugin.GRPCBroker.open_plugin>`: not granted
    (``PERMISSION_DENIED``; the message names the grants line to add, e.g. ``add `calls =
    ["b"]` under `[plugins.a]` at /etc/tether/grants.toml:3``), not in its catalog
    (``NOT_FOUND``), or it could not start (``UNAVAILABLE``). The host's own status code and
    message are kept, so a plugin can pass the refusal on to its caller unchanged."""

    def __init__(self, plugin: str, code: object, details: str) -> None:
        name = getattr(code, "name", str(code))
        super().__init__(f"the host did not open a connection to plugin {plugin!r}: {details} ({name})")
        #: The catalog plugin asked for.
        self.plugin = plugin
        #: The host's status code (a :class:`grpc.StatusCode`).
        self.code = code
        #: The host's message.
        self.details = details
