"""go-plugin's multiplexed broker (``PLUGIN_MULTIPLEX_GRPC``), plugin side.

The host opens **one** connection to the plugin's socket and runs yamux over it as the client;
the main gRPC connection and every brokered one are streams of it. Which id a stream the host
opens belongs to is agreed beforehand on the broker stream: the host knocks
(``ConnInfo{service_id, knock{knock}}``), the plugin acknowledges once it serves the id and
routes the next stream to it; streams with no acknowledged knock before them go to the main
server. The plugin's own dials work the other way round: knock, wait for the ack, open a stream.

grpcio can only serve and dial real sockets, so every yamux stream is relayed to one
(:func:`._yamux.relay`, two threads per stream):

- the main server, and each id served with ``accept_and_serve``, listens on a unix socket in a
  private 0700 directory; a stream the host opens is connected to the socket of its route;
- a dial gives grpcio a unix socket in a private directory; each connection grpcio makes to it
  is one knock and one stream.

TLS, when on, runs end to end inside the relayed bytes (the host sees the plugin's certificate
on every stream). The cost is one more local socket hop and a copy through Python per message;
bench/BENCHMARKS.md has the numbers.
"""

from __future__ import annotations

import collections
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from . import _yamux
from ._listen import Bound, listening_socket, private_socket
from ._proto.plugin import grpc_broker_pb2
from .errors import GrpcBrokerError

log = logging.getLogger("tether_plugin")

#: Seconds between knocks when the host refused one. go-plugin hosts refuse a knock that
#: arrives before their ``AcceptAndServe`` registered the id ("no listener for id N") and offer
#: no event for "now registered", so the dialler knocks again, until its dial timeout.
KNOCK_RETRY_INTERVAL = 0.025
#: Knocks for ids not served yet that are kept (answered once served), at most.
MAX_EARLY_KNOCKS = 1024


class MuxListener:
    """The announced socket in the multiplexed mode: its first connection carries the yamux
    session; the listener is closed after it, so no other connection is accepted."""

    def __init__(self, sock: socket.socket, on_connection: Callable[[socket.socket], None]) -> None:
        self._sock = sock
        self._on_connection = on_connection
        self._thread = threading.Thread(target=self._accept, name="tether-mux-accept", daemon=True)

    @staticmethod
    def binder(sockets: list[socket.socket]) -> Callable[[str], None]:
        """A :data:`._listen.Binder` that binds Python sockets (collected in ``sockets``)."""

        def add(address: str) -> None:
            sockets.append(listening_socket(address, backlog=1))

        return add

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()

    def _accept(self) -> None:
        try:
            conn, _ = self._sock.accept()
        except OSError:
            return  # closed before the host connected
        self.close()
        self._on_connection(conn)


class MuxRouter:
    """Routes the host's streams to local sockets and opens the plugin's."""

    def __init__(self, main_path: str) -> None:
        self._main = main_path
        self._lock = threading.Lock()
        self._routes: dict[int, str] = {}
        self._knocked: collections.deque[int] = collections.deque()
        self._session: _yamux.Session | None = None
        self._started = threading.Event()

    def start(self, conn: socket.socket) -> None:
        """Runs the session over the host's connection."""
        session = _yamux.Session(conn, client=False, on_stream=self._deliver)
        with self._lock:
            self._session = session
        session.start()
        self._started.set()

    def route(self, broker_id: int, path: str) -> None:
        with self._lock:
            self._routes[broker_id] = path

    def unroute(self, broker_id: int) -> None:
        with self._lock:
            self._routes.pop(broker_id, None)

    def is_routed(self, broker_id: int) -> bool:
        with self._lock:
            return broker_id in self._routes

    def expect(self, broker_id: int) -> None:
        """The next stream the host opens is for ``broker_id`` (its knock is being acked)."""
        with self._lock:
            self._knocked.append(broker_id)

    def open(self) -> _yamux.Stream:
        """Opens a stream to the host (after an acknowledged knock)."""
        with self._lock:
            session = self._session
        if session is None:
            raise _yamux.StreamClosed("the host has not connected yet")
        return session.open()

    def close(self) -> None:
        with self._lock:
            session, self._session = self._session, None
            self._knocked.clear()
            self._routes.clear()
        if session is not None:
            session.close()

    def _deliver(self, stream: _yamux.Stream) -> None:
        with self._lock:
            broker_id = self._knocked.popleft() if self._knocked else None
            path = self._main if broker_id is None else self._routes.get(broker_id)
        if path is None:
            log.debug("a multiplexed stream arrived for broker id %s, no longer served; reset", broker_id)
            stream.reset()
            return
        threading.Thread(target=_connect_and_relay, args=(stream, path), daemon=True).start()


