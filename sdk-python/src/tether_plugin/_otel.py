"""The OpenTelemetry half of :mod:`._tracing` (imported only when the packages are installed):
the plugin's tracer provider, the gRPC interceptors that make the call spans, the start-up span,
and the exporter that sends finished spans to the host's relay.

The spans are the host's and the Rust SDK's: named ``package.Service/Method``, kind server or
client, with OpenTelemetry's RPC attributes (``rpc.system.name`` = ``grpc``, ``rpc.method``,
``rpc.response.status_code`` as gRPC's upper-case code name); a client span is an error for every
status but ``OK``, a server span only for the statuses that mean the server failed. Trace context
crosses as W3C trace context (``traceparent``/``tracestate`` metadata), whatever
``OTEL_PROPAGATORS`` says: that is what the host speaks.

The OTLP encoding is OpenTelemetry's own (``opentelemetry-exporter-otlp-proto-common``), sent
with ``opentelemetry-proto``'s ``TraceService`` stub on the channel the broker already has —
not ``opentelemetry-exporter-otlp-proto-grpc``, whose exporter can only dial a network address.
"""

from __future__ import annotations

import collections
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ._tracing import (
    ENV_TRACEPARENT,
    ENV_TRACESTATE,
    SPAN_BATCH_DELAY,
    SPAN_EXPORT_TIMEOUT,
    SPAN_FLUSH_TIMEOUT,
    untraced,
)
from .errors import GrpcBrokerError

log = logging.getLogger("tether_plugin")

#: The name of the SDK's instrumentation scope.
SCOPE = "tether-plugin"

_W3C = TraceContextTextMapPropagator()

#: Server statuses that mean the server failed (OpenTelemetry's gRPC conventions).
_SERVER_ERRORS = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)


class Tracing:
    """The plugin's traces: made by :func:`._tracing.setup` when the host asked for them."""

    def __init__(self, broker: Any, environ: Mapping[str, str], exporter: SpanExporter | None = None) -> None:
        self._environ = environ
        self.provider = TracerProvider(resource=_resource(), shutdown_on_exit=False)
        self.provider.add_span_processor(
            BatchSpanProcessor(
                exporter or HostExporter(broker),
                schedule_delay_millis=SPAN_BATCH_DELAY * 1000,
                export_timeout_millis=SPAN_EXPORT_TIMEOUT * 1000,
            )
        )
        self.tracer = self.provider.get_tracer(SCOPE)
        # The author's own spans (``trace.get_tracer(__name__)``) go to the host too, unless the
        # author installed a provider of their own, which stays theirs.
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            trace.set_tracer_provider(self.provider)
        self.server_interceptor = _ServerTracing(self.tracer)
        self.client_interceptor = _ClientTracing(self.tracer)

    def start_span(self) -> trace.Span:
        """The start-up span, a child of the host's launch span (``TRACEPARENT``); end it once
        the handshake is out."""
        carrier = {"traceparent": self._environ.get(ENV_TRACEPARENT, "")}
        if self._environ.get(ENV_TRACESTATE):
            carrier["tracestate"] = self._environ[ENV_TRACESTATE]
        return self.tracer.start_span("tether.plugin.start", context=_W3C.extract(carrier))

    def intercept(self, channel: grpc.Channel) -> grpc.Channel:
        """``channel`` with the client spans (closing it closes ``channel``)."""
        return grpc.intercept_channel(channel, self.client_interceptor)

    def close(self) -> None:
        """Sends what is finished to the host, waiting at most ``SPAN_FLUSH_TIMEOUT``. The batch
        thread (a daemon) is left to end with the process: shutting the provider down could wait
        for an export far longer than that."""
        if not self.provider.force_flush(int(SPAN_FLUSH_TIMEOUT * 1000)):
            log.debug("the last spans did not reach the host within %gs", SPAN_FLUSH_TIMEOUT)


