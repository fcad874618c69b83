"""A test kit for plugin authors (the Python half of ``tether-sdk-test``).

- :class:`FakeHost` serves a plugin's servicers **in this process** behind a fake host that
  speaks the real protocol: the ``plugin.GRPCBroker`` stream, callbacks the test serves on broker
  ids (:meth:`FakeHost.accept_and_serve`), host services, and a temporary directory of granted
  secrets and config files that the servicers read through :attr:`FakeHost.secrets` /
  :attr:`FakeHost.config` (``GrantedFiles`` bound to that directory: ``os.environ`` is not
  touched, so tests may run in parallel). No process is started; the connection is plaintext
  (:class:`LaunchedPlugin` covers AutoMTLS).
- :class:`LaunchedPlugin` starts the plugin **as a process**, the way a host does (cookie,
  versions, AutoMTLS with a throw-away host certificate, a private socket directory, granted
  secrets), reads its handshake, connects, and on :meth:`LaunchedPlugin.shutdown` calls
  ``GRPCController.Shutdown`` and checks that the process exited and left nothing behind.

The pytest fixtures ``tether_fake_host`` and ``tether_launch`` (``tether_plugin.pytest_plugin``,
registered as a pytest plugin when the package is installed) make and clean up both.

A servicer that takes its broker and its granted files as arguments is testable both ways::

    class Greeter(greeter_pb2_grpc.GreeterServicer):
        def __init__(self, broker, secrets):
            self.broker, self.secrets = broker, secrets

    # in the plugin:  Greeter(plugin.broker(), tether_plugin.secrets)
    # in a test:
    def test_greets(tether_fake_host):
        host = tether_fake_host(secrets={"salutation": b"Hello"})
        host.serve([(add_GreeterServicer_to_server, Greeter(host.broker, host.secrets))])
        titles = host.accept_and_serve([(add_TitlesServicer_to_server, Titles())])
        stub = greeter_pb2_grpc.GreeterStub(host.channel)
        assert stub.Greet(GreetRequest(name="Ada", titles_server=titles)).text == "Hello, Dr. Ada"
"""

from __future__ import annotations

import base64
import os
import queue
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent import futures
from typing import Any

import grpc

from . import _tls
from ._broker import DEFAULT_DIAL_TIMEOUT, HOST_SERVICES_ID, GRPCBroker, _Setup
from ._files import ENV_CONFIG_DIR, ENV_SECRETS_DIR, GrantedFiles
from ._proto.plugin import (
    grpc_broker_pb2,
    grpc_broker_pb2_grpc,
    grpc_controller_pb2,
    grpc_controller_pb2_grpc,
)

#: Seconds a launched plugin may take to print its handshake line (Python plugins take ~0.5 s).
DEFAULT_START_TIMEOUT = 20.0
#: Seconds a launched plugin may take to exit after ``GRPCController.Shutdown`` (go-plugin: 2 s).
DEFAULT_SHUTDOWN_GRACE = 2.0
#: Worker threads of the fake host's servers.
FAKE_HOST_WORKERS = 4

Services = Iterable[tuple[Any, Any]]


def _write_granted(directory: str, values: Mapping[str, bytes | str] | None) -> None:
    os.makedirs(directory, mode=0o700)
    for name, value in (values or {}).items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(value.encode() if isinstance(value, str) else value)


