"""Shared helpers: certificates made the way tether and go-plugin hosts make them."""

from __future__ import annotations

import datetime
import importlib.metadata

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tether_plugin import Identity, generate_identity

# The SDK's own test kit, as plugin authors get it. Installed (`pip install ./sdk-python`, which
# also leaves `src/tether_plugin.egg-info` behind), it registers itself through its `pytest11`
# entry point, and registering it here too would be refused; from a bare checkout, register it.
if not any(
    ep.value == "tether_plugin.pytest_plugin" for ep in importlib.metadata.entry_points(group="pytest11")
):
    pytest_plugins = ["tether_plugin.pytest_plugin"]


def make_cert(curve: ec.EllipticCurve, *, ca: bool, issuer: Identity | None = None) -> Identity:
    """A certificate for ``localhost`` with EKU serverAuth+clientAuth: self-signed, or signed by
    ``issuer``. ``make_cert(ec.SECP521R1(), ca=True)`` is what go-plugin hosts make."""
    key = ec.generate_private_key(curve)
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "HashiCorp" if issuer is None else "Other"),
            x509.NameAttribute(NameOID.COMMON_NAME, "localhost"),
        ]
    )
    if issuer is not None:
        issuer_cert = x509.load_der_x509_certificate(issuer.cert_der)
        issuer_key = serialization.load_pem_private_key(issuer.key_pem, None)
        issuer_name = issuer_cert.subject
    else:
        issuer_key, issuer_name = key, name
    usage = dict.fromkeys(
        (
            "content_commitment",
            "key_encipherment",
            "data_encipherment",
            "key_agreement",
            "crl_sign",
            "encipher_only",
            "decipher_only",
        ),
        False,
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=ca, **usage), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .sign(issuer_key, hashes.SHA512() if isinstance(curve, ec.SECP521R1) else hashes.SHA256())
    )
    return Identity(
        cert_der=cert.public_bytes(serialization.Encoding.DER),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


@pytest.fixture
def tether_broker() -> Identity:
    """A host identity as tether makes it (P-256 leaf)."""
    return generate_identity()


@pytest.fixture
def go_host() -> Identity:
    """A host identity as go-plugin makes it (P-521, CA:TRUE)."""
    return make_cert(ec.SECP521R1(), ca=True)