def _connect_and_relay(stream: _yamux.Stream, path: str) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as e:
        log.debug("cannot reach %s for a multiplexed stream: %s", path, e)
        sock.close()
        stream.reset()
        return
    _yamux.relay(stream, sock)


class _Waiter:
    def __init__(self) -> None:
        self.answer: Any = None


class MuxBroker:
    """The broker's multiplexed half: knocks both ways and the dial relays.

    ``send`` puts a ``ConnInfo`` on the broker stream; ``lock`` is the broker's condition, held
    while knock state changes, so an acknowledgement and a dial's timeout cannot both win.
    """

    def __init__(self, router: MuxRouter, send: Callable[[Any], None], lock: threading.Condition) -> None:
        self.router = router
        self._send = send
        self._lock = lock
        self._ack_waiters: dict[int, _Waiter] = {}
        self._early: dict[int, float] = {}
        self._dial_lock = threading.Lock()
        self._relays: list[_DialRelay] = []
        self._closed = False

    # -- knocks from the host ----------------------------------------------------------------

    def receive(self, info: Any) -> None:
        """A knock or an acknowledgement from the host (called in the broker stream's reader)."""
        broker_id, knock = info.service_id, info.knock
        with self._lock:
            if knock.ack:
                waiter = self._ack_waiters.pop(broker_id, None)
                if waiter is not None:
                    waiter.answer = knock
                    self._lock.notify_all()
                    return
                if knock.error:
                    return
                # A late acknowledgement (its dial gave up): the host now routes its next
                # inbound stream to this id. Open and drop one at once, still in this reader
                # (before any later acknowledgement can let a dial open its stream), so the
                # stale entry is consumed and the next stream reaches the right id.
                log.debug("a late knock acknowledgement for id %d; opening and dropping a stream", broker_id)
                try:
                    self.router.open().reset()
                except _yamux.StreamClosed:
                    pass  # the session has ended: nothing is routed any more
                return
            if self.router.is_routed(broker_id):
                self._acknowledge(broker_id)
                return
            # Not served yet: answered once it is (go-plugin's examples knock early).
            now = time.monotonic()
            if len(self._early) >= MAX_EARLY_KNOCKS:
                log.warning("too many knocks for ids not served; dropping the knock for id %d", broker_id)
                return
            self._early[broker_id] = now

    def served(self, broker_id: int, path: str, ttl: float) -> None:
        """``broker_id`` is now served on ``path``; answers a knock that came early."""
        self.router.route(broker_id, path)
        with self._lock:
            at = self._early.pop(broker_id, None)
            if at is not None and time.monotonic() - at < ttl:
                self._acknowledge(broker_id)

    def _acknowledge(self, broker_id: int) -> None:
        self.router.expect(broker_id)  # before the ack: the stream may follow at once
        self._send(
            grpc_broker_pb2.ConnInfo(
                service_id=broker_id, knock=grpc_broker_pb2.ConnInfo.Knock(knock=True, ack=True)
            )
        )

    # -- the plugin's dials ------------------------------------------------------------------

    def knock_and_open(self, broker_id: int, deadline: float, what: Callable[[], str]) -> _yamux.Stream:
        """Knocks until acknowledged (retrying refusals) or ``deadline``, then opens a stream.
        One at a time: the host routes the streams this side opens in knock order."""
        with self._dial_lock:
            while True:
                answer = self._knock_once(broker_id, deadline)
                if answer is None:
                    raise GrpcBrokerError(
                        f"broker id {broker_id}: the host did not acknowledge the knock in time ({what()})"
                    )
                if not answer.error:
                    return self.router.open()
                if time.monotonic() + KNOCK_RETRY_INTERVAL >= deadline:
                    raise GrpcBrokerError(
                        f"broker id {broker_id}: the host refused the knock: {answer.error}"
                    )
                time.sleep(KNOCK_RETRY_INTERVAL)  # no event says "now served" (see the constant)

    def _knock_once(self, broker_id: int, deadline: float) -> Any:
        waiter = _Waiter()
        with self._lock:
            if self._closed:
                raise GrpcBrokerError(
                    f"broker id {broker_id}: the broker has stopped (the plugin is stopping)"
                )
            self._ack_waiters[broker_id] = waiter
            self._send(
                grpc_broker_pb2.ConnInfo(
                    service_id=broker_id, knock=grpc_broker_pb2.ConnInfo.Knock(knock=True)
                )
            )
            while waiter.answer is None and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._lock.wait(remaining)
            if waiter.answer is None:
                # Gave up, under the lock: an ack from now on is late (see receive).
                if self._ack_waiters.get(broker_id) is waiter:
                    del self._ack_waiters[broker_id]
                if self._closed:
                    raise GrpcBrokerError(
                        f"broker id {broker_id}: the broker has stopped (the plugin is stopping)"
                    )
            return waiter.answer

    def dial(self, broker_id: int, timeout: float, what: Callable[[], str]) -> _DialRelay:
        """A unix socket grpcio can dial (the relay's ``address``): each connection to it is a
        knock for ``broker_id`` and a stream, relayed. The first stream is opened here, so a
        refused or unanswered knock fails the dial. :meth:`release` it when its channel
        closes."""
        first = self.knock_and_open(broker_id, time.monotonic() + timeout, what)
        relay = _DialRelay(self, broker_id, first, timeout, what)
        with self._lock:
            if self._closed:
                relay.stop()
                raise GrpcBrokerError(
                    f"broker id {broker_id}: the broker has stopped (the plugin is stopping)"
                )
            self._relays.append(relay)
        return relay

    def release(self, relay: _DialRelay) -> None:
        """Stops a relay :meth:`dial` made (its channel was closed)."""
        with self._lock:
            if relay in self._relays:
                self._relays.remove(relay)
        relay.stop()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            relays, self._relays = self._relays, []
            self._lock.notify_all()
        for relay in relays:
            relay.stop()


