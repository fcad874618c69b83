"""The yamux session the multiplexed broker runs on: the sans-IO frame parser (byte for byte,
and with random frames split at random points among garbage) and sessions over a socketpair."""

import random
import socket
import struct
import threading

import pytest

from tether_plugin import _yamux
from tether_plugin._yamux import (
    FLAG_ACK,
    FLAG_FIN,
    FLAG_RST,
    FLAG_SYN,
    HEADER_LENGTH,
    INITIAL_STREAM_WINDOW,
    TYPE_DATA,
    TYPE_GO_AWAY,
    TYPE_PING,
    TYPE_WINDOW_UPDATE,
    Frame,
    FrameParser,
    Session,
    StreamClosed,
    YamuxError,
    encode_header,
)


def test_headers_are_encoded_in_the_wire_layout():
    assert encode_header(TYPE_WINDOW_UPDATE, FLAG_SYN | FLAG_ACK, 0x01020304, 0x0A0B0C0D) == bytes(
        [0, 1, 0, 3, 1, 2, 3, 4, 0x0A, 0x0B, 0x0C, 0x0D]
    )
    assert len(encode_header(TYPE_DATA, 0, 1, 0)) == HEADER_LENGTH


def test_a_data_frame_waits_for_its_whole_payload_and_other_types_carry_none():
    parser = FrameParser()
    wire = encode_header(TYPE_DATA, 0, 3, 5) + b"hello" + encode_header(TYPE_PING, FLAG_SYN, 0, 77)
    assert parser.feed(wire[: HEADER_LENGTH + 4]) == []
    assert parser.feed(wire[HEADER_LENGTH + 4 :]) == [
        Frame(TYPE_DATA, 0, 3, 5, b"hello"),
        Frame(TYPE_PING, FLAG_SYN, 0, 77, b""),
    ]


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (bytes([1]) + bytes(11), "unsupported yamux version 1"),
        (bytes([0, 9]) + bytes(10), "unknown yamux frame type 9"),
        (struct.pack(">BBHII", 0, TYPE_DATA, 0, 1, INITIAL_STREAM_WINDOW + 1), "exceeds the stream window"),
    ],
)
def test_broken_headers_are_protocol_errors(wire, message):
    with pytest.raises(YamuxError, match=message):
        FrameParser().feed(wire)


def random_frame(rng: random.Random) -> Frame:
    type_ = rng.choice([TYPE_DATA, TYPE_WINDOW_UPDATE, TYPE_PING, TYPE_GO_AWAY])
    flags = rng.randrange(16)
    stream_id = rng.choice([0, 1, 2, rng.randrange(2**32)])
    if type_ == TYPE_DATA:
        payload = rng.randbytes(rng.choice([0, 1, rng.randrange(3000)]))
        return Frame(type_, flags, stream_id, len(payload), payload)
    return Frame(type_, flags, stream_id, rng.randrange(2**32))


def test_random_frames_split_at_random_points_parse_back_exactly():
    # A property test with a fixed seed per case (reproducible): any sequence of valid frames,
    # cut into any chunks, parses back to the same frames.
    for seed in range(300):
        rng = random.Random(seed)
        frames = [random_frame(rng) for _ in range(rng.randrange(1, 20))]
        wire = b"".join(encode_header(f.type, f.flags, f.stream_id, f.length) + f.payload for f in frames)
        parser = FrameParser()
        got, at = [], 0
        while at < len(wire):
            step = rng.choice([1, 2, 11, 12, 13, rng.randrange(1, 4000)])
            got += parser.feed(wire[at : at + step])
            at += step
        assert got == frames, f"seed {seed}"


def test_random_garbage_either_parses_or_fails_as_a_protocol_error_never_otherwise():
    # Fuzz: arbitrary bytes never raise anything but YamuxError, and never yield a frame the
    # header did not describe.
    for seed in range(2000):
        rng = random.Random(seed)
        data = rng.randbytes(rng.randrange(200))
        if rng.random() < 0.5 and data:
            data = bytes([0]) + bytes([rng.randrange(4)]) + data[2:]  # plausible headers
        parser = FrameParser(max_payload=rng.choice([0, 64, INITIAL_STREAM_WINDOW]))
        try:
            for frame in parser.feed(data):
                assert frame.type <= TYPE_GO_AWAY
                assert frame.type == TYPE_DATA or frame.payload == b""
                assert frame.type != TYPE_DATA or len(frame.payload) == frame.length
        except YamuxError:
            pass


