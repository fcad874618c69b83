"""``plugin.GRPCBroker``: callbacks both ways, in go-plugin's default and multiplexed modes.

Each side numbers its own broker ids from 1. To offer a service, a side listens on a new socket,
serves gRPC there and announces ``ConnInfo{service_id, network, address}`` on the broker stream
(``StartStream``, which the host opens right after connecting); the other side waits for that
announcement and connects (:meth:`GRPCBroker.dial`). Ids travel inside app messages (e.g. the
``add_server`` field of go-plugin's counter example). A tether host also serves *host services*
to every plugin under :data:`HOST_SERVICES_ID`, without an id in any message
(:meth:`GRPCBroker.host_services`); a tether catalog host relays calls to other plugins of its
catalog when granted (:meth:`GRPCBroker.open_plugin`, see :mod:`._plugins`).

Brokered connections use the same AutoMTLS identities as the main connection: the plugin
presents its own certificate and accepts only the host's exact certificate. When gRPC's TLS
cannot verify the host's certificate (go-plugin hosts use P-521), dials go through a local relay
that does TLS with Python's :mod:`ssl` (see :mod:`._terminator`), and served ids are terminated
the same way as the main socket.

In the multiplexed mode (the host set ``PLUGIN_MULTIPLEX_GRPC`` and the plugin accepted) nothing
is announced: knocks on the broker stream say which id the next stream of the one connection is
for (see :mod:`._mux`).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import queue
import secrets as _random
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc

from . import _listen, _mux, _plugins, _terminator, _tls
from ._channel import DialledChannel, SharedChannel
from ._proto.plugin import grpc_broker_pb2, grpc_broker_pb2_grpc
from .errors import GrpcBrokerError

log = logging.getLogger("tether_plugin")

#: The broker id under which a tether host serves its host services (``u32::MAX``, an id
#: neither side's counter reaches).
HOST_SERVICES_ID = 0xFFFF_FFFF
#: Seconds :meth:`GRPCBroker.dial` waits for the peer's announcement of an id (go-plugin's 5 s).
DEFAULT_DIAL_TIMEOUT = 5.0
#: Seconds an announced id nobody dialled is kept (go-plugin's 5 s); host services never expire.
DEFAULT_UNCLAIMED_TTL = 5.0
#: Announcements kept at most; the oldest unclaimed one is dropped beyond this.
MAX_UNCLAIMED = 1024
#: Threads serving calls on one id served with :meth:`GRPCBroker.accept_and_serve`.
DEFAULT_SERVED_WORKERS = 4


# For unix targets gRPC would send the socket path as :authority, which HTTP/2 servers such as
# tether hosts' (hyper) reject as malformed; go-plugin uses "localhost" too.
_AUTHORITY = [("grpc.default_authority", _tls.SERVER_NAME)]


@dataclass(frozen=True)
class _Tls:
    identity: _tls.Identity
    host_cert_der: bytes
    #: Whether gRPC's own TLS can verify the host's certificate (else Python's ssl does).
    grpc_can_verify: bool


@dataclass(frozen=True)
class _Setup:
    tls: _Tls | None
    #: Where served ids listen: a unix socket directory, or ``None`` for loopback TCP.
    socket_dir: str | None
    #: ``TETHER_HOST_SERVICES``: ``True`` served, ``False`` none (``host_services`` fails at
    #: once), ``None`` not said (go-plugin hosts): wait for the announcement.
    host_services: bool | None = None
    #: The multiplexed mode's router (``None`` in the default mode).
    router: _mux.MuxRouter | None = None
    #: The plugin's tracing (``_otel.Tracing``), when the host asked for traces: its interceptors
    #: trace the calls on brokered channels and the calls served on brokered ids.
    tracing: Any = None


class Served:
    """An id served with :meth:`GRPCBroker.accept_and_serve`; :meth:`stop` ends it (the broker
    stops it too when the plugin stops)."""

    def __init__(self, broker_id: int, server: grpc.Server, cleanup: list) -> None:
        #: The broker id (send it to the host in an app message).
        self.id = broker_id
        self._server = server
        self._cleanup = cleanup
        self._stopped = False

    def stop(self, grace: float | None = None) -> None:
        """Stops serving and removes the socket."""
        if self._stopped:
            return
        self._stopped = True
        self._server.stop(grace).wait()
        for cleanup in self._cleanup:
            cleanup()


class GRPCBroker:
    """The plugin's side of go-plugin's ``GRPCBroker``. Get it from :meth:`Plugin.broker`; it
    works while the plugin serves (inside call handlers).

    .. code-block:: python

        channel = broker.dial(request.add_server)        # an id the host sent
        total = AddHelperStub(channel).Sum(SumRequest(a=1, b=2)).r
        host = broker.host_services()                    # a tether host's host services
        other = broker.open_plugin("b")                  # catalog plugin b, if granted
        served = broker.accept_and_serve(broker.next_id(),
                                         [(add_CallbackServicer_to_server, Callback())])
    """

    def __init__(
        self,
        *,
        dial_timeout: float = DEFAULT_DIAL_TIMEOUT,
        unclaimed_ttl: float = DEFAULT_UNCLAIMED_TTL,
    ) -> None:
        self.dial_timeout = dial_timeout
        self.unclaimed_ttl = unclaimed_ttl
        self._setup: _Setup | None = None
        self._next_id = 0
        self._lock = threading.Condition()
        # id -> (ConnInfo, monotonic arrival time)
        self._arrived: dict[int, tuple[Any, float]] = {}
        self._outbound: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self._stream_open = False
        self._host_channel: grpc.Channel | None = None
        self._channels: list[DialledChannel] = []
        self._served: list[Served] = []
        self._mux: _mux.MuxBroker | None = None

    # -- the author's API ------------------------------------------------------------------

    def next_id(self) -> int:
        """A fresh broker id (1, 2, …) for :meth:`accept_and_serve`."""
        with self._lock:
            self._next_id += 1
            return self._next_id

    def dial(self, broker_id: int, timeout: float | None = None) -> grpc.Channel:
        """A channel to the service the host announced under ``broker_id``, waiting up to
        ``timeout`` seconds (default :attr:`dial_timeout`) for the announcement. The channel is
        closed when the plugin stops (or close it yourself).

        Raises :class:`~tether_plugin.errors.GrpcBrokerError` when the broker is not serving yet or
        has stopped, no announcement arrives in time, or the announced address is not an
        absolute unix socket path or a loopback TCP address.
        """
        return self._traced(self._dial(broker_id, timeout))

    def _dial(self, broker_id: int, timeout: float | None) -> DialledChannel:
        timeout = self.dial_timeout if timeout is None else timeout
        mux = self._require_mux()
        cleanups: list = []
        if mux is not None:
            relay = mux.dial(broker_id, timeout, self._stream_state)
            cleanups.append(lambda: mux.release(relay))
            info = grpc_broker_pb2.ConnInfo(service_id=broker_id, network="unix", address=relay.address)
        else:
            info = self._wait_for(broker_id, timeout)
        channel = DialledChannel(self._connect(broker_id, info, cleanups), cleanups, self._forget)
        with self._lock:
            closed = self._closed
            if not closed:
                self._channels.append(channel)
        if closed:
            channel.close()
            raise GrpcBrokerError(f"broker id {broker_id}: the broker has stopped (the plugin is stopping)")
        return channel

    def _traced(self, channel: grpc.Channel) -> grpc.Channel:
        """``channel``, whose calls are traced when the host asked for traces."""
        tracing = self._setup.tracing if self._setup is not None else None
        return channel if tracing is None else tracing.intercept(channel)

    def _forget(self, channel: DialledChannel) -> None:
        """A dialled channel was closed: the broker no longer holds it."""
        with self._lock:
            if channel in self._channels:
                self._channels.remove(channel)

    def host_services(self, timeout: float | None = None) -> grpc.Channel:
        """A channel to the services a tether host serves to all its plugins (its
        ``host_service``\\ s), dialled on first use and then shared (closing what this returns
        leaves it open for the other callers). A tether host that serves
        none says so at launch (``TETHER_HOST_SERVICES=none``): then this raises
        :class:`~tether_plugin.errors.GrpcBrokerError` at once. go-plugin hosts serve none and
        do not say so: then it raises after ``timeout`` seconds (default
        :attr:`dial_timeout`)."""
        with self._lock:
            if self._host_channel is not None:
                return self._traced(SharedChannel(self._host_channel))
        if self._require_setup().host_services is False:
            raise GrpcBrokerError(
                f"broker id {HOST_SERVICES_ID}: the host serves no host services (it said so at "
                "launch, TETHER_HOST_SERVICES=none; go-plugin hosts never do; a tether host does "
                "when it registers host_service)"
            )
        channel = self._dial(HOST_SERVICES_ID, timeout)
        with self._lock:
            if self._host_channel is None:
                self._host_channel = channel
                channel = None
            shared = self._host_channel
        if channel is not None:
            channel.close()  # another caller's dial won the race
        return self._traced(SharedChannel(shared))

    def open_plugin(self, plugin: str, timeout: float | None = None) -> grpc.Channel:
        """A channel to the services of the host's catalog plugin ``plugin``, relayed by the host
        (a tether ``Supervisor``), which starts it if needed — when the operator's grants let this
        plugin call it (``calls = ["NAME"]`` under ``[plugins.THIS]``). Use it with that
        plugin's generated stubs; this plugin never learns its address, certificate or secrets.
        Close it when done (or leave it to the broker when the plugin stops).

        Asks ``tether.plugins.v1.Plugins/Open`` on the :meth:`host services <host_services>`
        for a broker id, then :meth:`dials <dial>` it; ``timeout`` is as theirs. Works in both
        broker modes. Raises :class:`~tether_plugin.errors.PluginRefusedError` when the host
        refuses (not granted: the message names the grants line to add; its ``code`` and
        ``details`` are the host's), else :class:`~tether_plugin.errors.GrpcBrokerError` as
        :meth:`host_services` and :meth:`dial`.
        """
        broker_id = _plugins.open_broker_id(self.host_services(timeout), plugin)
        return self.dial(broker_id, timeout)

    def accept_and_serve(
        self,
        broker_id: int,
        services: Iterable[tuple[Any, Any]],
        *,
        max_workers: int = DEFAULT_SERVED_WORKERS,
    ) -> Served:
        """Serves ``services`` (pairs of a generated ``add_…_to_server`` function and a
        servicer) on a new socket and announces it to the host under ``broker_id``; the host
        reaches it by dialling that id. Same TLS as the main connection. Returns a
        :class:`Served` handle."""
        setup = self._require_setup()
        executor = futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="tether-broker")
        tls = setup.tls
        interceptors = [_tls.HostPin(tls.host_cert_der)] if tls and tls.grpc_can_verify else []
        if setup.tracing is not None:
            interceptors.append(setup.tracing.server_interceptor)
        server = grpc.server(executor, interceptors=interceptors, options=[("grpc.so_reuseport", 0)])
        for add, servicer in services:
            add(servicer, server)
        cleanup: list = [lambda: executor.shutdown(wait=False, cancel_futures=True)]
        mux = self._require_mux()
        try:
            if mux is not None:
                # Served on a socket in a private directory; the host's streams are relayed to it.
                private = _listen.private_socket()
                cleanup.append(private.cleanup)
                cleanup.insert(0, lambda: mux.router.unroute(broker_id))
                setup = _Setup(tls=setup.tls, socket_dir=private.private_dir)
            network, address = self._listen(server, setup, cleanup)
            server.start()
        except BaseException:
            server.stop(None)
            for c in reversed(cleanup):
                c()
            raise
        served = Served(broker_id, server, cleanup)
        with self._lock:
            if self._closed:
                served.stop()
                raise GrpcBrokerError(
                    f"broker id {broker_id}: the broker has stopped (the plugin is stopping)"
                )
            self._served.append(served)
        if mux is not None:
            mux.served(broker_id, address, self.unclaimed_ttl)
        else:
            self._outbound.put(
                grpc_broker_pb2.ConnInfo(service_id=broker_id, network=network, address=address)
            )
        return served

    # -- used by the SDK ------------------------------------------------------------------

    def _connect_setup(self, setup: _Setup) -> None:
        """Makes the broker usable (called once the main socket is bound)."""
        with self._lock:
            self._setup = setup
            if setup.router is not None:
                self._mux = _mux.MuxBroker(setup.router, self._outbound.put, self._lock)

    def servicer(self) -> grpc_broker_pb2_grpc.GRPCBrokerServicer:
        """The ``plugin.GRPCBroker`` service the plugin serves to the host."""
        return _BrokerServicer(self)

    def close(self) -> None:
        """Stops every served id, closes dialled channels, fails waiting and future dials, and
        ends the broker stream."""
        with self._lock:
            self._closed = True
            served, self._served = self._served, []
            channels, self._channels = self._channels, []
            mux = self._mux
            self._lock.notify_all()
        if mux is not None:
            mux.close()
        self._outbound.put(None)
        for s in served:
            s.stop(0)
        for channel in channels:
            channel.close()

    def _arrive(self, info: Any) -> None:
        """Records the host's announcement ``info`` (a ``ConnInfo``)."""
        if info.HasField("knock") and (info.knock.knock or info.knock.ack):
            with self._lock:
                mux = self._mux
            if mux is None:
                log.warning(
                    "ignoring a multiplexing knock for id %d: this connection does not multiplex",
                    info.service_id,
                )
            else:
                mux.receive(info)
            return
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            if len(self._arrived) >= MAX_UNCLAIMED:
                oldest = min(
                    (i for i in self._arrived if i != HOST_SERVICES_ID),
                    key=lambda i: self._arrived[i][1],
                    default=None,
                )
                if oldest is not None:
                    del self._arrived[oldest]
            self._arrived[info.service_id] = (info, now)
            self._lock.notify_all()

    # -- internals ------------------------------------------------------------------------

    def _require_setup(self) -> _Setup:
        with self._lock:
            if self._closed:
                raise GrpcBrokerError("the broker has stopped (the plugin is stopping)")
            if self._setup is None:
                raise GrpcBrokerError(
                    "the broker is not connected yet: use it while the plugin serves (inside a call handler)"
                )
            return self._setup

    def _require_mux(self) -> _mux.MuxBroker | None:
        self._require_setup()
        with self._lock:
            return self._mux

    def _stream_state(self) -> str:
        return "broker stream " + (
            "open" if self._stream_open else "not open (the host never started StartStream)"
        )

    def _expire(self, now: float) -> None:
        stale = [
            i
            for i, (_, at) in self._arrived.items()
            if i != HOST_SERVICES_ID and now - at >= self.unclaimed_ttl
        ]
        for i in stale:
            del self._arrived[i]

    def _wait_for(self, broker_id: int, timeout: float) -> Any:
        self._require_setup()
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                if self._closed:
                    raise GrpcBrokerError(
                        f"broker id {broker_id}: the broker has stopped (the plugin is stopping)"
                    )
                self._expire(time.monotonic())
                entry = self._arrived.get(broker_id)
                if entry is not None:
                    if broker_id != HOST_SERVICES_ID:
                        del self._arrived[broker_id]  # each announcement is dialled once
                    return entry[0]
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    what = (
                        "the host serves no host services (go-plugin hosts never do; a tether host "
                        "does when it registers host_service)"
                        if broker_id == HOST_SERVICES_ID
                        else "check that the host serves the id it sent before the plugin dials it"
                    )
                    stream = "open" if self._stream_open else "not open (the host never started StartStream)"
                    raise GrpcBrokerError(
                        f"broker id {broker_id}: no connection info from the host within "
                        f"{timeout:g}s (broker stream {stream}); {what}"
                    )
                self._lock.wait(remaining)

    def _connect(self, broker_id: int, info: Any, cleanups: list) -> grpc.Channel:
        """A channel to ``info``'s address; what it needs stopped when closed goes to
        ``cleanups``."""
        target = _dial_target(broker_id, info.network, info.address)
        setup = self._require_setup()
        tls = setup.tls
        if tls is None:
            return grpc.insecure_channel(target, options=_AUTHORITY)
        if tls.grpc_can_verify:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_tls.der_to_pem(tls.host_cert_der),
                private_key=tls.identity.key_pem,
                certificate_chain=tls.identity.cert_pem,
            )
            return grpc.secure_channel(
                target,
                credentials,
                options=[("grpc.ssl_target_name_override", _tls.SERVER_NAME), *_AUTHORITY],
            )
        # gRPC's TLS cannot verify the host (P-521): a local relay does TLS with Python's ssl.
        relay = _terminator.TlsDialRelay(
            _terminator.client_ssl_context(tls.identity, tls.host_cert_der),
            tls.host_cert_der,
            info.network,
            info.address,
        )
        relay.start()
        cleanups.append(relay.stop)
        return grpc.insecure_channel(f"unix:{relay.address}", options=_AUTHORITY)

    def _listen(self, server: grpc.Server, setup: _Setup, cleanup: list) -> tuple[str, str]:
        """Binds ``server`` for a served id; returns the announced (network, address)."""
        tls = setup.tls
        if setup.socket_dir is not None:
            path = os.path.join(setup.socket_dir, f"broker-{_random.token_hex(8)}.sock")
            if len(os.fsencode(path)) > _listen.MAX_UNIX_PATH_BYTES:
                raise GrpcBrokerError(f"the broker socket path {path!r} is too long")
            announced = ("unix", path)
            cleanup.append(lambda: _remove(path))
            address = f"unix:{path}"
        else:
            address = "127.0.0.1:0"
        if tls is not None and not tls.grpc_can_verify:
            inner = _listen.private_socket()
            cleanup.append(inner.cleanup)
            _listen.grpc_binder(server, None)(f"unix:{inner.address}")
            terminator = _terminator.TlsTerminator(
                _terminator.ssl_context(tls.identity, tls.host_cert_der), tls.host_cert_der, inner.address
            )
            if setup.socket_dir is None:
                raise GrpcBrokerError(
                    "serving broker ids over TCP to a P-521 host is not supported; use unix sockets"
                )
            terminator.listen(address)
            terminator.start()
            cleanup.insert(0, terminator.stop)
            return announced
        credentials = _tls.server_credentials(tls.identity, tls.host_cert_der) if tls else None
        if credentials is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, credentials)
        if setup.socket_dir is None:
            if port == 0:
                raise GrpcBrokerError("cannot listen on 127.0.0.1 for a broker id")
            return ("tcp", f"127.0.0.1:{port}")
        return announced


