"""The socket the host connects to: a unix socket (in the host's directory or a private 0700
directory) or a loopback TCP port in the host's range."""

from __future__ import annotations

import contextlib
import grp
import os
import secrets as _random
import shutil
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import grpc

from ._launch import ENV_UNIX_SOCKET_DIR, ENV_UNIX_SOCKET_GROUP, Launch
from .errors import LaunchError, ListenError

#: Longest unix socket path the kernel accepts (``sun_path`` is 108 bytes with the NUL).
MAX_UNIX_PATH_BYTES = 107

#: Name of the socket inside a private directory the plugin made itself.
SOCKET_NAME = "plugin.sock"


@dataclass
class Bound:
    """A bound address and what to remove when the plugin stops."""

    network: Literal["unix", "tcp"]
    address: str
    #: The socket file, for a socket in the host's directory.
    socket_path: str | None = None
    #: The private directory the plugin made, removed with everything in it.
    private_dir: str | None = None

    def cleanup(self) -> None:
        """Removes the socket file or the private directory."""
        if self.socket_path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket_path)
        if self.private_dir is not None:
            shutil.rmtree(self.private_dir, ignore_errors=True)


#: Binds an address (``unix:/path`` or ``127.0.0.1:PORT``); raises ``RuntimeError`` if it cannot.
Binder = Callable[[str], None]


def grpc_binder(server: grpc.Server, credentials: grpc.ServerCredentials | None) -> Binder:
    """Binds addresses as ports of ``server`` (before ``server.start()``)."""

    def add(address: str) -> None:
        port = (
            server.add_secure_port(address, credentials)
            if credentials is not None
            else server.add_insecure_port(address)
        )
        if port == 0:  # older grpcio reports failure this way instead of raising
            raise RuntimeError(f"failed to bind to {address}")

    return add


def listening_socket(address: str, backlog: int) -> socket.socket:
    """A Python socket bound to ``unix:/path`` or ``HOST:PORT`` and listening with ``backlog``;
    ``RuntimeError`` naming the address if it cannot be (a :data:`Binder`'s error)."""
    try:
        if address.startswith("unix:"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            target: object = address[len("unix:") :]
        else:
            host, port = address.rsplit(":", 1)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            target = (host, int(port))
        try:
            sock.bind(target)
            sock.listen(backlog)
        except OSError:
            sock.close()
            raise
    except OSError as e:
        raise RuntimeError(f"cannot listen on {address}: {e.strerror}") from e
    return sock


def private_socket() -> Bound:
    """A socket path in a fresh private 0700 directory (honours TMPDIR), not yet bound."""
    parent = tempfile.gettempdir()
    try:
        private = tempfile.mkdtemp(prefix="tether-plugin-")
    except OSError as e:
        raise ListenError(
            f"cannot create a private socket directory in {parent!r}: {e.strerror}; set "
            "TMPDIR to a writable directory"
        ) from e
    path = os.path.join(private, SOCKET_NAME)
    bound = Bound("unix", path, private_dir=private)
    if len(os.fsencode(path)) > MAX_UNIX_PATH_BYTES:
        bound.cleanup()
        raise ListenError(
            f"the unix socket path {path!r} is longer than {MAX_UNIX_PATH_BYTES} bytes; set "
            "TMPDIR to a shorter directory"
        )
    return bound


def bind(add: Binder, launch: Launch, transport: Literal["unix", "tcp"]) -> Bound:
    """Binds the address the handshake will announce, with ``add``."""
    if transport == "tcp":
        return _bind_tcp(add, launch)
    if launch.socket_dir is not None:
        # The host's directory may be shared with other plugins: a fresh random name there.
        path = os.path.join(launch.socket_dir, f"plugin-{_random.token_hex(8)}.sock")
        bound = Bound("unix", path, socket_path=path)
        where = f"{ENV_UNIX_SOCKET_DIR}={launch.socket_dir!r}"
        if len(os.fsencode(path)) > MAX_UNIX_PATH_BYTES:
            raise ListenError(
                f"the unix socket path {path!r} is longer than {MAX_UNIX_PATH_BYTES} bytes; the "
                f"host's {where} is too long"
            )
    else:
        bound = private_socket()
        path = bound.address
        where = f"the temporary directory {tempfile.gettempdir()!r} (TMPDIR)"
    try:
        add(f"unix:{path}")
    except RuntimeError as e:
        bound.cleanup()
        raise ListenError(f"cannot listen on unix socket {path!r} in {where}: {e}") from e
    if launch.socket_group is not None:
        try:
            _make_group_writable(path, launch.socket_group)
        except BaseException:
            bound.cleanup()
            raise
    return bound


def _bind_tcp(add: Binder, launch: Launch) -> Bound:
    """The first free port of the range on 127.0.0.1, in order, as go-plugin does."""
    for port in range(launch.ports.min, launch.ports.max + 1):
        if not _port_is_free(port):
            continue
        try:
            add(f"127.0.0.1:{port}")
        except RuntimeError:
            continue  # taken between the probe and the bind
        return Bound("tcp", f"127.0.0.1:{port}")
    raise ListenError(
        f"no free TCP port on 127.0.0.1 between {launch.ports.min} and {launch.ports.max} "
        "(PLUGIN_MIN_PORT..PLUGIN_MAX_PORT)"
    )


def _port_is_free(port: int) -> bool:
    # Probing first keeps gRPC from logging an error for each taken port.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _make_group_writable(path: str, group: str) -> None:
    """Gives the socket to ``group`` (a name or a numeric id) with mode 0660, as go-plugin does."""
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        if not group.isdigit():
            raise LaunchError(
                f"{ENV_UNIX_SOCKET_GROUP}={group!r} is neither a group name nor a numeric group id"
            ) from None
        gid = int(group)
    try:
        os.chown(path, -1, gid)
        os.chmod(path, 0o660)
    except OSError as e:
        raise ListenError(
            f"cannot give the unix socket {path!r} to group {group!r} ({ENV_UNIX_SOCKET_GROUP}): {e.strerror}"
        ) from e
