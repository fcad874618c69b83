"""Write tether and HashiCorp go-plugin plugins in Python.

A plugin is a program that serves gRPC services; :func:`serve` does the rest: it checks the
magic cookie (printing go-plugin's message for humans and exiting 1 when run by hand),
negotiates the app protocol version from ``PLUGIN_PROTOCOL_VERSIONS``, listens on a unix
socket (or loopback TCP), turns on AutoMTLS when the host sends ``PLUGIN_CLIENT_CERT`` (its
own P-256 certificate; only the host's exact certificate is accepted), serves health
(``plugin`` = SERVING), ``plugin.GRPCController`` (Shutdown), ``plugin.GRPCStdio``,
``plugin.GRPCBroker`` (callbacks both ways: :meth:`Plugin.broker`) and server reflection,
prints the handshake line first on stdout, logs hclog JSON on stderr, and exits
when the host asks, on SIGTERM, or when the host process dies.

.. code-block:: python

    import tether_plugin
    import kv_pb2, kv_pb2_grpc            # generated with grpcio-tools

    class KV(kv_pb2_grpc.KVServicer):
        def Get(self, request, context):
            return kv_pb2.GetResponse(value=b"...")

    tether_plugin.serve("BASIC_PLUGIN", "hello", [(kv_pb2_grpc.add_KVServicer_to_server, KV())])

Traces: with the optional OpenTelemetry packages installed (``pip install
tether-plugin[telemetry]``), a plugin whose host records traces continues them with no code of
its own — each served call a span under the caller's, its callbacks carrying the context on,
its spans sent to the host over the existing connection. Without them nothing changes.

Secrets and config files a tether host granted: ``tether_plugin.secrets.read("name")``,
``tether_plugin.config.read("name")``.
"""

from ._broker import DEFAULT_DIAL_TIMEOUT, DEFAULT_UNCLAIMED_TTL, HOST_SERVICES_ID, GRPCBroker, Served
from ._files import ENV_CONFIG_DIR, ENV_SECRETS_DIR, GrantedFiles, config, secrets
from ._handshake import CORE_PROTOCOL_VERSION, Handshake, encode_cert
from ._host import StopReason
from ._launch import Launch, PortRange, choose_version, parse_versions, read_launch
from ._listen import MAX_UNIX_PATH_BYTES
from ._log import HclogFormatter, HclogHandler, install_logging
from ._plugin import (
    BUILT_IN_SERVICES,
    DEFAULT_APP_VERSION,
    DEFAULT_MAX_WORKERS,
    DEFAULT_SHUTDOWN_GRACE,
    HEALTH_SERVICE,
    Plugin,
    serve,
)
from ._stdio import STDIO_BUFFER_LIMIT
from ._tls import CERT_BACKDATE, CERT_VALIDITY, SERVER_NAME, Identity, fingerprint, generate_identity
from ._tracing import SPAN_BATCH_DELAY, SPAN_EXPORT_TIMEOUT, SPAN_FLUSH_TIMEOUT, UNTRACED_SERVICES
from .errors import (
    NOT_LAUNCHED_BY_HOST_MESSAGE,
    ConfigurationError,
    GrpcBrokerError,
    InvalidContentError,
    InvalidNameError,
    LaunchError,
    ListenError,
    NotGrantedError,
    NotLaunchedByHost,
    PluginError,
    PluginRefusedError,
    TlsError,
)

__all__ = [
    "BUILT_IN_SERVICES",
    "CERT_BACKDATE",
    "CERT_VALIDITY",
    "CORE_PROTOCOL_VERSION",
    "DEFAULT_APP_VERSION",
    "DEFAULT_DIAL_TIMEOUT",
    "DEFAULT_UNCLAIMED_TTL",
    "HOST_SERVICES_ID",
    "DEFAULT_MAX_WORKERS",
    "DEFAULT_SHUTDOWN_GRACE",
    "ENV_CONFIG_DIR",
    "ENV_SECRETS_DIR",
    "HEALTH_SERVICE",
    "MAX_UNIX_PATH_BYTES",
    "NOT_LAUNCHED_BY_HOST_MESSAGE",
    "SERVER_NAME",
    "SPAN_BATCH_DELAY",
    "SPAN_EXPORT_TIMEOUT",
    "SPAN_FLUSH_TIMEOUT",
    "STDIO_BUFFER_LIMIT",
    "GrpcBrokerError",
    "ConfigurationError",
    "GRPCBroker",
    "GrantedFiles",
    "Handshake",
    "HclogFormatter",
    "HclogHandler",
    "Identity",
    "InvalidContentError",
    "InvalidNameError",
    "Launch",
    "LaunchError",
    "ListenError",
    "NotGrantedError",
    "NotLaunchedByHost",
    "Plugin",
    "PluginError",
    "PluginRefusedError",
    "PortRange",
    "Served",
    "StopReason",
    "TlsError",
    "UNTRACED_SERVICES",
    "choose_version",
    "config",
    "encode_cert",
    "fingerprint",
    "generate_identity",
    "install_logging",
    "parse_versions",
    "read_launch",
    "secrets",
    "serve",
]
