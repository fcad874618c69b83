"""The subset of yamux (hashicorp/yamux's ``spec.md``) that go-plugin's multiplexed broker needs:
one session over one connection, streams opened by either side, per-stream flow control,
half-close, reset, ping answers and go-away.

PyPI has no usable yamux (the packages there are unmaintained or asyncio-only sketches), so the
SDK carries this one, modelled on the TypeScript SDK's ``src/yamux.ts``. It is split in two:

- sans-IO: :func:`encode_header`, :class:`FrameParser` (bytes in, :class:`Frame`\\ s out) — all
  the wire format, unit-tested byte by byte and with a randomised split/garbage test;
- :class:`Session` / :class:`Stream`: threads and blocking sockets. One reader thread per
  session parses frames and hands data to streams (never blocking: a stream's buffer is bounded
  by its receive window); writers send under one lock, waiting for window when the peer's is
  used up.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("tether_plugin")

#: yamux protocol version (the only one).
VERSION = 0
#: Header length in bytes: version, type, flags (2), stream id (4), length (4).
HEADER_LENGTH = 12
#: Initial receive window of every stream (the spec's and go-plugin's 256 KiB).
INITIAL_STREAM_WINDOW = 256 * 1024
#: Largest data frame this side sends.
MAX_DATA_FRAME = 64 * 1024
#: Streams open at once, beyond which a peer's new stream is refused (hashicorp/yamux's backlog).
ACCEPT_BACKLOG = 256
#: Bytes read from the connection at a time.
READ_CHUNK = 64 * 1024

TYPE_DATA = 0
TYPE_WINDOW_UPDATE = 1
TYPE_PING = 2
TYPE_GO_AWAY = 3

FLAG_SYN = 1
FLAG_ACK = 2
FLAG_FIN = 4
FLAG_RST = 8

GO_AWAY_NORMAL = 0
GO_AWAY_PROTOCOL_ERROR = 1

_HEADER = struct.Struct(">BBHII")


class YamuxError(Exception):
    """A protocol error: the peer broke the wire format; the session ends."""


@dataclass(frozen=True)
class Frame:
    """One decoded frame. ``length`` is the header's field (a window delta, ping value or
    go-away code for non-data frames); ``payload`` is the data of a data frame."""

    type: int
    flags: int
    stream_id: int
    length: int
    payload: bytes = b""


def encode_header(type_: int, flags: int, stream_id: int, length: int) -> bytes:
    """A frame header in the wire layout."""
    return _HEADER.pack(VERSION, type_, flags, stream_id, length)


class FrameParser:
    """Sans-IO frame parser: :meth:`feed` any split of the byte stream, get whole frames back.

    ``max_payload`` bounds a data frame's payload (a peer may never send more than a stream's
    window at once); a larger length, an unknown version or an unknown type raise
    :class:`YamuxError`, after which the parser must not be fed again.
    """

    def __init__(self, max_payload: int = INITIAL_STREAM_WINDOW) -> None:
        self._buffer = bytearray()
        self._max_payload = max_payload

    def feed(self, data: bytes) -> list[Frame]:
        """Appends ``data`` and returns every frame it completes, in order."""
        self._buffer += data
        frames = []
        while len(self._buffer) >= HEADER_LENGTH:
            version, type_, flags, stream_id, length = _HEADER.unpack_from(self._buffer)
            if version != VERSION:
                raise YamuxError(f"unsupported yamux version {version}")
            if type_ > TYPE_GO_AWAY:
                raise YamuxError(f"unknown yamux frame type {type_}")
            payload_length = length if type_ == TYPE_DATA else 0
            if payload_length > self._max_payload:
                raise YamuxError(f"a data frame of {payload_length} bytes exceeds the stream window")
            if len(self._buffer) < HEADER_LENGTH + payload_length:
                break
            payload = bytes(self._buffer[HEADER_LENGTH : HEADER_LENGTH + payload_length])
            del self._buffer[: HEADER_LENGTH + payload_length]
            frames.append(Frame(type_, flags, stream_id, length, payload))
        return frames


class StreamClosed(OSError):
    """The stream was reset by the peer or the session ended."""


class Stream:
    """A yamux stream: blocking :meth:`read` / :meth:`write`, :meth:`close_write` (FIN),
    :meth:`reset` (RST). Thread-safe: one reader thread and one writer thread at a time."""

    def __init__(self, session: Session, stream_id: int) -> None:
        self.id = stream_id
        self._session = session
        self._cond = threading.Condition()
        self._inbox = bytearray()
        self._recv_window = INITIAL_STREAM_WINDOW
        self._send_window = INITIAL_STREAM_WINDOW
        self._fin_received = False
        self._fin_sent = False
        self._reset = False

    # -- the user's side --------------------------------------------------------------------

    def read(self, max_bytes: int = READ_CHUNK) -> bytes:
        """Up to ``max_bytes``, blocking until some arrive; ``b""`` once the peer finished.
        Raises :class:`StreamClosed` after a reset."""
        with self._cond:
            while not self._inbox and not self._fin_received and not self._reset:
                self._cond.wait()
            if self._reset and not self._inbox:
                raise StreamClosed(f"yamux stream {self.id} was reset")
            data = bytes(self._inbox[:max_bytes])
            del self._inbox[:max_bytes]
            # Credit the peer once half a window is consumed (as hashicorp/yamux does).
            consumed = INITIAL_STREAM_WINDOW - self._recv_window - len(self._inbox)
            credit = consumed if consumed >= INITIAL_STREAM_WINDOW // 2 else 0
            self._recv_window += credit
        if credit:
            self._session._send(encode_header(TYPE_WINDOW_UPDATE, 0, self.id, credit))
        return data

    def write(self, data: bytes) -> None:
        """Sends all of ``data``, waiting for window as needed."""
        view = memoryview(data)
        while view:
            with self._cond:
                while self._send_window == 0 and not self._reset and not self._fin_sent:
                    self._cond.wait()
                if self._reset or self._fin_sent:
                    raise StreamClosed(f"yamux stream {self.id} is closed")
                n = min(self._send_window, len(view), MAX_DATA_FRAME)
                self._send_window -= n
            self._session._send(encode_header(TYPE_DATA, 0, self.id, n), view[:n])
            view = view[n:]

    def close_write(self) -> None:
        """Half-closes: the peer reads end of stream."""
        with self._cond:
            if self._fin_sent or self._reset:
                return
            self._fin_sent = True
            both = self._fin_received
        self._session._send(encode_header(TYPE_WINDOW_UPDATE, FLAG_FIN, self.id, 0))
        if both:
            self._session._forget(self.id)

    def reset(self) -> None:
        """Abandons the stream (RST) unless both sides already finished."""
        with self._cond:
            if self._reset or (self._fin_sent and self._fin_received):
                return
            self._reset = True
            self._cond.notify_all()
        try:
            self._session._send(encode_header(TYPE_WINDOW_UPDATE, FLAG_RST, self.id, 0))
        except StreamClosed:
            pass  # the session has ended: nothing to tell the peer
        self._session._forget(self.id)

    # -- the session's side (reader thread) ----------------------------------------------------

    def _deliver(self, data: bytes) -> bool:
        """False when the peer overran the receive window (a protocol error)."""
        with self._cond:
            if len(data) > self._recv_window:
                return False
            self._recv_window -= len(data)
            if not self._reset:
                self._inbox += data
            self._cond.notify_all()
            return True

    def _grow(self, delta: int) -> None:
        with self._cond:
            self._send_window += delta
            self._cond.notify_all()

    def _remote_fin(self) -> None:
        with self._cond:
            self._fin_received = True
            both = self._fin_sent
            self._cond.notify_all()
        if both:
            self._session._forget(self.id)

    def _remote_reset(self) -> None:
        with self._cond:
            self._reset = True
            self._cond.notify_all()
        self._session._forget(self.id)


class Session:
    """One yamux session over the connected socket ``sock``. ``client`` sessions open odd ids
    (go-plugin's host is the client), servers even ones. ``on_stream`` is called in the reader
    thread with each stream the peer opens and must not block."""

    def __init__(self, sock: socket.socket, *, client: bool, on_stream: Callable[[Stream], None]) -> None:
        self._sock = sock
        self._on_stream = on_stream
        self._next_id = 1 if client else 2
        self._streams: dict[int, Stream] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._go_away = False
        #: Set when the session has ended.
        self.closed = threading.Event()
        self._thread = threading.Thread(target=self._read_loop, name="tether-yamux", daemon=True)

    def start(self) -> None:
        """Starts the reader thread."""
        self._thread.start()

    def open(self) -> Stream:
        """Opens a stream (its SYN is sent before this returns, so streams reach the peer in the
        order they were opened); data may be written at once."""
        with self._lock:
            if self.closed.is_set():
                raise StreamClosed("the multiplexed connection has ended")
            if self._go_away:
                raise StreamClosed("the peer is closing the multiplexed connection (go away)")
            stream = Stream(self, self._next_id)
            self._next_id += 2
            self._streams[stream.id] = stream
            # Under the lock: ids reach the wire in increasing order.
            self._send(encode_header(TYPE_WINDOW_UPDATE, FLAG_SYN, stream.id, 0))
        return stream

    def close(self, error: BaseException | None = None) -> None:
        """Sends go-away, ends every stream and closes the connection."""
        with self._lock:
            if self.closed.is_set():
                return
            self.closed.set()
            streams, self._streams = list(self._streams.values()), {}
        code = GO_AWAY_PROTOCOL_ERROR if error is not None else GO_AWAY_NORMAL
        try:
            self._send(encode_header(TYPE_GO_AWAY, 0, 0, code))
        except OSError:
            pass
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        for stream in streams:
            stream._remote_reset()
        if error is not None:
            log.debug("the multiplexed connection ended: %s", error)

    # -- internals --------------------------------------------------------------------------

    def _send(self, header: bytes, payload: memoryview | bytes = b"") -> None:
        with self._send_lock:
            try:
                self._sock.sendall(bytes(header) + bytes(payload) if payload else header)
            except OSError as e:
                raise StreamClosed(f"the multiplexed connection is closed: {e}") from e

    def _forget(self, stream_id: int) -> None:
        with self._lock:
            self._streams.pop(stream_id, None)

    def _read_loop(self) -> None:
        parser = FrameParser()
        error: BaseException | None = None
        try:
            while not self.closed.is_set():
                data = self._sock.recv(READ_CHUNK)
                if not data:
                    break
                for frame in parser.feed(data):
                    self._handle(frame)
        except (OSError, YamuxError) as e:
            error = e if not self.closed.is_set() else None
        self.close(error)

    def _handle(self, frame: Frame) -> None:
        if frame.type == TYPE_PING:
            if frame.flags & FLAG_SYN:
                self._send(encode_header(TYPE_PING, FLAG_ACK, 0, frame.length))
            return
        if frame.type == TYPE_GO_AWAY:
            self._go_away = True
            if frame.length != GO_AWAY_NORMAL:
                raise YamuxError(f"the peer went away with error code {frame.length}")
            return
        with self._lock:
            stream = self._streams.get(frame.stream_id)
        if frame.flags & FLAG_SYN:
            if stream is not None:
                raise YamuxError(f"duplicate yamux stream id {frame.stream_id}")
            with self._lock:
                full = len(self._streams) >= ACCEPT_BACKLOG
                if not full:
                    stream = Stream(self, frame.stream_id)
                    self._streams[stream.id] = stream
            if full:
                self._send(encode_header(TYPE_WINDOW_UPDATE, FLAG_RST, frame.stream_id, 0))
                return
            # Acknowledge at once (hashicorp/yamux waits at most 75 s for it).
            self._send(encode_header(TYPE_WINDOW_UPDATE, FLAG_ACK, frame.stream_id, 0))
            self._on_stream(stream)
        if stream is None:
            return  # a stream we reset or forgot: drop its frames
        if frame.type == TYPE_WINDOW_UPDATE:
            stream._grow(frame.length)
        elif not stream._deliver(frame.payload):
            raise YamuxError(f"yamux stream {frame.stream_id} exceeded its receive window")
        if frame.flags & FLAG_FIN:
            stream._remote_fin()
        if frame.flags & FLAG_RST:
            stream._remote_reset()


def relay(stream: Stream, sock: socket.socket, name: str = "tether-mux-relay") -> None:
    """Copies bytes between ``stream`` and the connected ``sock`` both ways, in two threads,
    until both directions end; then closes ``sock`` and resets or finishes ``stream``."""
    done = threading.Barrier(2, action=lambda: (sock.close(), stream.reset()))

    def to_socket() -> None:
        try:
            while data := stream.read():
                sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            _abort(sock)
        done.wait()

    def to_stream() -> None:
        try:
            while data := sock.recv(READ_CHUNK):
                stream.write(data)
            stream.close_write()
        except OSError:
            stream.reset()
            _abort(sock)
        done.wait()

    threading.Thread(target=to_socket, name=name, daemon=True).start()
    threading.Thread(target=to_stream, name=name, daemon=True).start()


def _abort(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
