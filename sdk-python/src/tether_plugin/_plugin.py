"""The :class:`Plugin` builder and the serve sequence: check, negotiate, listen, handshake,
serve, stop."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2

from . import _listen, _log, _mux, _stdio, _terminator, _tls, _tracing
from ._broker import GRPCBroker, _Setup, _Tls
from ._handshake import Handshake
from ._host import HostWatch, StopReason, StopWaiter
from ._launch import read_launch
from ._proto.plugin import (
    grpc_broker_pb2_grpc,
    grpc_controller_pb2,
    grpc_controller_pb2_grpc,
    grpc_stdio_pb2_grpc,
)
from .errors import ConfigurationError, ListenError, NotLaunchedByHost, PluginError, TlsError

log = logging.getLogger("tether_plugin")

# Recorded when the SDK is imported, before anything could re-parent the process: the host
# is the process that launched us.
_PARENT_PID = os.getppid()

#: The health service name hosts check (go-plugin's).
HEALTH_SERVICE = "plugin"
#: The app protocol version a plugin supports unless it says otherwise.
DEFAULT_APP_VERSION = 1
#: Seconds in-flight calls get to finish after a stop request before the plugin exits anyway.
DEFAULT_SHUTDOWN_GRACE = 1.0
#: Seconds beyond the grace period to wait for gRPC to report that it has stopped.
STOP_MARGIN = 1.0
#: Threads serving calls. Each open stream (a host's ``StreamStdio``, health ``Watch``) holds
#: one for its lifetime; further calls queue until one is free.
DEFAULT_MAX_WORKERS = 16

_REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"

#: Services the SDK serves itself; an author's service may not reuse these names.
BUILT_IN_SERVICES = frozenset(
    {
        health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
        grpc_controller_pb2.DESCRIPTOR.services_by_name["GRPCController"].full_name,
        "plugin.GRPCStdio",
        "plugin.GRPCBroker",
        reflection.SERVICE_NAME,
        _REFLECTION_V1,
    }
)

#: A generated ``add_<Service>Servicer_to_server(servicer, server)`` function.
ServiceAdder = Callable[[Any, Any], None]


@dataclass(frozen=True)
class _Service:
    add: ServiceAdder
    servicer: Any
    #: ``None``: served for every app version.
    app_version: int | None


class _Recorder:
    """Stands in for a ``grpc.Server`` while an adder runs: records what it registers, so the
    service names are known (for checks and reflection) before the real server exists."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.calls: list[Callable[[grpc.Server], None]] = []

    def add_generic_rpc_handlers(self, handlers: Iterable[grpc.GenericRpcHandler]) -> None:
        handlers = tuple(handlers)
        for handler in handlers:
            name = getattr(handler, "service_name", None)
            if callable(name):
                self.names.append(name())
        self.calls.append(lambda server: server.add_generic_rpc_handlers(handlers))

    def add_registered_method_handlers(self, service_name: str, method_handlers: dict) -> None:
        self.calls.append(lambda server: server.add_registered_method_handlers(service_name, method_handlers))


