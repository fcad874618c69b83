"""The handshake line a plugin prints first on stdout (sans-IO).

``CORE|APP|NETWORK|ADDRESS|PROTOCOL|SERVER_CERT``, e.g. ``1|1|unix|/tmp/x/plugin.sock|grpc|MIIB…``.
The certificate is DER in base64's standard alphabet *without padding* (Go's
``RawStdEncoding``; Go hosts reject padded input) and empty without AutoMTLS. The optional 7th
(multiplexing) field is never printed: go-plugin 1.0.1 hosts split into at most six fields.
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
        return "|".join(fields) + "\n"