class FakeHost:
    """A fake host for servicers served in this process; see the module documentation.

    ``host_services`` (pairs of an ``add_…_to_server`` function and a servicer) are served
    under :data:`~tether_plugin.HOST_SERVICES_ID`; without them the plugin's
    ``broker.host_services()`` fails at once, as under a tether host that serves none.
    """

    def __init__(
        self,
        *,
        secrets: Mapping[str, bytes | str] | None = None,
        config: Mapping[str, bytes | str] | None = None,
        host_services: Services | None = None,
        dial_timeout: float = DEFAULT_DIAL_TIMEOUT,
    ) -> None:
        # Short: unix socket paths are limited to 107 bytes.
        self.dir = tempfile.mkdtemp(prefix="tfh-", dir="/tmp")
        secrets_dir = os.path.join(self.dir, "secrets")
        config_dir = os.path.join(self.dir, "config")
        _write_granted(secrets_dir, secrets)
        _write_granted(config_dir, config)
        #: The plugin's granted secrets, as ``tether_plugin.secrets`` reads them under a host.
        self.secrets = GrantedFiles(ENV_SECRETS_DIR, "secret", {ENV_SECRETS_DIR: secrets_dir})
        #: The plugin's granted config files, as ``tether_plugin.config`` reads them.
        self.config = GrantedFiles(ENV_CONFIG_DIR, "config file", {ENV_CONFIG_DIR: config_dir})
        #: The plugin side's broker, as ``Plugin.broker()`` gives it: hand it to the servicer.
        self.broker = GRPCBroker(dial_timeout=dial_timeout)
        self._host_services = list(host_services) if host_services is not None else None
        self._next_id = 0
        self._servers: list[grpc.Server] = []
        self._outbound: queue.SimpleQueue = queue.SimpleQueue()
        self._channel: grpc.Channel | None = None

    @property
    def channel(self) -> grpc.Channel:
        """The fake host's channel to the plugin's servicers (after :meth:`serve`)."""
        if self._channel is None:
            raise RuntimeError("call serve() first")
        return self._channel

    def serve(self, services: Services) -> FakeHost:
        """Serves ``services`` as the plugin, with the broker, and connects the fake host."""
        server = self._server(services)
        grpc_broker_pb2_grpc.add_GRPCBrokerServicer_to_server(self.broker.servicer(), server)
        main = os.path.join(self.dir, "plugin.sock")
        server.add_insecure_port(f"unix:{main}")
        server.start()
        self.broker._connect_setup(
            _Setup(tls=None, socket_dir=self.dir, host_services=self._host_services is not None)
        )
        self._channel = grpc.insecure_channel(f"unix:{main}")
        responses = grpc_broker_pb2_grpc.GRPCBrokerStub(self._channel).StartStream(
            iter(self._outbound.get, None)
        )
        # The plugin's announcements (its accept_and_serve) are not needed by these tests;
        # reading them keeps the stream flowing.
        threading.Thread(target=self._drain, args=(responses,), daemon=True).start()
        if self._host_services is not None:
            self._announce(HOST_SERVICES_ID, self._host_services)
        return self

    def accept_and_serve(self, services: Services) -> int:
        """Serves ``services`` as the host on a fresh broker id and announces it; returns the id
        to send to the plugin in a request (go-plugin's ``add_server``). Each announcement is
        for one dial: serve a fresh id per call."""
        self._next_id += 1
        self._announce(self._next_id, services)
        return self._next_id

    def close(self) -> None:
        """Stops everything and removes the temporary directory."""
        self.broker.close()
        self._outbound.put(None)
        if self._channel is not None:
            self._channel.close()
        for server in self._servers:
            server.stop(None)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> FakeHost:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _server(self, services: Services) -> grpc.Server:
        server = grpc.server(
            futures.ThreadPoolExecutor(FAKE_HOST_WORKERS), options=[("grpc.so_reuseport", 0)]
        )
        for add, servicer in services:
            add(servicer, server)
        self._servers.append(server)
        return server

    def _announce(self, broker_id: int, services: Services) -> None:
        server = self._server(services)
        path = os.path.join(self.dir, f"host-{broker_id}.sock")
        server.add_insecure_port(f"unix:{path}")
        server.start()
        self._outbound.put(grpc_broker_pb2.ConnInfo(service_id=broker_id, network="unix", address=path))

    @staticmethod
    def _drain(responses: Any) -> None:
        try:
            for _ in responses:
                pass
        except grpc.RpcError:
            pass  # the stream ends when the host closes


