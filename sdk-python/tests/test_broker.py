"""``plugin.GRPCBroker``: the plugin's broker against a stand-in host that speaks the wire
protocol (opens ``StartStream``, announces ``ConnInfo``s, dials what the plugin announces) —
plaintext, AutoMTLS with a tether host's P-256 certificate, and with go-plugin's P-521 one."""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import threading
import time
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tether_plugin import HOST_SERVICES_ID, GRPCBroker, GrpcBrokerError, _terminator, _tls, generate_identity
from tether_plugin._broker import _Setup, _Tls
from tether_plugin._proto.plugin import grpc_broker_pb2, grpc_broker_pb2_grpc


@pytest.fixture
def sockets():
    # Short paths: unix socket paths are limited to 107 bytes.
    d = tempfile.mkdtemp(prefix="tb-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def health_servicer(service: str) -> health.HealthServicer:
    servicer = health.HealthServicer()
    servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    return servicer


def status_of(channel: grpc.Channel, service: str) -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status


class StandInHost:
    """The host's end: serves the plugin's broker servicer (as the plugin would), opens
    ``StartStream`` on it, and serves host-side services on sockets of its own."""

    def __init__(
        self, broker: GRPCBroker, sockets: str, host: _tls.Identity | None, plugin: _tls.Identity | None
    ):
        self.broker = broker
        self.sockets = sockets
        self.host = host
        self.plugin = plugin
        self.cleanup: list = []
        # The plugin's main server; the stand-in talks to it in plaintext (the main connection's
        # TLS is tested elsewhere).
        self.plugin_server = grpc.server(futures.ThreadPoolExecutor(4))
        grpc_broker_pb2_grpc.add_GRPCBrokerServicer_to_server(broker.servicer(), self.plugin_server)
        main = os.path.join(sockets, "plugin.sock")
        self.plugin_server.add_insecure_port(f"unix:{main}")
        self.plugin_server.start()
        tls = None
        if host is not None:
            tls = _Tls(plugin, host.cert_der, _terminator.grpc_tls_can_verify(host.cert_der))
        broker._connect_setup(_Setup(tls=tls, socket_dir=sockets))
        self.channel = grpc.insecure_channel(f"unix:{main}")
        self.outbound: queue.SimpleQueue = queue.SimpleQueue()
        self.inbound: queue.SimpleQueue = queue.SimpleQueue()
        responses = grpc_broker_pb2_grpc.GRPCBrokerStub(self.channel).StartStream(
            iter(self.outbound.get, None)
        )
        threading.Thread(target=self._read, args=(responses,), daemon=True).start()

    def _read(self, responses) -> None:
        try:
            for info in responses:
                self.inbound.put(info)
        except grpc.RpcError:
            pass  # closed at the end of the test

    def serve(self, broker_id: int, service: str) -> None:
        """Serves health with ``service`` SERVING and announces it under ``broker_id``."""
        path = os.path.join(self.sockets, f"host-{broker_id}.sock")
        server = grpc.server(futures.ThreadPoolExecutor(2))
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer(service), server)
        if self.host is None:
            server.add_insecure_port(f"unix:{path}")
        elif _terminator.grpc_tls_can_verify(self.host.cert_der):
            server.add_secure_port(f"unix:{path}", _tls.server_credentials(self.host, self.plugin.cert_der))
        else:
            # go-plugin's P-521 certificate: TLS done by Python's ssl in front of a plaintext server.
            inner = os.path.join(self.sockets, f"inner-{broker_id}.sock")
            server.add_insecure_port(f"unix:{inner}")
            terminator = _terminator.TlsTerminator(
                _terminator.ssl_context(self.host, self.plugin.cert_der), self.plugin.cert_der, inner
            )
            terminator.listen(f"unix:{path}")
            terminator.start()
            self.cleanup.append(terminator.stop)
        server.start()
        self.cleanup.append(lambda: server.stop(None))
        self.outbound.put(grpc_broker_pb2.ConnInfo(service_id=broker_id, network="unix", address=path))

    def close(self) -> None:
        self.broker.close()
        self.outbound.put(None)
        for c in reversed(self.cleanup):
            c()
        self.channel.close()
        self.plugin_server.stop(None)


@pytest.fixture
def plaintext(sockets):
    host = StandInHost(GRPCBroker(dial_timeout=2.0), sockets, None, None)
    yield host
    host.close()


