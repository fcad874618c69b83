"""The plugin's traces: with the optional OpenTelemetry packages the served calls continue the
caller's trace and the calls made on brokered channels carry it on; without them (or without a
host that asks) nothing changes. A plugin's spans reaching a real collector through a real host
is tests/tests/otel.rs."""

from __future__ import annotations

import sys
from concurrent import futures
from pathlib import Path

import grpc
import kv_pb2
import kv_pb2_grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

import tether_plugin
from tether_plugin import _plugin

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
HOST_TRACE = "0af7651916cd43dd8448eb211c80319c"
HOST_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{HOST_TRACE}-{HOST_SPAN}-01"


@pytest.fixture
def without_opentelemetry(monkeypatch):
    """Imports of ``opentelemetry`` fail, as when the packages are not installed."""
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "tether_plugin._otel", raising=False)


def test_without_the_opentelemetry_packages_a_plugin_the_host_asks_for_traces_traces_nothing(
    without_opentelemetry, monkeypatch
):
    monkeypatch.setenv("TRACEPARENT", TRACEPARENT)
    assert _plugin._traces(True, tether_plugin.GRPCBroker()) is None


def test_without_a_traceparent_or_host_services_the_plugin_traces_nothing(monkeypatch):
    monkeypatch.delenv("TRACEPARENT", raising=False)
    assert _plugin._traces(True, tether_plugin.GRPCBroker()) is None
    monkeypatch.setenv("TRACEPARENT", TRACEPARENT)
    assert _plugin._traces(False, tether_plugin.GRPCBroker()) is None
    assert _plugin._traces(None, tether_plugin.GRPCBroker()) is None


def _launch_asked_for_traces(tether_launch, tmp_path, env):
    work = tmp_path / "work"
    work.mkdir()
    return tether_launch(
        [sys.executable, str(Path(__file__).parent / "tracing_plugin.py")],
        cwd=str(work),
        env={"TRACEPARENT": TRACEPARENT, "TETHER_HOST_SERVICES": "served", **env},
    )


def test_without_the_opentelemetry_packages_a_plugin_asked_for_traces_serves_as_before(
    tether_launch, tmp_path
):
    # A package named `opentelemetry` that cannot be imported shadows the installed one.
    blocked = tmp_path / "blocked" / "opentelemetry"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('opentelemetry is not installed')\n")
    plugin = _launch_asked_for_traces(tether_launch, tmp_path, {"PYTHONPATH": str(blocked.parent)})
    kv = kv_pb2_grpc.KVStub(plugin.channel)
    metadata = [("traceparent", TRACEPARENT)]
    kv.Put(kv_pb2.PutRequest(key="k", value=b"v"), metadata=metadata, timeout=10)
    assert kv.Get(kv_pb2.GetRequest(key="k"), metadata=metadata, timeout=10).value == b"v"
    assert kv.Get(kv_pb2.GetRequest(key="tracing"), timeout=10).value == b"off"
    assert plugin.shutdown() == 0
    assert b"Traceback" not in plugin.stderr and b"ERROR" not in plugin.stderr, bytes(plugin.stderr)


def test_with_the_opentelemetry_packages_the_same_launch_is_traced(tether_launch, tmp_path):
    plugin = _launch_asked_for_traces(tether_launch, tmp_path, {})
    assert kv_pb2_grpc.KVStub(plugin.channel).Get(kv_pb2.GetRequest(key="tracing"), timeout=10).value == b"on"
    # No host serves the relay here: the plugin is killed, not asked to send its spans.


class _Recording:
    """``Tracing`` with OpenTelemetry's in-memory exporter in place of the host's relay."""

    def __init__(self):
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from tether_plugin import _otel

        self.exporter = InMemorySpanExporter()
        self.tracing = _otel.Tracing(None, {"TRACEPARENT": TRACEPARENT}, exporter=self.exporter)

    def spans(self):
        assert self.tracing.provider.force_flush()
        return {s.name: s for s in self.exporter.get_finished_spans()}