class Plugin:
    """A plugin being assembled: the handshake settings plus the gRPC services to serve.

    .. code-block:: python

        plugin = Plugin("BASIC_PLUGIN", "hello", app_versions=[1, 2])
        plugin.add_service(kv_pb2_grpc.add_KVServicer_to_server, MyKV())  # every version
        plugin.add_service(v2_pb2_grpc.add_ExtraServicer_to_server, Extra(), app_version=2)
        plugin.serve()  # never returns

    Options: ``transport`` (``"unix"``, or ``"tcp"`` on 127.0.0.1 in the host's port range),
    ``shutdown_grace`` (seconds, :data:`DEFAULT_SHUTDOWN_GRACE`), ``max_workers``
    (:data:`DEFAULT_MAX_WORKERS`), ``exit_with_host`` (stop when the host process exits,
    default on), ``ignore_sigint`` (default off: SIGINT stops the plugin like SIGTERM; go-plugin
    plugins ignore it), ``log_level`` and ``install_log_handler`` (hclog JSON on stderr via
    :func:`~tether_plugin.install_logging` unless the root logger has handlers), ``reflection``
    (serve gRPC server reflection, default on), ``relay_stdio`` (stream later
    ``sys.stdout``/``sys.stderr`` over ``plugin.GRPCStdio``, default on), ``multiplex``
    (accept go-plugin's multiplexed broker when the host offers it, default on).
    """

    def __init__(
        self,
        cookie_key: str,
        cookie_value: str,
        *,
        app_versions: Sequence[int] = (DEFAULT_APP_VERSION,),
        transport: Literal["unix", "tcp"] = "unix",
        shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
        max_workers: int = DEFAULT_MAX_WORKERS,
        exit_with_host: bool = True,
        ignore_sigint: bool = False,
        log_level: int = logging.INFO,
        install_log_handler: bool = True,
        reflection: bool = True,
        relay_stdio: bool = True,
        multiplex: bool = True,
    ) -> None:
        self.cookie_key = cookie_key
        self.cookie_value = cookie_value
        self.app_versions = tuple(app_versions)
        self.transport = transport
        self.shutdown_grace = shutdown_grace
        self.max_workers = max_workers
        self.exit_with_host = exit_with_host
        self.ignore_sigint = ignore_sigint
        self.log_level = log_level
        self.install_log_handler = install_log_handler
        self.reflection = reflection
        self.relay_stdio = relay_stdio
        self.multiplex = multiplex
        self._services: list[_Service] = []
        self._broker = GRPCBroker()

    def broker(self) -> GRPCBroker:
        """go-plugin's ``GRPCBroker``: dial services the host serves (``dial(id)`` with an id the
        host sent, ``host_services()`` for a tether host's host services) or serve callbacks to
        it (``accept_and_serve(next_id(), services)``). It works while the plugin serves, i.e.
        inside call handlers; hand it to your servicers when you build them.

        .. code-block:: python

            plugin = Plugin("BASIC_PLUGIN", "hello")
            plugin.add_service(counter_pb2_grpc.add_CounterServicer_to_server, Counter(plugin.broker()))
        """
        return self._broker

    def add_service(self, add: ServiceAdder, servicer: Any, *, app_version: int | None = None) -> Plugin:
        """Serves ``servicer`` through the generated ``add`` function (e.g.
        ``kv_pb2_grpc.add_KVServicer_to_server``) — for every negotiated app version, or only
        when ``app_version`` is negotiated (one of ``app_versions``). Returns ``self``."""
        self._services.append(_Service(add, servicer, app_version))
        return self

    def check(self) -> None:
        """Checks what is the author's responsibility, whatever the environment; raises
        :class:`~tether_plugin.errors.ConfigurationError`."""
        if not self.cookie_key or not self.cookie_value:
            raise ConfigurationError("misconfigured plugin: the magic cookie key and value must not be empty")
        if not self.app_versions or any(not isinstance(v, int) or v < 0 for v in self.app_versions):
            raise ConfigurationError(
                f"misconfigured plugin: app_versions={list(self.app_versions)!r} must list at "
                "least one non-negative integer"
            )
        if self.transport not in ("unix", "tcp"):
            raise ConfigurationError(
                f"misconfigured plugin: transport {self.transport!r} is not 'unix' or 'tcp'"
            )
        if self.shutdown_grace < 0 or self.max_workers < 1:
            raise ConfigurationError("misconfigured plugin: shutdown_grace must be >= 0 and max_workers >= 1")
        for service in self._services:
            if service.app_version is not None and service.app_version not in self.app_versions:
                raise ConfigurationError(
                    f"misconfigured plugin: a service was added for app protocol version "
                    f"{service.app_version}, which app_versions={list(self.app_versions)!r} does not list"
                )
        for version in self.app_versions:
            self._record(version)

    def _record(self, version: int) -> _Recorder:
        """Runs the adders of ``version``'s services against a recorder; checks for duplicates."""
        recorder = _Recorder()
        for service in self._services:
            if service.app_version in (None, version):
                service.add(service.servicer, recorder)
        seen = set(BUILT_IN_SERVICES)
        for name in recorder.names:
            if name in seen:
                raise ConfigurationError(
                    f"misconfigured plugin: gRPC service {name} is served more than once"
                )
            seen.add(name)
        return recorder

    def serve(self) -> NoReturn:
        """Runs the plugin until it is told to stop, then ends the process: status 0 after any
        :class:`StopReason`, 1 after an error, which is printed to stderr first (for a missing
        or wrong cookie, go-plugin's message for humans and nothing else).

        The process ends with ``os._exit`` once stdout, stderr and logging are flushed, so that
        a call still running after the grace period cannot keep it alive; ``atexit`` handlers do
        not run. Use :meth:`run` to do your own cleanup afterwards.
        """
        real_stderr = sys.__stderr__ or sys.stderr
        try:
            self.run()
        except NotLaunchedByHost as e:
            print(e, file=real_stderr, flush=True)
            sys.exit(1)
        except PluginError as e:
            # "[ERROR]" is the level prefix go-plugin hosts read from non-JSON stderr lines.
            print(f"[ERROR] plugin failed: {e}", file=real_stderr, flush=True)
            sys.exit(1)
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(0)

    def run(self) -> StopReason:
        """Like :meth:`serve`, but returns why the plugin stopped, raises
        :class:`~tether_plugin.errors.PluginError` instead of exiting, and leaves
        ``sys.stdout``/``sys.stderr`` as they were. Call it once per process, from the main
        thread."""
        self.check()
        launch = read_launch(
            os.environ,
            cookie_key=self.cookie_key,
            cookie_value=self.cookie_value,
            app_versions=self.app_versions,
            tcp=self.transport == "tcp",
        )
        if self.install_log_handler:
            _log.install_logging(self.log_level)
        log.debug("negotiated app protocol version %d", launch.app_version)

        host = HostWatch(_PARENT_PID if self.exit_with_host else 0)
        if host.gone:
            log.debug("the host exited before the plugin started serving")
            return StopReason.HOST_EXITED
        waiter = StopWaiter(host)
        try:
            waiter.install_signal_handlers(self.ignore_sigint)
            return self._serve(launch, waiter, _traces(launch.host_services, self._broker))
        finally:
            waiter.close()
            host.close()

    def _serve(self, launch, waiter: StopWaiter, tracing: Any) -> StopReason:
        credentials = interceptors = identity = terminator = None
        started = tracing.start_span() if tracing is not None else None
        host_cert = launch.client_cert_der
        if host_cert is not None:
            try:
                identity = _tls.generate_identity()
                if _terminator.grpc_tls_can_verify(host_cert):
                    credentials = _tls.server_credentials(identity, host_cert)
                    interceptors = [_tls.HostPin(host_cert)]
                else:
                    context = _terminator.ssl_context(identity, host_cert)
            except Exception as e:  # cryptography, ssl and grpc raise various types
                raise TlsError(f"cannot set up AutoMTLS: {e}") from e

        if tracing is not None:
            interceptors = [*(interceptors or ()), tracing.server_interceptor]
        executor = futures.ThreadPoolExecutor(
            max_workers=self.max_workers, thread_name_prefix="tether-plugin"
        )
        server = grpc.server(
            executor,
            interceptors=interceptors,
            # gRPC sets SO_REUSEPORT by default, which would let two servers share a port (and
            # split its connections): each plugin must own its port.
            options=[("grpc.so_reuseport", 0)],
        )
        health_servicer = health.HealthServicer()
        health_servicer.set(HEALTH_SERVICE, health_pb2.HealthCheckResponse.SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        grpc_controller_pb2_grpc.add_GRPCControllerServicer_to_server(_Controller(waiter), server)
        relay = _stdio.StdioRelay({_stdio.STDOUT: 1, _stdio.STDERR: 2})
        grpc_stdio_pb2_grpc.add_GRPCStdioServicer_to_server(_stdio.StdioServicer(relay), server)
        grpc_broker_pb2_grpc.add_GRPCBrokerServicer_to_server(self._broker.servicer(), server)
        recorder = self._record(launch.app_version)
        for register in recorder.calls:
            register(server)
        if self.reflection:
            _enable_reflection(server, [*recorder.names, *sorted(BUILT_IN_SERVICES)])

        multiplex = launch.multiplex is True and self.multiplex
        inner = main_private = router = mux_listener = None
        if identity is not None and credentials is None:
            # TLS terminated in Python (see _terminator): gRPC listens in plaintext on a socket
            # in a private directory, the terminator on the announced address.
            inner = _listen.private_socket()
            try:
                _listen.grpc_binder(server, None)(f"unix:{inner.address}")
            except RuntimeError as e:
                inner.cleanup()
                raise ListenError(f"cannot listen on the private unix socket {inner.address!r}: {e}") from e
            terminator = _terminator.TlsTerminator(context, host_cert, inner.address)
            add = terminator.listen
        else:
            add = _listen.grpc_binder(server, credentials)
        try:
            if multiplex:
                # The announced socket is the plugin's own (its first connection carries yamux);
                # the main server listens privately and the host's main stream is relayed to it.
                main_private = _listen.private_socket()
                try:
                    add(f"unix:{main_private.address}")
                except RuntimeError as e:
                    raise ListenError(
                        f"cannot listen on the private unix socket {main_private.address!r}: {e}"
                    ) from e
                router = _mux.MuxRouter(main_private.address)
                sockets: list = []
                bound = _listen.bind(_mux.MuxListener.binder(sockets), launch, self.transport)
                mux_listener = _mux.MuxListener(sockets[0], router.start)
            else:
                bound = _listen.bind(add, launch, self.transport)
        except BaseException:
            for private in (inner, main_private):
                if private is not None:
                    private.cleanup()
            raise
        self._broker._connect_setup(
            _Setup(
                tls=_Tls(identity, host_cert, credentials is not None) if identity is not None else None,
                # Brokered sockets go next to the main one (the host's directory or the
                # plugin's private one); TCP plugins broker over TCP.
                socket_dir=os.path.dirname(bound.address) if bound.network == "unix" else None,
                host_services=launch.host_services,
                router=router,
                tracing=tracing,
            )
        )
        saved = (sys.stdout, sys.stderr)
        try:
            server.start()
            if terminator is not None:
                try:
                    terminator.start()
                except RuntimeError as e:
                    raise ListenError(str(e)) from e
            handshake = Handshake(
                app_version=launch.app_version,
                network=bound.network,
                address=bound.address,
                server_cert_der=identity.cert_der if identity else None,
                # The 7th field only when the host offered multiplexing (older hosts split into 6).
                multiplex=None if launch.multiplex is None else multiplex,
            )
            if mux_listener is not None:
                mux_listener.start()
            _print_handshake(handshake.line())
            if started is not None:
                started.end()
                started = None
            log.debug(
                "serving on %s %s (%s, %s broker)",
                bound.network,
                bound.address,
                "AutoMTLS" if identity else "plaintext",
                "multiplexed" if multiplex else "default",
            )
            if self.relay_stdio:
                sys.stdout = _stdio.relay_text_stream(relay, _stdio.STDOUT, saved[0], 1)
                sys.stderr = _stdio.relay_text_stream(relay, _stdio.STDERR, saved[1], 2)
            reason = waiter.wait()
            log.debug("stopping: %s", reason.value)
        finally:
            health_servicer.enter_graceful_shutdown()
            if started is not None:
                started.end()  # the start failed
            if tracing is not None:
                tracing.close()  # the last spans, while the host-services connection is up
            self._broker.close()
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            relay.close()
            # gRPC cancels what is still running once the grace period is over, then sets the
            # event; the margin only bounds a bug there.
            stopped = server.stop(self.shutdown_grace)
            if not stopped.wait(self.shutdown_grace + STOP_MARGIN):
                log.warning("calls still running after the shutdown grace period; stopping anyway")
            if terminator is not None:
                terminator.stop()
            if router is not None:
                router.close()
            if mux_listener is not None:
                mux_listener.close()
            sys.stdout, sys.stderr = saved
            executor.shutdown(wait=False, cancel_futures=True)
            bound.cleanup()
            for private in (inner, main_private):
                if private is not None:
                    private.cleanup()
        return reason


def serve(
    cookie_key: str,
    cookie_value: str,
    services: Iterable[tuple[ServiceAdder, Any]] = (),
    **options: Any,
) -> NoReturn:
    """Serves ``services`` (pairs of a generated ``add_…_to_server`` function and a servicer)
    as a plugin until the host stops it, then exits. ``options`` are :class:`Plugin`'s.

    .. code-block:: python

        tether_plugin.serve("BASIC_PLUGIN", "hello",
                            [(kv_pb2_grpc.add_KVServicer_to_server, FileKV())], app_versions=[1])
    """
    plugin = Plugin(cookie_key, cookie_value, **options)
    for add, servicer in services:
        plugin.add_service(add, servicer)
    plugin.serve()


class _Controller(grpc_controller_pb2_grpc.GRPCControllerServicer):
    """``plugin.GRPCController``: the host asks the plugin to stop."""

    def __init__(self, waiter: StopWaiter) -> None:
        self._waiter = waiter

    def Shutdown(self, request, context):  # noqa: N802 (gRPC method name)
        # The server stops gracefully, so this response is still delivered.
        self._waiter.request(StopReason.SHUTDOWN_REQUESTED)
        return grpc_controller_pb2.Empty()


def _enable_reflection(server: grpc.Server, names: list[str]) -> None:
    """Serves reflection as ``grpc.reflection.v1alpha`` (grpcio-reflection) and, with the same
    wire-identical messages, as ``grpc.reflection.v1``."""
    servicer = reflection.ReflectionServicer(names)
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                reflection.SERVICE_NAME,
                {"ServerReflectionInfo": _reflection_handler(servicer)},
            ),
            grpc.method_handlers_generic_handler(
                _REFLECTION_V1,
                {"ServerReflectionInfo": _reflection_handler(servicer)},
            ),
        )
    )


def _reflection_handler(servicer: reflection.ReflectionServicer) -> grpc.RpcMethodHandler:
    return grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )


def _traces(host_services: bool | None, broker: GRPCBroker) -> Any:
    """The plugin's tracing (:mod:`._tracing`), or ``None`` — when the host sent no
    ``TRACEPARENT`` (it records no trace), serves no host services (no relay to send spans to),
    or the OpenTelemetry packages are not installed."""
    if not os.environ.get(_tracing.ENV_TRACEPARENT) or host_services is not True:
        return None
    try:
        from . import _otel
    except ImportError as e:
        log.debug("not tracing: the OpenTelemetry packages are not installed (%s)", e)
        return None
    return _otel.Tracing(broker, os.environ)


def _print_handshake(line: str) -> None:
    """Writes the handshake line to file descriptor 1, after anything already buffered."""
    sys.stdout.flush()
    data = line.encode()
    while data:
        data = data[os.write(1, data) :]