def test_dial_connects_to_the_service_the_host_announced_under_that_id(plaintext):
    plaintext.serve(3, "adder")
    channel = plaintext.broker.dial(3)
    assert status_of(channel, "adder") == health_pb2.HealthCheckResponse.SERVING


@pytest.mark.parametrize("host_kind", ["tether_broker", "go_host"])
def test_dial_under_automtls_pins_the_hosts_certificate_and_presents_the_plugins(host_kind, sockets, request):
    host_identity = request.getfixturevalue(host_kind)
    plugin_identity = generate_identity()
    host = StandInHost(GRPCBroker(dial_timeout=2.0), sockets, host_identity, plugin_identity)
    try:
        host.serve(7, "tls")
        assert status_of(host.broker.dial(7), "tls") == health_pb2.HealthCheckResponse.SERVING
    finally:
        host.close()


def test_a_host_with_another_certificate_is_not_trusted(sockets):
    announced_as = generate_identity()
    actual = generate_identity()
    plugin_identity = generate_identity()
    broker = GRPCBroker(dial_timeout=2.0)
    host = StandInHost(broker, sockets, actual, plugin_identity)
    # The plugin pins `announced_as` (from PLUGIN_CLIENT_CERT); the server presents `actual`.
    broker._connect_setup(_Setup(tls=_Tls(plugin_identity, announced_as.cert_der, True), socket_dir=sockets))
    try:
        host.serve(2, "x")
        with pytest.raises(grpc.RpcError) as e:
            status_of(broker.dial(2), "x")
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        host.close()


def test_dialling_an_id_the_host_never_announced_fails_in_time_naming_the_id(plaintext):
    began = time.monotonic()
    with pytest.raises(GrpcBrokerError, match=r"broker id 9: no connection info from the host within 0.2s"):
        plaintext.broker.dial(9, timeout=0.2)
    assert time.monotonic() - began < 2.0


def test_host_services_without_a_tether_broker_say_so(plaintext):
    plaintext.broker.dial_timeout = 0.2
    with pytest.raises(GrpcBrokerError, match="serves no host services"):
        plaintext.broker.host_services()


def test_host_services_fail_at_once_when_the_host_said_it_serves_none(sockets):
    broker = GRPCBroker(dial_timeout=30.0)
    host = StandInHost(broker, sockets, None, None)
    broker._connect_setup(_Setup(tls=None, socket_dir=sockets, host_services=False))
    try:
        began = time.monotonic()
        with pytest.raises(GrpcBrokerError, match="serves no host services.*TETHER_HOST_SERVICES=none"):
            broker.host_services()
        assert time.monotonic() - began < 1.0, "no wait for an announcement that will not come"
    finally:
        host.close()


def test_host_services_are_dialled_once_and_shared(plaintext):
    plaintext.serve(HOST_SERVICES_ID, "host")
    first = plaintext.broker.host_services()
    assert plaintext.broker.host_services()._inner is first._inner, "one connection"
    assert status_of(first, "host") == health_pb2.HealthCheckResponse.SERVING


def test_closing_a_host_services_channel_leaves_the_shared_connection_open(plaintext):
    plaintext.serve(HOST_SERVICES_ID, "host")
    with plaintext.broker.host_services() as channel:
        assert status_of(channel, "host") == health_pb2.HealthCheckResponse.SERVING
    plaintext.broker.host_services().close()
    assert status_of(plaintext.broker.host_services(), "host") == health_pb2.HealthCheckResponse.SERVING


def test_each_announcement_of_an_id_is_dialled_once(plaintext):
    plaintext.serve(4, "once")
    plaintext.broker.dial(4)
    with pytest.raises(GrpcBrokerError, match="broker id 4"):
        plaintext.broker.dial(4, timeout=0.2)


@pytest.mark.parametrize(
    "network,address",
    [("tcp", "10.1.2.3:80"), ("unix", "relative.sock"), ("tcp", "localhost:x"), ("udp", "127.0.0.1:5")],
)
def test_an_address_that_is_not_local_is_refused(plaintext, network, address):
    plaintext.outbound.put(grpc_broker_pb2.ConnInfo(service_id=5, network=network, address=address))
    with pytest.raises(GrpcBrokerError, match="refusing to dial it"):
        plaintext.broker.dial(5)


