"""A dialled broker channel that takes down what was set up for it when it is closed.

A dial may need more than a gRPC channel: a relay for the multiplexed broker (a private socket
and its thread) or a TLS relay for go-plugin's P-521 certificates (a thread with its own event
loop). Plugins that dial a fresh id per call (go-plugin's ``examples/bidirectional``) close
each channel after the call; that close must end those too, or a long-running plugin gathers
one relay per call until it stops.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import grpc


class _Delegating(grpc.Channel):
    """A channel that hands every call to ``inner``; subclasses decide what ``close`` does."""

    def __init__(self, inner: grpc.Channel) -> None:
        self._inner = inner

    def subscribe(self, callback: Any, try_to_connect: bool = False) -> None:
        self._inner.subscribe(callback, try_to_connect)

    def unsubscribe(self, callback: Any) -> None:
        self._inner.unsubscribe(callback)

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._inner.unary_unary(method, *args, **kwargs)

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._inner.unary_stream(method, *args, **kwargs)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._inner.stream_unary(method, *args, **kwargs)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._inner.stream_stream(method, *args, **kwargs)

    def __enter__(self) -> _Delegating:
        return self

    def __exit__(self, *exc: object) -> bool:
        self.close()
        return False


class DialledChannel(_Delegating):
    """``inner`` plus the ``cleanups`` of its dial, run once, when the channel is closed (by its
    user, by ``with``, or by the broker when the plugin stops)."""

    def __init__(
        self,
        inner: grpc.Channel,
        cleanups: list[Callable[[], None]],
        on_close: Callable[[DialledChannel], None],
    ) -> None:
        super().__init__(inner)
        self._cleanups = cleanups
        self._on_close = on_close
        self._closed = False
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._inner.close()
        for cleanup in self._cleanups:
            cleanup()
        self._on_close(self)


class SharedChannel(_Delegating):
    """A view of the one host-services channel every caller of ``host_services()`` shares: its
    ``close`` leaves the connection open for the others (the broker closes it when the plugin
    stops)."""

    def close(self) -> None:
        """Does nothing: the channel is shared."""
