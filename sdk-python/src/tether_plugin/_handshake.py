"""The handshake line a plugin prints first on stdout (sans-IO).

``CORE|APP|NETWORK|ADDRESS|PROTOCOL|SERVER_CERT[|MULTIPLEX]``, e.g.
``1|1|unix|/tmp/x/plugin.sock|grpc|MIIB…``.
The certificate is DER in base64's standard alphabet *without padding* (Go's
``RawStdEncoding``; Go hosts reject padded input) and empty without AutoMTLS. The 7th
(multiplexing) field is printed only when the host offered multiplexing
(``PLUGIN_MULTIPLEX_GRPC``): hosts before go-plugin 1.6 (1.0.1 too) split into at most six
fields, so a seventh would become part of the certificate.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Literal

#: go-plugin's core protocol version.
CORE_PROTOCOL_VERSION = 1

#: The only protocol tether speaks (go-plugin's other one, ``netrpc``, is not supported).
PROTOCOL_GRPC = "grpc"


def encode_cert(der: bytes) -> str:
    """A DER certificate for the SERVER_CERT field: standard base64, padding removed."""
    return base64.b64encode(der).decode("ascii").rstrip("=")


@dataclass(frozen=True)
class Handshake:
    """What the plugin announces to its host."""

    #: The negotiated app protocol version.
    app_version: int
    #: ``"unix"`` or ``"tcp"``.
    network: Literal["unix", "tcp"]
    #: The socket path, or ``127.0.0.1:PORT``.
    address: str
    #: AutoMTLS: the plugin's certificate, DER; ``None`` for plaintext.
    server_cert_der: bytes | None = None
    #: The 7th field: ``None`` when the host did not offer multiplexing (left out), else
    #: whether the plugin multiplexes.
    multiplex: bool | None = None

    def line(self) -> str:
        """The handshake line, newline included."""
        if "|" in self.address or "\n" in self.address:
            raise ValueError(f"address {self.address!r} cannot be put in a handshake line")
        cert = encode_cert(self.server_cert_der) if self.server_cert_der is not None else ""
        fields = (
            str(CORE_PROTOCOL_VERSION),
            str(self.app_version),
            self.network,
            self.address,
            PROTOCOL_GRPC,
            cert,
        )
        if self.multiplex is not None:
            fields = (*fields, "true" if self.multiplex else "false")
        return "|".join(fields) + "\n"