def _resource() -> Resource:
    """``service.name`` is the script's file name (``counter_plugin.py``), as the Rust SDK's is
    its binary's."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "tether-plugin"
    return Resource.create({SERVICE_NAME: name or "tether-plugin"})


class HostExporter(SpanExporter):
    """Exports to the host's relay: the OTLP trace service on the host-services connection."""

    def __init__(self, broker: Any) -> None:
        self._broker = broker

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            channel = self._broker.host_services()
            trace_service_pb2_grpc.TraceServiceStub(channel).Export(
                encode_spans(spans), timeout=SPAN_EXPORT_TIMEOUT
            )
        except (grpc.RpcError, GrpcBrokerError) as e:
            log.debug("the host did not take %d spans: %s", len(spans), e)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release: the connection is the broker's."""

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _method_name(method: str | bytes) -> str:
    text = method.decode() if isinstance(method, bytes) else method
    return text.lstrip("/")


def _start(
    tracer: trace.Tracer, method: str, kind: SpanKind, parent: otel_context.Context | None
) -> trace.Span:
    name = _method_name(method)
    return tracer.start_span(
        name,
        context=parent,
        kind=kind,
        attributes={"rpc.system.name": "grpc", "rpc.method": name},
    )


def _end(span: trace.Span, code: grpc.StatusCode | None, server: bool) -> None:
    code = code or grpc.StatusCode.OK
    span.set_attribute("rpc.response.status_code", code.name)
    if code in _SERVER_ERRORS if server else code != grpc.StatusCode.OK:
        span.set_status(Status(StatusCode.ERROR))
    span.end()


class _ServerTracing(grpc.ServerInterceptor):
    """A server span around every served call, continuing the caller's ``traceparent``."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    def intercept_service(self, continuation: Callable, handler_call_details: Any) -> Any:
        handler = continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or untraced("/" + _method_name(method)):
            return handler
        tracer = self._tracer

        def traced(behavior: Callable, streams_out: bool) -> Callable:
            def run(request: Any, context: grpc.ServicerContext) -> Any:
                carrier = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
                span = _start(tracer, method, SpanKind.SERVER, _W3C.extract(carrier))
                if streams_out:
                    return _traced_stream(span, behavior(request, context), context)
                with trace.use_span(
                    span, end_on_exit=False, record_exception=False, set_status_on_exception=False
                ):
                    try:
                        response = behavior(request, context)
                    except BaseException:
                        _end(span, context.code() or grpc.StatusCode.UNKNOWN, server=True)
                        raise
                _end(span, context.code(), server=True)
                return response

            return run

        kinds = {
            "unary_unary": False,
            "unary_stream": True,
            "stream_unary": False,
            "stream_stream": True,
        }
        replaced = {
            kind: traced(getattr(handler, kind), streams_out)
            for kind, streams_out in kinds.items()
            if getattr(handler, kind) is not None
        }
        return handler._replace(**replaced)


def _traced_stream(span: trace.Span, responses: Iterator, context: grpc.ServicerContext) -> Iterator:
    """The responses of a streaming call, produced inside ``span``, which ends with the stream."""
    token = None
    try:
        token = otel_context.attach(trace.set_span_in_context(span))
        yield from responses
    except BaseException:
        _end(span, context.code() or grpc.StatusCode.UNKNOWN, server=True)
        raise
    else:
        _end(span, context.code(), server=True)
    finally:
        if token is not None:
            otel_context.detach(token)


_Details = collections.namedtuple(
    "_Details", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")
)


class _ClientCallDetails(_Details, grpc.ClientCallDetails):
    """A call's details with the trace context added to its metadata."""


class _ClientTracing(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """A client span around every call on a brokered channel, its context in the metadata."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    def _call(self, continuation: Callable, details: Any, request: Any) -> Any:
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        if untraced(method):
            return continuation(details, request)
        span = _start(self._tracer, method, SpanKind.CLIENT, None)
        metadata = list(details.metadata or ())
        carrier: dict[str, str] = {}
        _W3C.inject(carrier, context=trace.set_span_in_context(span))
        metadata.extend(carrier.items())
        traced = _ClientCallDetails(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )
        try:
            outcome = continuation(traced, request)
        except grpc.RpcError as e:
            _end(span, e.code() if isinstance(e, grpc.Call) else grpc.StatusCode.UNKNOWN, server=False)
            raise
        outcome.add_done_callback(lambda call: _end(span, call.code(), server=False))
        return outcome

    intercept_unary_unary = _call
    intercept_unary_stream = _call
    intercept_stream_unary = _call
    intercept_stream_stream = _call