def test_accept_and_serve_announces_the_id_and_serves_the_host_there(plaintext):
    broker = plaintext.broker
    served = broker.accept_and_serve(
        broker.next_id(), [(health_pb2_grpc.add_HealthServicer_to_server, health_servicer("callback"))]
    )
    info = plaintext.inbound.get(timeout=5)
    assert (info.service_id, info.network) == (served.id, "unix")
    assert os.path.dirname(info.address) == plaintext.sockets
    with grpc.insecure_channel(f"unix:{info.address}") as channel:
        assert status_of(channel, "callback") == health_pb2.HealthCheckResponse.SERVING
    served.stop()
    assert not os.path.exists(info.address)


def test_accept_and_serve_under_automtls_admits_only_the_host(sockets, tether_broker):
    plugin_identity = generate_identity()
    host = StandInHost(GRPCBroker(), sockets, tether_broker, plugin_identity)
    try:
        served = host.broker.accept_and_serve(
            host.broker.next_id(), [(health_pb2_grpc.add_HealthServicer_to_server, health_servicer("cb"))]
        )
        info = host.inbound.get(timeout=5)
        assert info.service_id == served.id

        def call_as(identity):
            credentials = grpc.ssl_channel_credentials(
                root_certificates=plugin_identity.cert_pem,
                private_key=identity.key_pem,
                certificate_chain=identity.cert_pem,
            )
            options = [
                ("grpc.ssl_target_name_override", "localhost"),
                ("grpc.default_authority", "localhost"),
            ]
            with grpc.secure_channel(f"unix:{info.address}", credentials, options=options) as channel:
                return status_of(channel, "cb")

        assert call_as(tether_broker) == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError):
            call_as(generate_identity())
    finally:
        host.close()


def test_the_broker_is_unusable_before_serving_and_after_close(sockets):
    broker = GRPCBroker()
    with pytest.raises(GrpcBrokerError, match="not connected yet"):
        broker.dial(1, timeout=0.1)
    broker._connect_setup(_Setup(tls=None, socket_dir=sockets))
    broker.close()
    with pytest.raises(GrpcBrokerError, match="stopped"):
        broker.dial(1, timeout=0.1)
    with pytest.raises(GrpcBrokerError, match="stopped"):
        broker.accept_and_serve(1, [])


def test_next_id_counts_from_one():
    broker = GRPCBroker()
    assert [broker.next_id() for _ in range(3)] == [1, 2, 3]


def test_an_announcement_nobody_dials_expires_but_host_services_do_not(sockets):
    host = StandInHost(GRPCBroker(unclaimed_ttl=0.0), sockets, None, None)
    try:
        host.serve(6, "late")
        host.serve(HOST_SERVICES_ID, "host")
        with pytest.raises(GrpcBrokerError, match="broker id 6"):
            host.broker.dial(6, timeout=0.3)
        assert status_of(host.broker.host_services(), "host") == health_pb2.HealthCheckResponse.SERVING
    finally:
        host.close()


@pytest.mark.parametrize("host_kind", ["tether_broker", "go_host"])
def test_closing_a_dialled_channel_ends_what_its_dial_set_up(host_kind, sockets, request):
    # go-plugin's examples/bidirectional dials a fresh id per call and closes the channel after
    # it: a long-running plugin must not keep a relay (go-plugin's P-521 hosts: a thread and an
    # event loop each) per call until it stops.
    host_identity = request.getfixturevalue(host_kind)
    host = StandInHost(GRPCBroker(dial_timeout=2.0), sockets, host_identity, generate_identity())
    try:
        host.serve(1, "first")
        with host.broker.dial(1) as channel:
            assert status_of(channel, "first") == health_pb2.HealthCheckResponse.SERVING

        def relays():
            return [t for t in threading.enumerate() if t.name == "tether-plugin-tls-dial"]

        assert relays() == [], "the first channel's relay ended with it"
        for broker_id in range(2, 22):
            host.serve(broker_id, "again")
            channel = host.broker.dial(broker_id)
            assert status_of(channel, "again") == health_pb2.HealthCheckResponse.SERVING
            channel.close()
            assert relays() == [], f"id {broker_id}: its relay outlived its channel"
        assert host.broker._channels == [], "the broker still holds closed channels"
        channel.close()  # closing twice is harmless
    finally:
        host.close()
