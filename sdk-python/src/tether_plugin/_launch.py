"""The launch half of the handshake: what the host put in the environment (sans-IO).

:func:`read_launch` takes a mapping instead of reading ``os.environ``, so every rule (cookie
first, versions, ports, certificate) is tested with a dict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._tls import parse_cert_pem
from .errors import LaunchError, NotLaunchedByHost

#: Comma-separated app protocol versions the host supports.
ENV_PROTOCOL_VERSIONS = "PLUGIN_PROTOCOL_VERSIONS"
#: Lowest TCP port to listen on (TCP transport only).
ENV_MIN_PORT = "PLUGIN_MIN_PORT"
#: Highest TCP port to listen on (TCP transport only).
ENV_MAX_PORT = "PLUGIN_MAX_PORT"
#: AutoMTLS: the host's certificate, PEM.
ENV_CLIENT_CERT = "PLUGIN_CLIENT_CERT"
#: Directory to create the unix socket in (go-plugin ≥ 1.5).
ENV_UNIX_SOCKET_DIR = "PLUGIN_UNIX_SOCKET_DIR"
#: Group to give the unix socket (go-plugin ≥ 1.5).
ENV_UNIX_SOCKET_GROUP = "PLUGIN_UNIX_SOCKET_GROUP"

#: go-plugin ≥ 1.6: the host can multiplex brokered connections over one (Go's boolean syntax).
ENV_MULTIPLEX_GRPC = "PLUGIN_MULTIPLEX_GRPC"

#: tether hosts: ``served`` or ``none``, whether the host serves host services (go-plugin hosts
#: never set it).
ENV_HOST_SERVICES = "TETHER_HOST_SERVICES"

#: go-plugin's default lowest TCP port.
DEFAULT_MIN_PORT = 10_000
#: go-plugin's default highest TCP port.
DEFAULT_MAX_PORT = 25_000


@dataclass(frozen=True)
class PortRange:
    """An inclusive range of TCP ports."""

    min: int = DEFAULT_MIN_PORT
    max: int = DEFAULT_MAX_PORT


@dataclass(frozen=True)
class Launch:
    """Everything the host told the plugin at launch, checked and parsed."""

    #: The negotiated app protocol version.
    app_version: int
    #: AutoMTLS: the host's certificate, DER; ``None`` means plaintext.
    client_cert_der: bytes | None
    #: Where to create the unix socket, if the host said.
    socket_dir: str | None
    #: Ports to try for the TCP transport.
    ports: PortRange
    #: ``PLUGIN_UNIX_SOCKET_GROUP``: a group name or numeric id, if set.
    socket_group: str | None
    #: ``TETHER_HOST_SERVICES``: ``True`` served, ``False`` none, ``None`` not said (go-plugin
    #: hosts) or a value this version does not know.
    host_services: bool | None = None
    #: ``PLUGIN_MULTIPLEX_GRPC``: ``None`` when the host did not set it (then the handshake must
    #: not carry the seventh field), else whether the host asks for the multiplexed broker.
    multiplex: bool | None = None


def parse_go_bool(name: str, text: str) -> bool:
    """Go's ``strconv.ParseBool``, which go-plugin hosts use: ``1 t T TRUE true True`` and
    ``0 f F FALSE false False``."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise LaunchError(f"{name}={text!r} is not a boolean (Go's strconv.ParseBool syntax, e.g. true)")


def check_cookie(key: str, expected: str, found: str | None) -> None:
    """Raises :class:`NotLaunchedByHost` unless the cookie variable ``key`` was ``found`` with the
    ``expected`` value (an empty value counts as another value)."""
    if found is None:
        raise NotLaunchedByHost(key, mismatch=False)
    if found != expected:
        raise NotLaunchedByHost(key, mismatch=True)


def parse_versions(text: str) -> list[int]:
    """Parses a version list such as ``1,2,5``; empty entries and spaces are ignored (go-plugin
    tolerates ``1,``)."""
    versions = []
    for entry in text.split(","):
        entry = entry.strip()
        if not entry:
            continue
        if not entry.isascii() or not entry.isdigit():
            raise LaunchError(
                f"{ENV_PROTOCOL_VERSIONS}={text!r}: protocol version {entry!r} is not a "
                "non-negative integer; the host is broken or not a go-plugin host"
            )
        versions.append(int(entry))
    return versions


def choose_version(offered: Sequence[int], supported: Sequence[int]) -> int:
    """The highest version in both lists, else the plugin's lowest (which the host will refuse
    with a clear message, as go-plugin does)."""
    common = [v for v in supported if v in offered]
    return max(common) if common else min(supported)


def parse_port_range(min_text: str | None, max_text: str | None) -> PortRange:
    """Parses ``PLUGIN_MIN_PORT``/``PLUGIN_MAX_PORT``; an unset bound takes the default."""

    def port(name: str, text: str | None, default: int) -> int:
        if text is None:
            return default
        if not (text.isascii() and text.isdigit()) or not 0 < int(text) <= 65535:
            raise LaunchError(f"{name}={text!r} is not a TCP port (1-65535)")
        return int(text)

    ports = PortRange(
        min=port(ENV_MIN_PORT, min_text, DEFAULT_MIN_PORT),
        max=port(ENV_MAX_PORT, max_text, DEFAULT_MAX_PORT),
    )
    if ports.min > ports.max:
        raise LaunchError(
            f"{ENV_MIN_PORT}={ports.min} is above {ENV_MAX_PORT}={ports.max}: no port to listen on"
        )
    return ports


def read_launch(
    environ: Mapping[str, str],
    *,
    cookie_key: str,
    cookie_value: str,
    app_versions: Sequence[int],
    tcp: bool,
) -> Launch:
    """Checks the cookie (before anything else), then parses the protocol variables. An empty
    variable counts as unset."""
    check_cookie(cookie_key, cookie_value, environ.get(cookie_key))

    def var(name: str) -> str | None:
        return environ.get(name) or None

    offered = parse_versions(var(ENV_PROTOCOL_VERSIONS) or "")
    pem = var(ENV_CLIENT_CERT)
    try:
        client_cert = parse_cert_pem(pem) if pem is not None else None
    except ValueError as e:
        raise LaunchError(f"{ENV_CLIENT_CERT} is not one PEM certificate: {e}") from e
    ports = parse_port_range(var(ENV_MIN_PORT), var(ENV_MAX_PORT)) if tcp else PortRange()
    multiplex = var(ENV_MULTIPLEX_GRPC)
    return Launch(
        app_version=choose_version(offered, app_versions),
        client_cert_der=client_cert,
        socket_dir=var(ENV_UNIX_SOCKET_DIR),
        ports=ports,
        socket_group=var(ENV_UNIX_SOCKET_GROUP),
        host_services={"served": True, "none": False}.get(var(ENV_HOST_SERVICES) or ""),
        multiplex=None if multiplex is None else parse_go_bool(ENV_MULTIPLEX_GRPC, multiplex),
    )