class LaunchedPlugin:
    """A plugin process started the way a host starts it; see the module documentation.

    ``command`` is the plugin's argv. The process gets only ``PATH`` (and ``PYTHONPATH`` when
    set here) besides the protocol's variables, a private socket directory, and
    ``TETHER_HOST_SERVICES=none``.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        cookie: tuple[str, str] = ("BASIC_PLUGIN", "hello"),
        app_versions: Sequence[int] = (1,),
        tls: bool = True,
        secrets: Mapping[str, bytes | str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> None:
        self.dir = tempfile.mkdtemp(prefix="tlp-", dir="/tmp")
        self.socket_dir = os.path.join(self.dir, "run")
        os.makedirs(self.socket_dir, mode=0o700)
        environ = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            cookie[0]: cookie[1],
            "PLUGIN_PROTOCOL_VERSIONS": ",".join(str(v) for v in app_versions),
            "PLUGIN_UNIX_SOCKET_DIR": self.socket_dir,
            "TMPDIR": self.socket_dir,
            "TETHER_HOST_SERVICES": "none",
        }
        if "PYTHONPATH" in os.environ:
            environ["PYTHONPATH"] = os.environ["PYTHONPATH"]
        host = _tls.generate_identity() if tls else None
        if host is not None:
            environ["PLUGIN_CLIENT_CERT"] = host.cert_pem.decode()
        if secrets:
            secrets_dir = os.path.join(self.dir, "secrets")
            _write_granted(secrets_dir, secrets)
            environ[ENV_SECRETS_DIR] = secrets_dir
        environ.update(env or {})
        self.process = subprocess.Popen(
            list(command),
            env=environ,
            cwd=cwd or self.dir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.stderr = bytearray()
        threading.Thread(target=self._collect_stderr, daemon=True).start()
        lines: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._read_stdout, args=(lines,), daemon=True).start()
        try:
            #: The handshake line, without its newline.
            self.handshake: str = lines.get(timeout=start_timeout)
        except queue.Empty:
            self.kill()
            raise TimeoutError(
                f"no handshake line within {start_timeout}s; stderr: {bytes(self.stderr)!r}"
            ) from None
        if not self.handshake:
            self.process.wait(start_timeout)
            raise RuntimeError(
                f"the plugin exited ({self.process.returncode}) without a handshake; "
                f"stderr: {bytes(self.stderr).decode(errors='replace')}"
            )
        fields = self.handshake.split("|")
        network, address, cert = fields[2], fields[3], fields[5] if len(fields) > 5 else ""
        target = f"unix:{address}" if network == "unix" else address
        if host is None:
            self.channel = grpc.insecure_channel(target)
        else:
            der = base64.b64decode(cert + "=" * (-len(cert) % 4))
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_tls.der_to_pem(der),
                private_key=host.key_pem,
                certificate_chain=host.cert_pem,
            )
            self.channel = grpc.secure_channel(
                target, credentials, options=[("grpc.ssl_target_name_override", _tls.SERVER_NAME)]
            )

    def shutdown(self, grace: float = DEFAULT_SHUTDOWN_GRACE) -> int:
        """Calls ``GRPCController.Shutdown`` and waits ``grace`` seconds for the exit; raises
        ``AssertionError`` when the plugin does not exit in time, exits non-zero, or leaves a
        file in its socket directory. Returns the exit status."""
        try:
            grpc_controller_pb2_grpc.GRPCControllerStub(self.channel).Shutdown(
                grpc_controller_pb2.Empty(), timeout=grace
            )
            self.channel.close()
            try:
                status = self.process.wait(grace)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"the plugin did not exit within {grace}s of Shutdown") from None
            assert status == 0, f"exit status {status}; stderr: {bytes(self.stderr).decode(errors='replace')}"
            left = os.listdir(self.socket_dir)
            assert not left, f"left behind in the socket directory: {left}"
            return status
        finally:
            self.kill()

    def kill(self) -> None:
        """Ends the process group (if still running) and removes the temporary directory."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, 9)
            except ProcessLookupError:
                pass
            self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _read_stdout(self, lines: queue.SimpleQueue) -> None:
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        lines.put(first.decode(errors="replace").rstrip("\n"))
        for _ in self.process.stdout:
            pass  # later output is drained, as hosts do

    def _collect_stderr(self) -> None:
        assert self.process.stderr is not None
        for chunk in iter(lambda: self.process.stderr.read1(4096), b""):
            self.stderr.extend(chunk)
