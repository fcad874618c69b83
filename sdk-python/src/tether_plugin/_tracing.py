"""The plugin's traces, with no code of the author's — when the OpenTelemetry packages are
installed (they are optional: without them nothing here is used and nothing changes).

When the host records the launching span (it sent ``TRACEPARENT``) and serves host services,
:class:`~tether_plugin._otel.Tracing` is set up: every call the plugin serves is a
server span continuing the caller's ``traceparent`` metadata, every call it makes on a brokered
channel (callbacks, host services) is a client span carrying the current context, its start-up
is a span under the host's launch span, and the finished spans go in batches to the host's OTLP
relay over the host-services connection (the plugin has no network and no exporter settings).
This module holds the names and settings; the OpenTelemetry parts live in :mod:`._otel`,
which the plugin imports only when the host asked for traces.
"""

from __future__ import annotations

#: The OpenTelemetry environment-variable carrier: the host's launch span (W3C ``traceparent``).
ENV_TRACEPARENT = "TRACEPARENT"
#: Its vendor-specific trace state (W3C ``tracestate``).
ENV_TRACESTATE = "TRACESTATE"
#: Seconds finished spans wait before they are sent to the host, at most (OpenTelemetry's
#: default is 5 s; a plugin's life is often shorter than that). The Rust SDK's
#: ``SPAN_BATCH_DELAY``.
SPAN_BATCH_DELAY = 0.2
#: Seconds a stopping plugin waits for its last spans to reach the host.
SPAN_FLUSH_TIMEOUT = 2.0
#: Seconds one batch may take to reach the host.
SPAN_EXPORT_TIMEOUT = 5.0
#: What tracing needs installed (``pip install tether-plugin[telemetry]``).
TRACING_PACKAGES = (
    "opentelemetry-api",
    "opentelemetry-sdk",
    "opentelemetry-exporter-otlp-proto-common",
)
#: Path prefixes of the services whose calls are never traced: OTLP exports themselves (a span
#: about exporting spans would be exported in turn) and the protocol's plumbing — the same list
#: as the host's (``tether_transport::telemetry::UNTRACED_SERVICES``).
UNTRACED_SERVICES = (
    "/opentelemetry.proto.collector.",
    "/plugin.GRPCBroker/",
    "/plugin.GRPCStdio/",
    "/plugin.GRPCController/",
    "/grpc.health.v1.Health/",
    "/grpc.reflection.",
)


def untraced(method: str) -> bool:
    """Whether a call to ``method`` (``/package.Service/Method``) is left untraced."""
    return method.startswith(UNTRACED_SERVICES)
