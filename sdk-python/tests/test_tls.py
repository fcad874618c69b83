"""AutoMTLS: the plugin's certificate, and which client certificates it accepts — checked with
real TLS handshakes (grpcio for hosts with P-256 certificates, Python's ssl for go-plugin's
P-521 ones)."""

import datetime
import os
import shutil
import socket
import ssl
import tempfile
import threading
from concurrent import futures

import grpc
import pytest
from conftest import make_cert
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tether_plugin import _terminator, _tls, fingerprint, generate_identity


def test_generated_certificates_are_fresh_p256_leaves_for_localhost():
    a, b = generate_identity(), generate_identity()
    assert a.cert_der != b.cert_der and fingerprint(a.cert_der) != fingerprint(b.cert_der)
    cert = x509.load_der_x509_certificate(a.cert_der)
    assert isinstance(cert.public_key().curve, ec.SECP256R1)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    ) == ["localhost"]
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and not usage.key_cert_sign
    assert set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == {
        ExtendedKeyUsageOID.SERVER_AUTH,
        ExtendedKeyUsageOID.CLIENT_AUTH,
    }
    now = datetime.datetime.now(datetime.timezone.utc)
    assert cert.not_valid_before_utc < now < cert.not_valid_after_utc
    assert "BEGIN PRIVATE KEY" in a.key_pem.decode() and "PRIVATE" not in repr(a)


def test_the_fingerprint_is_colon_separated_sha256_hex():
    assert len(fingerprint(b"x")) == 32 * 3 - 1
    assert fingerprint(b"x").count(":") == 31


def test_grpc_tls_is_used_for_tether_brokers_and_python_tls_for_go_plugin_hosts(tether_broker, go_host):
    assert _terminator.grpc_tls_can_verify(tether_broker.cert_der)
    assert not _terminator.grpc_tls_can_verify(go_host.cert_der)


@pytest.fixture
def grpc_tls_server(tether_broker):
    """A gRPC server with the plugin's credentials and pin for ``tether_broker``, on a unix socket."""
    plugin = generate_identity()
    directory = tempfile.mkdtemp()
    path = os.path.join(directory, "s.sock")
    server = grpc.server(futures.ThreadPoolExecutor(2), interceptors=[_tls.HostPin(tether_broker.cert_der)])
    servicer = health.HealthServicer()
    servicer.set("plugin", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    server.add_secure_port(f"unix:{path}", _tls.server_credentials(plugin, tether_broker.cert_der))
    server.start()
    yield plugin, path
    server.stop(None).wait()
    shutil.rmtree(directory)  # gRPC removes the socket file itself when it stops


def check_health(path, plugin, client):
    creds = grpc.ssl_channel_credentials(
        root_certificates=plugin.cert_pem, private_key=client.key_pem, certificate_chain=client.cert_pem
    )
    with grpc.secure_channel(
        f"unix:{path}", creds, options=[("grpc.ssl_target_name_override", "localhost")]
    ) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return stub.Check(health_pb2.HealthCheckRequest(service="plugin"), timeout=10).status


def test_the_host_certificate_is_accepted_over_grpc_tls(grpc_tls_server, tether_broker):
    plugin, path = grpc_tls_server
    assert check_health(path, plugin, tether_broker) == health_pb2.HealthCheckResponse.SERVING


def test_another_self_signed_client_certificate_is_refused(grpc_tls_server):
    plugin, path = grpc_tls_server
    with pytest.raises(grpc.RpcError) as e:
        check_health(path, plugin, generate_identity())
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_certificate_signed_by_a_ca_host_certificate_is_refused_by_the_pin():
    # Only the exact certificate counts, even when the host's is a CA that TLS would trust.
    host = make_cert(ec.SECP256R1(), ca=True)
    impostor = make_cert(ec.SECP256R1(), ca=False, issuer=host)
    pin = _tls.HostPin(host.cert_der)
    assert pin.is_host(host.cert_pem)
    assert not pin.is_host(impostor.cert_pem)
    assert not pin.is_host(b"garbage")


class Terminated:
    """A TlsTerminator for ``host`` in front of a unix echo server standing in for gRPC."""

    def __init__(self, host):
        self.plugin = generate_identity()
        self.dir = tempfile.mkdtemp()
        self.inner = os.path.join(self.dir, "inner.sock")
        self.outer = os.path.join(self.dir, "outer.sock")
        self.echo = socket.socket(socket.AF_UNIX)
        self.echo.bind(self.inner)
        self.echo.listen()
        self.inner_connections = 0
        threading.Thread(target=self._serve_echo, daemon=True).start()
        self.terminator = _terminator.TlsTerminator(
            _terminator.ssl_context(self.plugin, host.cert_der), host.cert_der, self.inner
        )
        self.terminator.listen(f"unix:{self.outer}")
        self.terminator.start()

    def _serve_echo(self):
        while True:
            try:
                conn, _ = self.echo.accept()
            except OSError:
                return
            self.inner_connections += 1
            with conn:
                while data := conn.recv(1024):
                    conn.sendall(data)

    def connect(self, client):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.load_verify_locations(cadata=self.plugin.cert_pem.decode())
        context.set_alpn_protocols(["h2"])
        with tempfile.NamedTemporaryFile() as f:
            f.write(client.key_pem + client.cert_pem)
            f.flush()
            context.load_cert_chain(f.name)
        raw = socket.socket(socket.AF_UNIX)
        raw.settimeout(10)
        raw.connect(self.outer)
        return context.wrap_socket(raw, server_hostname="localhost")

    def close(self):
        self.terminator.stop()
        self.echo.close()
        shutil.rmtree(self.dir)


def test_a_go_plugin_host_certificate_is_accepted_by_python_tls_with_alpn_h2(go_host):
    terminated = Terminated(go_host)
    try:
        with terminated.connect(go_host) as conn:
            assert conn.selected_alpn_protocol() == "h2"
            assert conn.getpeercert(binary_form=True) == terminated.plugin.cert_der
            conn.sendall(b"PRI * HTTP/2.0")
            assert conn.recv(100) == b"PRI * HTTP/2.0"
    finally:
        terminated.close()


def test_python_tls_closes_connections_from_certificates_the_host_signed(go_host):
    terminated = Terminated(go_host)
    impostor = make_cert(ec.SECP521R1(), ca=False, issuer=go_host)
    try:
        with terminated.connect(impostor) as conn:
            # TLS accepts a certificate the host's CA signed; the pin then closes the connection.
            conn.sendall(b"hello")
            assert conn.recv(100) == b""
            assert terminated.inner_connections == 0, "nothing reached the gRPC server"
    finally:
        terminated.close()


def test_python_tls_refuses_an_unrelated_client_certificate(go_host):
    terminated = Terminated(go_host)
    try:
        with terminated.connect(make_cert(ec.SECP521R1(), ca=True)) as conn:
            # TLS 1.3: the client's handshake completes before the server has checked the
            # client certificate; the refusal shows on the next write or read as an alert or EOF.
            try:
                conn.sendall(b"hello")
                echoed = conn.recv(100)
            except (ssl.SSLError, ConnectionResetError, BrokenPipeError) as e:
                echoed = repr(e).encode()
            assert b"hello" not in echoed, echoed
            assert terminated.inner_connections == 0
    finally:
        terminated.close()
