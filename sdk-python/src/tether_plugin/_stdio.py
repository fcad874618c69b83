"""``plugin.GRPCStdio``: the plugin's later stdout/stderr, streamed to the host.

After the handshake, ``sys.stdout`` and ``sys.stderr`` are replaced by writers that feed a
:class:`StdioRelay`. While the host streams ``StreamStdio`` (go-plugin ≥ 1.1 and tether hosts
open it right after connecting), what the plugin prints goes there; otherwise — before the
host subscribes, after it leaves, or when it falls more than :data:`STDIO_BUFFER_LIMIT` bytes
behind — it goes to the real file descriptors, which hosts drain too. So output is never lost
and a plugin never blocks on a host that does not stream. File-descriptor-level writes (child
processes, C extensions) always go to the real descriptors.
"""

from __future__ import annotations

import io
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator

import grpc

from ._proto.plugin import grpc_stdio_pb2, grpc_stdio_pb2_grpc

#: How many bytes of output may wait for the host's stream before output falls back to the
#: real file descriptors.
STDIO_BUFFER_LIMIT = 1 << 20

STDOUT = grpc_stdio_pb2.StdioData.STDOUT
STDERR = grpc_stdio_pb2.StdioData.STDERR


class StdioRelay:
    """Queues output for one ``StreamStdio`` subscriber, falling back to ``fallback_fds``
    (channel → file descriptor)."""

    def __init__(self, fallback_fds: dict[int, int], limit: int = STDIO_BUFFER_LIMIT) -> None:
        self._fallback = fallback_fds
        self._limit = limit
        self._cond = threading.Condition()
        self._chunks: deque[tuple[int, bytes]] = deque()
        self._queued = 0
        self._subscribed = False
        self._closed = False

    def write(self, channel: int, data: bytes) -> None:
        """Sends ``data`` to the subscriber if there is one with room, else to the real fd."""
        if not data:
            return
        with self._cond:
            if self._subscribed and not self._closed and self._queued + len(data) <= self._limit:
                self._chunks.append((channel, data))
                self._queued += len(data)
                self._cond.notify_all()
                return
        _write_all(self._fallback[channel], data)

    def subscribe(self, is_active: Callable[[], bool] = lambda: True) -> Iterator[grpc_stdio_pb2.StdioData]:
        """Subscribes now and returns the stream of output written from now on. The stream ends
        after :meth:`close`, or when ``is_active()`` turns false (checked whenever :meth:`wake`
        is called); output still queued then goes to the real descriptors. Only one subscriber
        at a time: ``RuntimeError`` otherwise."""
        with self._cond:
            if self._subscribed:
                raise RuntimeError("plugin.GRPCStdio is already being streamed to another caller")
            self._subscribed = True
        return self._drain(is_active)

    def _drain(self, is_active: Callable[[], bool]) -> Iterator[grpc_stdio_pb2.StdioData]:
        try:
            while True:
                with self._cond:
                    while not self._chunks and not self._closed and is_active():
                        self._cond.wait()
                    if not self._chunks or not is_active():
                        return
                    channel, data = self._chunks.popleft()
                    self._queued -= len(data)
                yield grpc_stdio_pb2.StdioData(channel=channel, data=data)
        finally:
            with self._cond:
                self._subscribed = False
                leftover = list(self._chunks)
                self._chunks.clear()
                self._queued = 0
            for channel, data in leftover:
                _write_all(self._fallback[channel], data)

    def wake(self) -> None:
        """Makes a waiting subscriber re-check whether it is still active."""
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        """Ends the subscription once the queue is sent; later output goes to the real fds."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass  # the host closed the pipe: nobody is left to read it


class _RelayRaw(io.RawIOBase):
    """A raw binary stream writing into the relay on one channel."""

    def __init__(self, relay: StdioRelay, channel: int, fd: int) -> None:
        super().__init__()
        self._relay = relay
        self._channel = channel
        self._fd = fd

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # type: ignore[override]
        data = bytes(b)
        self._relay.write(self._channel, data)
        return len(data)

    def fileno(self) -> int:
        """The real descriptor, for code that hands ``sys.stdout`` to a child process."""
        return self._fd

    def isatty(self) -> bool:
        return False


def relay_text_stream(
    relay: StdioRelay, channel: int, like: io.TextIOBase | None, fd: int
) -> io.TextIOWrapper:
    """A line-buffered text stream for ``sys.stdout``/``sys.stderr`` that writes into ``relay``."""
    encoding = getattr(like, "encoding", None) or "utf-8"
    errors = getattr(like, "errors", None) or "backslashreplace"
    return io.TextIOWrapper(
        io.BufferedWriter(_RelayRaw(relay, channel, fd)),
        encoding=encoding,
        errors=errors,
        line_buffering=True,
    )


class StdioServicer(grpc_stdio_pb2_grpc.GRPCStdioServicer):
    """Serves ``plugin.GRPCStdio/StreamStdio`` from a :class:`StdioRelay`."""

    def __init__(self, relay: StdioRelay) -> None:
        self._relay = relay

    def StreamStdio(self, request, context):  # noqa: N802 (gRPC method name)
        try:
            stream = self._relay.subscribe(context.is_active)
        except RuntimeError as e:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))
        context.add_callback(self._relay.wake)
        # Headers now, so the host knows output from here on comes through this stream.
        context.send_initial_metadata(())
        yield from stream
