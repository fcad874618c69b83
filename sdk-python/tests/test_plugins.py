"""``GRPCBroker.open_plugin`` against the test kit's fake host, whose host services include a
``tether.plugins.v1.Plugins`` that grants plugin ``b`` only, as a tether ``Supervisor`` would:
the granted call reaches the service the host serves for ``b`` on a fresh broker id, a refusal
arrives as a :class:`~tether_plugin.PluginRefusedError` keeping the host's code and text.
(The real host and its grants are exercised by ``tests/tests/plugin_calls.rs``, which runs
``examples/caller_plugin.py`` under a ``Supervisor``.)"""

from __future__ import annotations

import grpc
import kv_pb2
import kv_pb2_grpc
import pytest
from caller_plugin import Caller

from tether_plugin import GrpcBrokerError, PluginRefusedError
from tether_plugin._proto.tether.plugins.v1 import plugins_pb2, plugins_pb2_grpc

REFUSAL = (
    'plugin `a` may not call plugin `c`: not granted; add `calls = ["c"]` under `[plugins.a]` at g.toml:1'
)


class B(kv_pb2_grpc.KVServicer):
    def Get(self, request, context):  # noqa: N802 (gRPC method name)
        return kv_pb2.GetResponse(value=f"b has {request.key}".encode())


class Plugins(plugins_pb2_grpc.PluginsServicer):
    """The host's ``Open``: ``b`` on a fresh broker id, anything else refused."""

    host = None

    def Open(self, request, context):  # noqa: N802 (gRPC method name)
        if request.plugin != "b":
            context.abort(grpc.StatusCode.PERMISSION_DENIED, REFUSAL)
        broker_id = self.host.accept_and_serve([(kv_pb2_grpc.add_KVServicer_to_server, B())])
        return plugins_pb2.OpenResponse(broker_id=broker_id)


def caller(tether_fake_host) -> kv_pb2_grpc.KVStub:
    plugins = Plugins()
    host = tether_fake_host(host_services=[(plugins_pb2_grpc.add_PluginsServicer_to_server, plugins)])
    plugins.host = host
    host.serve([(kv_pb2_grpc.add_KVServicer_to_server, Caller(host.broker))])
    return kv_pb2_grpc.KVStub(host.channel), host


def test_a_granted_plugin_is_reached_on_the_broker_id_the_host_opens(tether_fake_host):
    stub, _ = caller(tether_fake_host)
    for key in ("x", "y"):  # a fresh id per call, as the host announces one per Open
        assert stub.Get(kv_pb2.GetRequest(key=f"b:{key}"), timeout=10).value == f"b has {key}".encode()


def test_a_refusal_is_a_plugin_refused_error_with_the_hosts_code_and_text(tether_fake_host):
    stub, host = caller(tether_fake_host)
    with pytest.raises(grpc.RpcError) as e:
        stub.Get(kv_pb2.GetRequest(key="c:x"), timeout=10)
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert e.value.details() == REFUSAL
    with pytest.raises(PluginRefusedError) as refused:
        host.broker.open_plugin("c")
    assert isinstance(refused.value, GrpcBrokerError)
    assert (refused.value.plugin, refused.value.code, refused.value.details) == (
        "c",
        grpc.StatusCode.PERMISSION_DENIED,
        REFUSAL,
    )
    assert (
        str(refused.value)
        == f"the host did not open a connection to plugin 'c': {REFUSAL} (PERMISSION_DENIED)"
    )


def test_without_host_services_open_plugin_fails_at_once_naming_them(tether_fake_host):
    host = tether_fake_host()
    host.serve([])
    with pytest.raises(GrpcBrokerError) as e:
        host.broker.open_plugin("b")
    assert not isinstance(e.value, PluginRefusedError)
    assert "serves no host services" in str(e.value)