@pytest.fixture
def sessions():
    a, b = socket.socketpair()
    accepted = []
    arrived = threading.Condition()

    def on_stream(stream):
        with arrived:
            accepted.append(stream)
            arrived.notify_all()

    client = Session(a, client=True, on_stream=lambda s: pytest.fail("the server opens nothing"))
    server = Session(b, client=False, on_stream=on_stream)
    client.start()
    server.start()

    def next_accepted(index):
        with arrived:
            assert arrived.wait_for(lambda: len(accepted) > index, timeout=5)
            return accepted[index]

    yield client, server, next_accepted
    client.close()
    server.close()


def read_all(stream) -> bytes:
    data = bytearray()
    while chunk := stream.read():
        data += chunk
    return bytes(data)


def test_client_streams_get_odd_ids_and_more_than_a_window_flows_both_ways_with_half_close(sessions):
    client, _, next_accepted = sessions
    first, second = client.open(), client.open()
    assert (first.id, second.id) == (1, 3)
    payload = random.Random(1).randbytes(3 * INITIAL_STREAM_WINDOW + 17)
    writer = threading.Thread(target=lambda: (first.write(payload), first.close_write()))
    writer.start()
    accepted = next_accepted(0)
    assert accepted.id == 1
    assert read_all(accepted) == payload, "flow control let more than a window through intact"
    writer.join(5)
    accepted.write(b"back")
    accepted.close_write()
    assert read_all(first) == b"back"


def test_a_reset_stream_fails_on_the_other_side_and_closing_the_session_ends_every_stream(sessions):
    client, server, next_accepted = sessions
    stream = client.open()
    stream.write(b"x")
    accepted = next_accepted(0)
    assert accepted.read() == b"x"
    stream.reset()
    with pytest.raises(StreamClosed):
        accepted.read()
    other = client.open()
    other_accepted = next_accepted(1)
    server.close()
    with pytest.raises(StreamClosed):
        other_accepted.read()
    assert client.closed.wait(5), "the peer's session ends when the connection does"
    with pytest.raises(StreamClosed):
        other.read()


def test_pings_are_answered_with_the_same_value_and_go_away_refuses_new_streams():
    a, b = socket.socketpair()
    server = Session(b, client=False, on_stream=lambda s: None)
    server.start()
    a.sendall(encode_header(TYPE_PING, FLAG_SYN, 0, 0xDEADBEEF))
    parser = FrameParser()
    frames = []
    while not frames:
        frames = parser.feed(a.recv(64))
    assert frames == [Frame(TYPE_PING, FLAG_ACK, 0, 0xDEADBEEF)]
    a.sendall(encode_header(TYPE_GO_AWAY, 0, 0, 0))
    a.sendall(encode_header(TYPE_PING, FLAG_SYN, 0, 1))  # once this is answered, go-away was read
    while not parser.feed(a.recv(64)):
        pass
    with pytest.raises(StreamClosed, match="go away"):
        server.open()
    server.close()
    a.close()


def test_a_peer_that_overruns_the_window_ends_the_session():
    a, b = socket.socketpair()
    server = Session(b, client=False, on_stream=lambda s: None)
    server.start()
    a.sendall(encode_header(TYPE_WINDOW_UPDATE, FLAG_SYN, 1, 0))
    chunk = bytes(INITIAL_STREAM_WINDOW // 2)
    for _ in range(3):  # 1.5 windows, never credited (nobody reads the stream)
        a.sendall(encode_header(TYPE_DATA, 0, 1, len(chunk)) + chunk)
    assert server.closed.wait(5)
    a.close()


def test_frames_of_a_stream_reset_or_finished_on_both_sides_are_dropped(sessions):
    client, _, next_accepted = sessions
    stream = client.open()
    stream.close_write()
    accepted = next_accepted(0)
    assert accepted.read() == b""
    accepted.close_write()
    assert stream.read() == b""
    # Both sides finished: a late RST from the peer changes nothing and the session lives on.
    client._send(encode_header(TYPE_WINDOW_UPDATE, FLAG_RST | FLAG_FIN, 1, 0))
    assert client.open().id == 3
    assert next_accepted(1).id == 3


def test_the_relay_copies_both_ways_until_both_sides_finish(sessions):
    client, _, next_accepted = sessions
    stream = client.open()
    left, right = socket.socketpair()
    _yamux.relay(stream, left)
    accepted = next_accepted(0)
    accepted.write(b"to the socket")
    assert right.recv(100) == b"to the socket"
    right.sendall(b"to the stream")
    assert accepted.read() == b"to the stream"
    right.shutdown(socket.SHUT_WR)
    assert accepted.read() == b""
    accepted.close_write()
    assert right.recv(100) == b"", "the stream's end reaches the socket"
    right.close()