def _server(interceptor, *services):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), interceptors=[interceptor])
    for add, servicer in services:
        add(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


class _CallsBack(kv_pb2_grpc.KVServicer):
    """``Get`` asks the callback's ``Get`` first, on a traced channel; ``missing`` is NOT_FOUND."""

    def __init__(self, channel):
        self.channel = channel

    def Get(self, request, context):  # noqa: N802
        answer = kv_pb2_grpc.KVStub(self.channel).Get(kv_pb2.GetRequest(key="cb"))
        if request.key == "missing":
            context.abort(grpc.StatusCode.NOT_FOUND, "no such key")
        return answer


class _Callback(kv_pb2_grpc.KVServicer):
    def Get(self, request, context):  # noqa: N802
        return kv_pb2.GetResponse(value=b"callback")


def test_a_served_call_continues_the_callers_trace_and_a_call_it_makes_carries_it_on():
    recording = _Recording()
    tracing = recording.tracing
    callback, callback_at = _server(
        tracing.server_interceptor, (kv_pb2_grpc.add_KVServicer_to_server, _Callback())
    )
    traced = tracing.intercept(grpc.insecure_channel(callback_at))
    # The plugin's callback reaches a KV service standing in for the host's; health is untraced.
    plugin, plugin_at = _server(
        tracing.server_interceptor,
        (kv_pb2_grpc.add_KVServicer_to_server, _CallsBack(traced)),
        (health_pb2_grpc.add_HealthServicer_to_server, health.HealthServicer()),
    )
    try:
        with grpc.insecure_channel(plugin_at) as host:
            kv = kv_pb2_grpc.KVStub(host)
            assert (
                kv.Get(kv_pb2.GetRequest(key="k"), metadata=[("traceparent", TRACEPARENT)]).value
                == b"callback"
            )
            with pytest.raises(grpc.RpcError) as missing:
                kv.Get(kv_pb2.GetRequest(key="missing"), metadata=[("traceparent", TRACEPARENT)])
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND
            health_pb2_grpc.HealthStub(host).Check(health_pb2.HealthCheckRequest())
    finally:
        traced.close()
        plugin.stop(None)
        callback.stop(None)
    from opentelemetry.trace import SpanKind, StatusCode

    assert recording.tracing.provider.force_flush()
    spans = recording.exporter.get_finished_spans()

    served = [s for s in spans if s.kind == SpanKind.SERVER and s.name == "proto.KV/Get"]
    calls = [s for s in spans if s.kind == SpanKind.CLIENT]
    # Two calls served by the plugin, each calling back once; the callback's server span too.
    assert len(calls) == 2, [(s.name, s.kind) for s in spans]
    assert len(served) == 4, [(s.name, s.kind) for s in spans]
    from_host = [s for s in served if s.parent is not None and s.parent.span_id == int(HOST_SPAN, 16)]
    assert len(from_host) == 2
    for server in from_host:
        assert server.context.trace_id == int(HOST_TRACE, 16)
        assert server.attributes["rpc.system.name"] == "grpc"
        assert server.attributes["rpc.method"] == "proto.KV/Get"
        call = next(c for c in calls if c.parent.span_id == server.context.span_id)
        assert call.context.trace_id == int(HOST_TRACE, 16)
        assert call.attributes["rpc.response.status_code"] == "OK"
        answered = next(
            s for s in served if s.parent is not None and s.parent.span_id == call.context.span_id
        )
        assert answered.context.trace_id == int(HOST_TRACE, 16)
    codes = sorted(s.attributes["rpc.response.status_code"] for s in from_host)
    assert codes == ["NOT_FOUND", "OK"]
    # NOT_FOUND is the caller's mistake, not the server's failure.
    assert all(s.status.status_code != StatusCode.ERROR for s in from_host)
    assert not any(s.name.startswith("grpc.health") for s in spans)
    recording.tracing.close()


def test_the_start_up_span_is_a_child_of_the_hosts_launch_span():
    recording = _Recording()
    recording.tracing.start_span().end()
    started = recording.spans()["tether.plugin.start"]
    assert started.context.trace_id == int(HOST_TRACE, 16)
    assert started.parent.span_id == int(HOST_SPAN, 16)
    assert started.resource.attributes["service.name"]
    recording.tracing.close()
