import os

import pytest

from tether_plugin._stdio import STDERR, STDOUT, StdioRelay, relay_text_stream


@pytest.fixture
def fds():
    """Pipes standing in for the real stdout and stderr: {channel: (read_fd, write_fd)}."""
    pipes = {STDOUT: os.pipe(), STDERR: os.pipe()}
    for r, _ in pipes.values():
        os.set_blocking(r, False)
    yield pipes
    for r, w in pipes.values():
        os.close(r)
        os.close(w)


def relay_for(fds, limit=1 << 20):
    return StdioRelay({ch: w for ch, (_, w) in fds.items()}, limit=limit)


def drained(fds, channel):
    try:
        return os.read(fds[channel][0], 1 << 16)
    except BlockingIOError:
        return b""


def test_without_a_subscriber_output_goes_to_the_real_descriptors(fds):
    relay = relay_for(fds)
    relay.write(STDOUT, b"out\n")
    relay.write(STDERR, b"err\n")
    assert drained(fds, STDOUT) == b"out\n"
    assert drained(fds, STDERR) == b"err\n"


def test_a_subscriber_receives_output_in_order_with_its_channel(fds):
    relay = relay_for(fds)
    stream = relay.subscribe()
    relay.write(STDOUT, b"a")
    relay.write(STDERR, b"b")
    relay.write(STDOUT, b"c")
    relay.close()
    assert [(d.channel, d.data) for d in stream] == [(STDOUT, b"a"), (STDERR, b"b"), (STDOUT, b"c")]
    assert drained(fds, STDOUT) == b"" and drained(fds, STDERR) == b""


def test_output_beyond_the_limit_falls_back_instead_of_blocking(fds):
    relay = relay_for(fds, limit=4)
    stream = relay.subscribe()
    relay.write(STDOUT, b"1234")  # queued: exactly the limit
    relay.write(STDOUT, b"overflow")  # would exceed it
    assert drained(fds, STDOUT) == b"overflow"
    assert next(stream).data == b"1234"
    relay.write(STDOUT, b"abcd")  # room again
    relay.close()
    assert [d.data for d in stream] == [b"abcd"]


def test_a_second_subscriber_is_refused_until_the_first_ends(fds):
    relay = relay_for(fds)
    stream = relay.subscribe()
    with pytest.raises(RuntimeError, match="already being streamed"):
        relay.subscribe()
    relay.write(STDOUT, b"x")
    assert next(stream).data == b"x"
    stream.close()
    relay.subscribe()


def test_output_left_when_the_subscriber_goes_away_is_written_to_the_descriptors(fds):
    relay = relay_for(fds)
    active = [True]
    stream = relay.subscribe(lambda: active[0])
    relay.write(STDOUT, b"first")
    assert next(stream).data == b"first"
    relay.write(STDOUT, b"pending")
    active[0] = False  # the host cancelled the stream; gRPC calls wake()
    relay.wake()
    assert list(stream) == []
    assert drained(fds, STDOUT) == b"pending"
    relay.write(STDOUT, b"later")
    assert drained(fds, STDOUT) == b"later"


def test_the_text_stream_is_line_buffered_and_reports_the_real_descriptor(fds):
    relay = relay_for(fds)
    text = relay_text_stream(relay, STDOUT, None, fds[STDOUT][1])
    text.write("partial")
    assert drained(fds, STDOUT) == b""
    text.write(" line\n")
    assert drained(fds, STDOUT) == b"partial line\n"
    assert text.fileno() == fds[STDOUT][1]
