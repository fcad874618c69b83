"""The test kit (``tether_plugin.testing`` and its fixtures) used as a plugin author would: a
servicer's callback into the host and its granted secret in-process, and the KV example
launched as a process that must leave nothing behind.

(The session already imports the KV example's generated code, whose package ``proto`` the
counter example's shares, so the callback here goes to the host's health service: a servicer on
the KV contract whose ``Get{key: "<broker id>"}`` dials that id.)"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import grpc
import kv_pb2
import kv_pb2_grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def host_health() -> tuple:
    servicer = health.HealthServicer()
    servicer.set("host", health_pb2.HealthCheckResponse.SERVING)
    return (health_pb2_grpc.add_HealthServicer_to_server, servicer)


class CallingBackKV(kv_pb2_grpc.KVServicer):
    """``Get{key}``: the host's health status of service ``host``, reached on broker id ``key``
    (``0``: the host services); ``Put{key}`` stores the granted secret ``key`` under it."""

    def __init__(self, broker, secrets):
        self.broker, self.secrets, self.values = broker, secrets, {}

    def Get(self, request, context):  # noqa: N802 (gRPC method name)
        broker_id = int(request.key)
        try:
            channel = self.broker.host_services() if broker_id == 0 else self.broker.dial(broker_id)
        except Exception as e:  # GrpcBrokerError: the test reads the message
            context.abort(grpc.StatusCode.UNAVAILABLE, str(e))
        status = (
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service="host")).status
        )
        return kv_pb2.GetResponse(value=str(status).encode())

    def Put(self, request, context):  # noqa: N802 (gRPC method name)
        self.values[request.key] = self.secrets.read_bytes(request.key)
        return kv_pb2.Empty()


def serving(host) -> kv_pb2_grpc.KVStub:
    servicer = CallingBackKV(host.broker, host.secrets)
    host.serve([(kv_pb2_grpc.add_KVServicer_to_server, servicer)])
    return kv_pb2_grpc.KVStub(host.channel), servicer


SERVING = str(health_pb2.HealthCheckResponse.SERVING).encode()


def test_a_servicer_calls_back_on_a_broker_id_the_fake_host_serves(tether_fake_host):
    host = tether_fake_host()
    stub, _ = serving(host)
    for _ in range(2):  # a fresh id per call, as hosts do
        broker_id = host.accept_and_serve([host_health()])
        assert stub.Get(kv_pb2.GetRequest(key=str(broker_id)), timeout=10).value == SERVING


def test_host_services_of_the_fake_host_need_no_id(tether_fake_host):
    host = tether_fake_host(host_services=[host_health()])
    stub, _ = serving(host)
    assert stub.Get(kv_pb2.GetRequest(key="0"), timeout=10).value == SERVING


def test_without_host_services_the_servicer_is_told_at_once(tether_fake_host):
    host = tether_fake_host()
    stub, _ = serving(host)
    began = time.monotonic()
    with pytest.raises(grpc.RpcError) as e:
        stub.Get(kv_pb2.GetRequest(key="0"), timeout=10)
    assert time.monotonic() - began < 1.0
    assert "serves no host services" in e.value.details()


def test_granted_secrets_are_read_from_the_fake_hosts_directory(tether_fake_host, monkeypatch):
    monkeypatch.delenv("TETHER_SECRETS_DIR", raising=False)
    host = tether_fake_host(secrets={"token": b"s3cret"})
    stub, servicer = serving(host)
    stub.Put(kv_pb2.PutRequest(key="token"), timeout=10)
    assert servicer.values["token"] == b"s3cret"
    with pytest.raises(grpc.RpcError) as e:
        stub.Put(kv_pb2.PutRequest(key="other"), timeout=10)
    assert "the host delivered other secrets, not this one" in e.value.details()


def test_a_launched_plugin_is_called_over_automtls_and_shuts_down_leaving_nothing(tether_launch, tmp_path):
    plugin = tether_launch([sys.executable, str(EXAMPLES / "kv_plugin.py")], cwd=str(tmp_path))
    assert plugin.handshake.startswith("1|1|unix|")
    stub = kv_pb2_grpc.KVStub(plugin.channel)
    stub.Put(kv_pb2.PutRequest(key="a", value=b"1"), timeout=10)
    assert stub.Get(kv_pb2.GetRequest(key="a"), timeout=10).value == b"1"
    assert plugin.shutdown() == 0


def test_a_launched_plugin_without_its_cookie_fails_to_start(tether_launch):
    with pytest.raises(RuntimeError, match="without a handshake"):
        tether_launch([sys.executable, str(EXAMPLES / "kv_plugin.py")], cookie=("OTHER", "x"))