class _BrokerServicer(grpc_broker_pb2_grpc.GRPCBrokerServicer):
    """``plugin.GRPCBroker/StartStream``: the host's announcements in, ours out."""

    def __init__(self, broker: GRPCBroker) -> None:
        self._broker = broker

    def StartStream(self, request_iterator: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:  # noqa: N802
        broker = self._broker
        with broker._lock:
            broker._stream_open = True

        def read() -> None:
            try:
                for info in request_iterator:
                    broker._arrive(info)
            except grpc.RpcError:
                pass  # the host went away; the stream ends
            finally:
                broker._outbound.put(None)

        threading.Thread(target=read, name="tether-broker-in", daemon=True).start()
        while context.is_active():
            item = broker._outbound.get()
            if item is None:
                # The broker closed or the host ended its side; a closed broker keeps the marker
                # for any other stream.
                if broker._closed:
                    broker._outbound.put(None)
                return
            yield item


def _dial_target(broker_id: int, network: str, address: str) -> str:
    """The gRPC target for an announced address; only local addresses are dialled."""
    if network == "unix" and os.path.isabs(address):
        return f"unix:{address}"
    if network == "tcp":
        host, _, port = address.rpartition(":")
        try:
            loopback = ipaddress.ip_address(host.strip("[]")).is_loopback
        except ValueError:
            loopback = False
        if loopback and port.isdigit():
            return address
    raise GrpcBrokerError(
        f"broker id {broker_id}: the host announced {network}:{address}, which is not an absolute "
        "unix socket path or a loopback TCP address; refusing to dial it"
    )


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
