"""TLS for hosts whose certificates gRPC's own TLS stack cannot verify.

go-plugin hosts make ECDSA **P-521** certificates. grpcio's TLS (BoringSSL) does not offer the
``ecdsa_secp521r1_sha512`` signature scheme, so a Go host finds no acceptable client
certificate and the handshake fails (``PEER_DID_NOT_RETURN_A_CERTIFICATE``). For such hosts the
plugin terminates TLS itself with Python's :mod:`ssl` (OpenSSL, which verifies P-521): a
:class:`TlsTerminator` listens on the announced socket, completes the mutual-TLS handshake
(ALPN ``h2``, TLS ≥ 1.2, client certificate required and compared byte for byte with the
host's), and relays the decrypted bytes to the gRPC server, which listens in plaintext on a
unix socket in a private 0700 directory that only this process knows.

The terminator runs an asyncio event loop (memory-BIO TLS, one thread) in a thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
import tempfile
import threading
from collections.abc import Awaitable, Callable

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from ._listen import listening_socket, private_socket
from ._tls import SERVER_NAME, Identity, der_to_pem

log = logging.getLogger("tether_plugin")

#: Seconds a connecting host gets to complete the TLS handshake.
TLS_HANDSHAKE_TIMEOUT = 10.0
#: Bytes relayed per read.
RELAY_CHUNK = 64 * 1024
#: Seconds :meth:`TlsTerminator.stop` waits for the relay thread to finish.
STOP_TIMEOUT = 2.0

# Curves grpcio's BoringSSL offers signature schemes for (TLS 1.3 binds the curve).
_GRPC_CURVES = frozenset({"secp256r1", "secp384r1"})


def grpc_tls_can_verify(host_cert_der: bytes) -> bool:
    """Whether gRPC's own TLS can verify a client presenting this certificate: RSA, P-256 and
    P-384 keys yes (tether hosts use P-256); P-521 (go-plugin hosts) and others no."""
    key = x509.load_der_x509_certificate(host_cert_der).public_key()
    if isinstance(key, ec.EllipticCurvePublicKey):
        return key.curve.name in _GRPC_CURVES
    return isinstance(key, rsa.RSAPublicKey)


def ssl_context(identity: Identity, host_cert_der: bytes) -> ssl.SSLContext:
    """A server context: present ``identity``, require a client certificate signed by (or equal
    to) the host's, ALPN ``h2``. The exact-certificate check happens per connection."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=der_to_pem(host_cert_der).decode("ascii"))
    context.set_alpn_protocols(["h2"])
    _load_identity(context, identity)
    return context


def client_ssl_context(identity: Identity, host_cert_der: bytes) -> ssl.SSLContext:
    """A client context for dialling the host's broker: present ``identity``, ALPN ``h2``.

    The host's certificate is not checked by a chain here but pinned: :class:`TlsDialRelay`
    compares the certificate the server presented with ``host_cert_der`` byte for byte after the
    handshake, in which the server proved it holds that certificate's key. (go-plugin hosts
    present CA:TRUE certificates, which chain verification would treat as a root that could
    sign others; the exact comparison admits that one certificate only.)"""
    del host_cert_der  # pinned per connection by the relay
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    _load_identity(context, identity)
    return context


