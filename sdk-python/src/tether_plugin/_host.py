"""Noticing when to stop: the host process exiting, SIGTERM/SIGINT, or a Shutdown call.

All stop conditions wake one ``selectors`` wait in the main thread — no polling: the host
watch is a pidfd on the parent (readable when it exits), signals and ``Shutdown`` write to a
self-pipe.
"""

from __future__ import annotations

import enum
import logging
import os
import selectors
import signal

log = logging.getLogger("tether_plugin")


class StopReason(enum.Enum):
    """Why a plugin stopped serving without an error."""

    #: The host called ``plugin.GRPCController/Shutdown``.
    SHUTDOWN_REQUESTED = "the host called GRPCController.Shutdown"
    #: SIGTERM (or SIGINT, unless ignored) arrived.
    SIGNAL = "a termination signal arrived"
    #: The host process (the plugin's parent) exited.
    HOST_EXITED = "the host process exited"


class HostWatch:
    """A pidfd on the parent process, readable once it has exited.

    ``fd`` is ``None`` when not watching (``parent_pid`` 0: disabled, or the parent is outside
    our pid namespace) or watching is impossible (no ``os.pidfd_open``: not Linux, or an old
    kernel); ``gone`` is true when the parent had already exited when the watch was set up.
    A parent with pid 1 is watched like any other (a host may be a container's init).
    """

    def __init__(self, parent_pid: int) -> None:
        self.fd: int | None = None
        self.gone = False
        if parent_pid <= 0:
            # Not watching (disabled), or the parent is outside our pid namespace.
            return
        if not hasattr(os, "pidfd_open"):
            log.warning(
                "cannot watch the host process (no pidfd_open on this system); the plugin will "
                "not exit on its own when the host dies"
            )
            return
        try:
            fd = os.pidfd_open(parent_pid)
        except ProcessLookupError:
            self.gone = True
            return
        except OSError as e:
            log.warning(
                "cannot watch the host process (pidfd_open: %s); the plugin will not exit on its "
                "own when the host dies",
                e.strerror,
            )
            return
        # The parent may have exited between recording its pid and pidfd_open, and the pid may
        # even have been reused. If it is still our parent now, the pidfd refers to it (a
        # parent's pid cannot be reused while it is our parent); if not, it is gone.
        if os.getppid() != parent_pid:
            os.close(fd)
            self.gone = True
            return
        self.fd = fd

    def close(self) -> None:
        """Closes the pidfd."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class StopWaiter:
    """Collects the first stop reason from any thread or signal handler and wakes
    :meth:`wait`."""

    def __init__(self, host: HostWatch) -> None:
        self._host = host
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._reason: StopReason | None = None
        self._previous_handlers: dict[int, object] = {}

    def request(self, reason: StopReason) -> None:
        """Records ``reason`` (the first one wins) and wakes the waiter. Safe from any thread and
        from signal handlers."""
        if self._reason is None:
            self._reason = reason
        try:
            os.write(self._write, b"x")
        except (BlockingIOError, OSError):
            pass  # the pipe is full (already woken) or closed (already stopped)

    def install_signal_handlers(self, ignore_sigint: bool) -> None:
        """SIGTERM (and SIGINT unless ``ignore_sigint``) request a stop; with ``ignore_sigint``,
        SIGINT is ignored. Must run in the main thread."""

        def on_signal(signum: int, frame: object) -> None:
            self.request(StopReason.SIGNAL)

        self._previous_handlers[signal.SIGTERM] = signal.signal(signal.SIGTERM, on_signal)
        self._previous_handlers[signal.SIGINT] = signal.signal(
            signal.SIGINT, signal.SIG_IGN if ignore_sigint else on_signal
        )

    def wait(self) -> StopReason:
        """Blocks until a stop is requested or the host exits; returns why."""
        with selectors.DefaultSelector() as selector:
            selector.register(self._read, selectors.EVENT_READ, None)
            if self._host.fd is not None:
                selector.register(self._host.fd, selectors.EVENT_READ, StopReason.HOST_EXITED)
            while self._reason is None:
                for key, _ in selector.select():
                    if key.data is not None:
                        self.request(key.data)
        return self._reason

    def close(self) -> None:
        """Restores the signal handlers and closes the pipe's read end. The write end stays open,
        so that a late :meth:`request` from another thread fails harmlessly (EPIPE) instead of
        writing to a reused descriptor number."""
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self._previous_handlers.clear()
        if self._read >= 0:
            os.close(self._read)
            self._read = -1
