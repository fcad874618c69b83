"""The multiplexed broker's knocks, plugin side, against a host-side yamux session over a
socketpair: early knocks, refused knocks, and a late acknowledgement that must not route the
next stream to the wrong id."""

import os
import socket
import threading
import time

import pytest

from tether_plugin import _mux, _yamux
from tether_plugin._proto.plugin import grpc_broker_pb2
from tether_plugin.errors import GrpcBrokerError


def ack(broker_id, error=""):
    return grpc_broker_pb2.ConnInfo(
        service_id=broker_id, knock=grpc_broker_pb2.ConnInfo.Knock(knock=True, ack=True, error=error)
    )


def knock(broker_id):
    return grpc_broker_pb2.ConnInfo(service_id=broker_id, knock=grpc_broker_pb2.ConnInfo.Knock(knock=True))


class Host:
    """The host's end: its yamux client session, the streams the plugin opens to it, and what
    the plugin sent on the broker stream."""

    def __init__(self):
        a, b = socket.socketpair()
        self.streams = []
        self.sent = []
        self._cond = threading.Condition()
        self.session = _yamux.Session(a, client=True, on_stream=self._arrived)
        self.session.start()
        self.router = _mux.MuxRouter("/nonexistent/main.sock")
        self.router.start(b)
        self.lock = threading.Condition()
        self.mux = _mux.MuxBroker(self.router, self._sent, self.lock)

    def _arrived(self, stream):
        with self._cond:
            self.streams.append(stream)
            self._cond.notify_all()

    def _sent(self, info):
        with self._cond:
            self.sent.append(info)
            self._cond.notify_all()

    def wait(self, what, timeout=5):
        with self._cond:
            assert self._cond.wait_for(what, timeout), "timed out"

    def close(self):
        self.mux.close()
        self.router.close()
        self.session.close()


@pytest.fixture
def host():
    h = Host()
    yield h
    h.close()


def test_a_late_acknowledgement_opens_and_drops_a_stream_so_the_next_dial_reaches_its_id(host):
    # The dial for id 4 gives up: the host does not answer in time.
    with pytest.raises(GrpcBrokerError, match="broker id 4: the host did not acknowledge the knock"):
        host.mux.knock_and_open(4, time.monotonic() + 0.05, lambda: "test")
    # Its acknowledgement arrives late: the host (like go-plugin's) now hands its next inbound
    # stream to id 4's listener.
    host.mux.receive(ack(4))
    # The next dial, for id 5, is acknowledged in time.
    dialing = threading.Thread(
        target=lambda: host.__setattr__("s5", host.mux.knock_and_open(5, time.monotonic() + 5, str))
    )
    dialing.start()
    host.wait(lambda: len(host.sent) == 2)
    assert [(i.service_id, i.knock.knock, i.knock.ack) for i in host.sent] == [
        (4, True, False),
        (5, True, False),
    ]
    host.mux.receive(ack(5))
    dialing.join(5)
    host.s5.write(b"for id 5")
    host.wait(lambda: len(host.streams) == 2)
    # The host routes streams in acknowledgement order: the first to id 4, the second to id 5.
    for_4, for_5 = host.streams
    with pytest.raises(_yamux.StreamClosed):
        for_4.read()  # dropped by the plugin: nothing is served on it
    assert for_5.read() == b"for id 5", "id 5's stream is the one its dial opened"


def test_an_acknowledgement_in_time_opens_exactly_one_stream_the_host_routes_to_that_id(host):
    # The same sequence, but the late ack is an answer the dialler is still waiting for: it
    # opens exactly one stream, the one the host routes to that id.
    dialing = threading.Thread(
        target=lambda: host.__setattr__("s", host.mux.knock_and_open(6, time.monotonic() + 5, str))
    )
    dialing.start()
    host.wait(lambda: len(host.sent) == 1)
    host.mux.receive(ack(6))
    dialing.join(5)
    host.s.write(b"six")
    host.wait(lambda: len(host.streams) == 1)
    assert host.streams[0].read() == b"six"


def test_a_refused_knock_is_retried_until_the_host_serves_the_id(host):
    result = {}
    dialing = threading.Thread(
        target=lambda: result.update(s=host.mux.knock_and_open(7, time.monotonic() + 5, str))
    )
    dialing.start()
    host.wait(lambda: len(host.sent) == 1)
    host.mux.receive(ack(7, "no listener for id 7"))  # go-plugin before its AcceptAndServe ran
    host.wait(lambda: len(host.sent) == 2)
    host.mux.receive(ack(7))
    dialing.join(5)
    assert "s" in result
    with pytest.raises(GrpcBrokerError, match="refused the knock: nope"):
        threading.Timer(0.01, lambda: host.mux.receive(ack(8, "nope"))).start()
        host.mux.knock_and_open(8, time.monotonic() + 0.02, str)


def test_a_knock_for_an_id_not_served_yet_is_answered_once_it_is_and_routes_the_next_stream(host, tmp_path):
    host.mux.receive(knock(9))
    assert host.sent == []
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = str(tmp_path / "served.sock")
    listener.bind(path)
    listener.listen(1)
    host.mux.served(9, path, ttl=5)
    assert [(i.service_id, i.knock.ack, i.knock.error) for i in host.sent] == [(9, True, "")]
    stream = host.session.open()
    stream.write(b"to id 9")
    conn, _ = listener.accept()
    assert conn.recv(100) == b"to id 9"
    conn.close()
    listener.close()
    # A knock for an id already served is answered at once.
    host.mux.receive(knock(9))
    assert len(host.sent) == 2


def test_a_stream_with_no_knock_before_it_goes_to_the_main_server(tmp_path):
    main = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = str(tmp_path / "main.sock")
    main.bind(path)
    main.listen(1)
    a, b = socket.socketpair()
    router = _mux.MuxRouter(path)
    router.start(b)
    session = _yamux.Session(a, client=True, on_stream=lambda s: None)
    session.start()
    session.open().write(b"main")
    conn, _ = main.accept()
    assert conn.recv(100) == b"main"
    conn.close()
    router.close()
    session.close()
    main.close()


def test_releasing_a_dial_relay_removes_its_socket_and_ends_its_thread(host):
    # A channel's close releases its relay: a plugin dialling a fresh id per call must not keep
    # a socket and a thread per call until it stops.
    before = set(threading.enumerate())
    dialing = threading.Thread(target=lambda: host.__setattr__("relay", host.mux.dial(8, 5, str)))
    dialing.start()
    host.wait(lambda: len(host.sent) == 1)
    host.mux.receive(ack(8))
    dialing.join(5)
    started = [t for t in set(threading.enumerate()) - before if t.name == "tether-mux-dial"]
    assert len(started) == 1, started
    assert os.path.exists(host.relay.address)
    host.mux.release(host.relay)
    assert not os.path.exists(host.relay.address), "the relay's socket is removed"
    started[0].join(5)
    assert not started[0].is_alive(), "the relay's thread ended"
    assert host.mux._relays == []