def _load_identity(context: ssl.SSLContext, identity: Identity) -> None:
    # load_cert_chain reads files only: write the throw-away key to a private directory and
    # delete it at once.
    with tempfile.TemporaryDirectory(prefix="tether-plugin-key-") as private:
        path = os.path.join(private, "identity.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(identity.key_pem + identity.cert_pem)
        context.load_cert_chain(path)


class _RelayThread:
    """An asyncio event loop in a thread of its own that relays connections: the servers
    :meth:`_start` opens and the connections their handler :meth:`_handle` serves with the
    subclass's :meth:`_relay`, all closed by :meth:`_stop_thread`."""

    #: What the debug log says when a connection ends with an error.
    _ENDED = "connection ended: %s"

    def __init__(self, thread_name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)
        self._servers: list[asyncio.AbstractServer] = []
        self._connections: set[asyncio.Task] = set()

    def _start(self, open_servers: Callable[[], Awaitable[None]], what: str) -> None:
        """Starts the thread and runs ``open_servers`` (which adds to ``_servers``) in it;
        ``RuntimeError`` naming ``what`` if that fails."""
        started = threading.Event()
        errors: list[BaseException] = []

        async def run() -> None:
            try:
                await open_servers()
            except BaseException as e:  # reported to the caller
                errors.append(e)
            finally:
                started.set()

        self._thread.start()
        asyncio.run_coroutine_threadsafe(run(), self._loop)
        started.wait()
        if errors:
            raise RuntimeError(f"cannot start {what}: {errors[0]}")

    def _stop_thread(self) -> None:
        """Closes the servers and every connection, then ends the thread."""

        async def close() -> None:
            for server in self._servers:
                server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(STOP_TIMEOUT)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(STOP_TIMEOUT)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The servers' handler: records the running connection, so that :meth:`_stop_thread`
        can end it, relays it, and closes it however the relay ends."""
        task = asyncio.current_task()
        assert task is not None  # a handler always runs in a task
        self._connections.add(task)
        try:
            await self._relay(reader, writer)
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError) as e:
            log.debug(self._ENDED, e)
        except asyncio.CancelledError:
            pass  # stop() is closing every connection; the task ends here either way
        finally:
            writer.close()
            self._connections.discard(task)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError


def _is_host(writer: asyncio.StreamWriter, host_cert_der: bytes, refusal: str) -> bool:
    """Whether the peer of ``writer``'s TLS connection showed exactly the host's certificate;
    logs ``refusal`` when it did not."""
    ssl_object = writer.get_extra_info("ssl_object")
    peer = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if peer != host_cert_der:
        log.warning(refusal)
        return False
    return True


class TlsTerminator(_RelayThread):
    """Accepts mutual-TLS connections from the host and relays them to ``inner_path``."""

    _ENDED = "TLS connection ended: %s"

    def __init__(self, context: ssl.SSLContext, host_cert_der: bytes, inner_path: str) -> None:
        super().__init__("tether-plugin-tls")
        self._context = context
        self._host = host_cert_der
        self._inner = inner_path
        self._sockets: list[socket.socket] = []

    def listen(self, address: str) -> None:
        """Binds ``unix:/path`` or ``127.0.0.1:PORT`` (``RuntimeError`` if it cannot)."""
        sock = listening_socket(address, backlog=socket.SOMAXCONN)
        self._sockets.append(sock)

    def start(self) -> None:
        """Starts serving the bound sockets in the relay thread."""

        async def open_servers() -> None:
            for sock in self._sockets:
                start = asyncio.start_unix_server if sock.family == socket.AF_UNIX else asyncio.start_server
                self._servers.append(
                    await start(
                        self._handle,
                        sock=sock,
                        ssl=self._context,
                        ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT,
                    )
                )

        self._start(open_servers, "the TLS listener")

    def stop(self) -> None:
        """Stops accepting, closes open connections and ends the relay thread."""
        if not self._thread.is_alive():
            for sock in self._sockets:
                sock.close()
            return
        self._stop_thread()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        refusal = (
            "refused a TLS connection whose client certificate is not the host's "
            "certificate from PLUGIN_CLIENT_CERT"
        )
        if not _is_host(writer, self._host, refusal):
            return
        inner_reader, inner_writer = await asyncio.open_unix_connection(self._inner)
        try:
            await _relay_both_ways(reader, writer, inner_reader, inner_writer)
        finally:
            inner_writer.close()


async def _relay_both_ways(
    a_reader: asyncio.StreamReader,
    a_writer: asyncio.StreamWriter,
    b_reader: asyncio.StreamReader,
    b_writer: asyncio.StreamWriter,
) -> None:
    """Copies a→b and b→a until either side closes."""
    pumps = {
        asyncio.ensure_future(_pump(a_reader, b_writer)),
        asyncio.ensure_future(_pump(b_reader, a_writer)),
    }
    try:
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pump in pumps:
            pump.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(RELAY_CHUNK):
        writer.write(data)
        await writer.drain()


class TlsDialRelay(_RelayThread):
    """The dialling side of :class:`TlsTerminator`: gRPC connects in plaintext to a unix socket
    in a private 0700 directory (:attr:`address`); each connection is relayed over mutual TLS,
    done with Python's :mod:`ssl`, to the host's ``network``/``address``, whose certificate must
    be exactly ``host_cert_der``."""

    _ENDED = "TLS broker connection ended: %s"

    def __init__(self, context: ssl.SSLContext, host_cert_der: bytes, network: str, address: str) -> None:

        super().__init__("tether-plugin-tls-dial")
        self._context = context
        self._host = host_cert_der
        self._network = network
        self._target = address
        self._bound = private_socket()
        #: The plaintext socket gRPC dials.
        self.address = self._bound.address

    def start(self) -> None:
        """Listens on :attr:`address` and relays in a thread of its own."""

        async def open_server() -> None:
            self._servers.append(await asyncio.start_unix_server(self._handle, path=self.address))

        try:
            self._start(open_server, "the TLS dial relay")
        except RuntimeError:
            self.stop()
            raise

    def stop(self) -> None:
        """Closes the relay and its connections and removes its socket."""
        if self._thread.is_alive():
            self._stop_thread()
        self._bound.cleanup()

    async def _open_host(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._network == "unix":
            return await asyncio.open_unix_connection(
                self._target,
                ssl=self._context,
                server_hostname=SERVER_NAME,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT,
            )
        host, _, port = self._target.rpartition(":")
        return await asyncio.open_connection(
            host.strip("[]"),
            int(port),
            ssl=self._context,
            server_hostname=SERVER_NAME,
            ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT,
        )

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        refusal = (
            "refused a broker connection: the server's certificate is not the host's "
            "certificate from PLUGIN_CLIENT_CERT"
        )
        host_reader, host_writer = await self._open_host()
        try:
            if _is_host(host_writer, self._host, refusal):
                await _relay_both_ways(reader, writer, host_reader, host_writer)
        finally:
            host_writer.close()