class _DialRelay:
    """The private socket behind one dialled id (see :meth:`MuxBroker.dial`)."""

    def __init__(
        self, mux: MuxBroker, broker_id: int, first: _yamux.Stream, timeout: float, what: Callable[[], str]
    ) -> None:
        self._mux = mux
        self._id = broker_id
        self._first: _yamux.Stream | None = first
        self._timeout = timeout
        self._what = what
        self._bound: Bound = private_socket()
        #: The socket grpcio dials.
        self.address = self._bound.address
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(self.address)
        self._sock.listen(16)
        threading.Thread(target=self._accept, name="tether-mux-dial", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # stopped
            stream, self._first = self._first, None
            threading.Thread(target=self._serve, args=(conn, stream), daemon=True).start()

    def _serve(self, conn: socket.socket, stream: _yamux.Stream | None) -> None:
        try:
            if stream is None:
                stream = self._mux.knock_and_open(self._id, time.monotonic() + self._timeout, self._what)
        except (GrpcBrokerError, OSError) as e:
            log.debug("a multiplexed brokered connection for id %d failed: %s", self._id, e)
            conn.close()
            return
        _yamux.relay(stream, conn)

    def stop(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        first, self._first = self._first, None
        if first is not None:
            first.reset()
        self._bound.cleanup()
