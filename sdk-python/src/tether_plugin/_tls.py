"""AutoMTLS: the plugin's throw-away certificate and exact pinning of the host's.

The plugin makes a P-256 self-signed leaf for ``localhost`` (CA:FALSE, KeyUsage
digitalSignature, EKU serverAuth + clientAuth), serves TLS with it, requires a client
certificate, and accepts only the host's exact certificate from ``PLUGIN_CLIENT_CERT``.

gRPC's TLS stack takes the host's certificate as the only trusted root, which admits exactly
that certificate when it is a leaf (tether hosts) but would also admit certificates *signed* by
it when it is a CA (go-plugin hosts make CA:TRUE certificates). :class:`HostPin` therefore also
compares every caller's certificate with the host's, byte for byte.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: The TLS server name both sides use (go-plugin's).
SERVER_NAME = "localhost"
#: How long a generated certificate is valid.
CERT_VALIDITY = datetime.timedelta(days=365)
#: How far a generated certificate's validity starts in the past, for clock skew.
CERT_BACKDATE = datetime.timedelta(days=1)


@dataclass(frozen=True, repr=False)
class Identity:
    """A key pair and its self-signed certificate."""

    cert_der: bytes
    cert_pem: bytes
    key_pem: bytes

    def __repr__(self) -> str:  # never show the key
        return f"Identity(fingerprint={fingerprint(self.cert_der)})"


def generate_identity(now: datetime.datetime | None = None) -> Identity:
    """A fresh P-256 key and a self-signed leaf certificate for ``localhost``."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SERVER_NAME)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CERT_BACKDATE)
        .not_valid_after(now + CERT_VALIDITY)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(SERVER_NAME)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    return Identity(
        cert_der=cert.public_bytes(serialization.Encoding.DER),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def parse_cert_pem(pem: str | bytes) -> bytes:
    """The DER of the one certificate in ``pem``; ``ValueError`` for none, several or garbage."""
    data = pem.encode() if isinstance(pem, str) else pem
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError as e:
        raise ValueError(f"no readable certificate ({e})") from e
    if len(certs) != 1:
        raise ValueError(f"{len(certs)} certificates, expected exactly one")
    return certs[0].public_bytes(serialization.Encoding.DER)


def der_to_pem(der: bytes) -> bytes:
    """PEM for one DER certificate."""
    return x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM)


def fingerprint(der: bytes) -> str:
    """SHA-256 of a certificate, lowercase hex pairs joined by ``:`` (as tether hosts log it)."""
    return ":".join(f"{b:02x}" for b in hashlib.sha256(der).digest())


def server_credentials(identity: Identity, host_cert_der: bytes) -> grpc.ServerCredentials:
    """TLS server credentials: present ``identity``, require a client certificate, trust only
    the host's."""
    return grpc.ssl_server_credentials(
        [(identity.key_pem, identity.cert_pem)],
        root_certificates=der_to_pem(host_cert_der),
        require_client_auth=True,
    )


class HostPin(grpc.ServerInterceptor):
    """Refuses (``UNAUTHENTICATED``) every call whose TLS client certificate is not exactly the
    host's."""

    def __init__(self, host_cert_der: bytes) -> None:
        self._host = host_cert_der
        # PEM texts already compared, so that each call costs a dict lookup, not a parse.
        self._verdicts: dict[bytes, bool] = {}

    def is_host(self, peer_pem: bytes) -> bool:
        """Whether ``peer_pem`` (gRPC's ``x509_pem_cert``) is the host's certificate."""
        verdict = self._verdicts.get(peer_pem)
        if verdict is None:
            try:
                verdict = parse_cert_pem(peer_pem) == self._host
            except ValueError:
                verdict = False
            if len(self._verdicts) < 16:  # a few distinct peers at most; bound the cache
                self._verdicts[peer_pem] = verdict
        return verdict

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        return _guard(handler, self._check)

    def _check(self, context: grpc.ServicerContext) -> None:
        certs = context.auth_context().get("x509_pem_cert") or []
        if not certs or not self.is_host(certs[0]):
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "the client certificate is not the host's certificate from PLUGIN_CLIENT_CERT",
            )


def _guard(handler: Any, check: Callable[[grpc.ServicerContext], None]) -> Any:
    """``handler`` with ``check(context)`` run before its behaviour."""

    def wrap(behaviour: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(request: Any, context: grpc.ServicerContext) -> Any:
            check(context)
            return behaviour(request, context)

        return guarded

    kinds = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")
    changes = {k: wrap(getattr(handler, k)) for k in kinds if getattr(handler, k) is not None}
    return handler._replace(**changes)
