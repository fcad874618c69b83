"""The SDK end to end: a real plugin process, driven the way a host drives it (launch with the
protocol variables, read the handshake, connect with mutual TLS, call, shut down)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import kv_pb2
import kv_pb2_grpc
import pytest
from google.protobuf import empty_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

import tether_plugin
from tether_plugin import (
    NOT_LAUNCHED_BY_HOST_MESSAGE,
    ConfigurationError,
    Plugin,
    generate_identity,
)
from tether_plugin._proto.plugin import (
    grpc_controller_pb2,
    grpc_controller_pb2_grpc,
    grpc_stdio_pb2,
    grpc_stdio_pb2_grpc,
)

SDK = Path(__file__).resolve().parent.parent
SAMPLE = Path(__file__).resolve().parent / "sample_plugin.py"
EXIT_TIMEOUT = 30  # seconds; only bounds a hang, the tests wait for exit events


def launch(tmp_path, extra_env=None, *, host=None, transport="unix", versions="1", script=SAMPLE):
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": os.pathsep.join([str(SDK / "src"), str(SDK / "examples")]),
        "TMPDIR": str(tmp_path),
        "BASIC_PLUGIN": "hello",
        "PLUGIN_PROTOCOL_VERSIONS": versions,
    }
    if host is not None:
        env["PLUGIN_CLIENT_CERT"] = host.cert_pem.decode()
    env.update(extra_env or {})
    env = {k: v for k, v in env.items() if v is not None}
    return subprocess.Popen(
        [sys.executable, str(script), transport],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


class Connected:
    def __init__(self, proc, host):
        self.proc = proc
        self.line = proc.stdout.readline().decode()
        fields = self.line.rstrip("\n").split("|")
        assert len(fields) == 6, self.line
        self.core, self.app, self.network, self.address, self.protocol, self.cert = fields
        target = f"unix:{self.address}" if self.network == "unix" else self.address
        if host is None:
            self.channel = grpc.insecure_channel(target)
        else:
            import base64

            der = base64.b64decode(self.cert + "=" * (-len(self.cert) % 4))
            from tether_plugin._tls import der_to_pem

            creds = grpc.ssl_channel_credentials(
                root_certificates=der_to_pem(der), private_key=host.key_pem, certificate_chain=host.cert_pem
            )
            self.channel = grpc.secure_channel(
                target, creds, options=[("grpc.ssl_target_name_override", "localhost")]
            )
        self.kv = kv_pb2_grpc.KVStub(self.channel)

    def shutdown(self):
        grpc_controller_pb2_grpc.GRPCControllerStub(self.channel).Shutdown(
            grpc_controller_pb2.Empty(), timeout=10
        )
        self.channel.close()
        return self.proc.wait(EXIT_TIMEOUT)


def leftovers(tmp_path):
    return [p.name for p in tmp_path.iterdir() if not p.name.startswith("kv_")]


def test_configuration_mistakes_are_reported_before_anything_runs():
    with pytest.raises(ConfigurationError, match="cookie"):
        Plugin("", "x").check()
    with pytest.raises(ConfigurationError, match="app_versions"):
        Plugin("K", "v", app_versions=[]).check()
    with pytest.raises(ConfigurationError, match="version 3"):
        Plugin("K", "v", app_versions=[1, 2]).add_service(
            kv_pb2_grpc.add_KVServicer_to_server, kv_pb2_grpc.KVServicer(), app_version=3
        ).check()
    with pytest.raises(ConfigurationError, match="grpc.health.v1.Health is served more than once"):
        from grpc_health.v1 import health

        Plugin("K", "v").add_service(
            health_pb2_grpc.add_HealthServicer_to_server, health.HealthServicer()
        ).check()


def test_the_same_service_may_be_served_once_per_version_but_not_twice_for_one():
    add, servicer = kv_pb2_grpc.add_KVServicer_to_server, kv_pb2_grpc.KVServicer()
    Plugin("K", "v", app_versions=[1, 2]).add_service(add, servicer, app_version=1).add_service(
        add, servicer, app_version=2
    ).check()
    with pytest.raises(ConfigurationError, match="proto.KV"):
        Plugin("K", "v", app_versions=[1, 2]).add_service(add, servicer).add_service(
            add, servicer, app_version=2
        ).check()


def test_run_by_hand_it_prints_go_plugins_message_and_exits_1_with_nothing_on_stdout(tmp_path):
    proc = launch(tmp_path, {"BASIC_PLUGIN": None})
    out, err = proc.communicate(timeout=EXIT_TIMEOUT)
    assert proc.returncode == 1
    assert out == b""
    assert err.decode() == NOT_LAUNCHED_BY_HOST_MESSAGE + "\n"


def test_a_wrong_cookie_gets_the_same_message(tmp_path):
    proc = launch(tmp_path, {"BASIC_PLUGIN": "other-app"})
    out, err = proc.communicate(timeout=EXIT_TIMEOUT)
    assert (proc.returncode, out) == (1, b"")
    assert err.decode().startswith("This binary is a plugin.")


def test_a_malformed_version_list_is_one_error_line_and_exit_1(tmp_path):
    proc = launch(tmp_path, versions="1,two")
    out, err = proc.communicate(timeout=EXIT_TIMEOUT)
    assert (proc.returncode, out) == (1, b"")
    assert err.decode().startswith("[ERROR] plugin failed: PLUGIN_PROTOCOL_VERSIONS='1,two'")
    assert leftovers(tmp_path) == []


def test_with_automtls_the_host_calls_the_plugin_and_shuts_it_down(tmp_path):
    host = generate_identity()
    plugin = Connected(launch(tmp_path, host=host, versions="2,1"), host)
    assert (plugin.core, plugin.app, plugin.network, plugin.protocol) == ("1", "2", "unix", "grpc")
    assert plugin.address.startswith(str(tmp_path)), "the private socket directory honours TMPDIR"
    socket_dir = Path(plugin.address).parent
    assert socket_dir.stat().st_mode & 0o777 == 0o700
    assert len(plugin.cert) > 50 and "=" not in plugin.cert

    plugin.kv.Put(kv_pb2.PutRequest(key="a", value=b"1"), timeout=10)
    assert (tmp_path / "kv_a").read_bytes() == b"1"
    assert plugin.kv.Get(kv_pb2.GetRequest(key="a"), timeout=10).value == b"1"
    with pytest.raises(grpc.RpcError) as e:
        plugin.kv.Get(kv_pb2.GetRequest(key="missing"), timeout=10)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as e:
        plugin.kv.Put(kv_pb2.PutRequest(key="../escape", value=b"x"), timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    health = health_pb2_grpc.HealthStub(plugin.channel)
    status = health.Check(health_pb2.HealthCheckRequest(service="plugin"), timeout=10).status
    assert status == health_pb2.HealthCheckResponse.SERVING

    assert plugin.shutdown() == 0
    assert not socket_dir.exists(), "the private socket directory is removed"
    # Nobody streamed GRPCStdio, so the plugin's prints went to its real stdout.
    assert plugin.proc.stdout.read() == b"stdout: stored a\nstdout: stored ../escape\n"


def test_a_client_with_another_certificate_cannot_call_the_plugin(tmp_path):
    host = generate_identity()
    proc = launch(tmp_path, host=host)
    impostor = Connected(proc, generate_identity())
    with pytest.raises(grpc.RpcError) as e:
        impostor.kv.Get(kv_pb2.GetRequest(key="a"), timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(EXIT_TIMEOUT) == 0


def test_later_stdout_and_stderr_are_streamed_over_grpc_stdio(tmp_path):
    proc = launch(tmp_path)
    plugin = Connected(proc, None)
    assert plugin.cert == "", "no AutoMTLS without PLUGIN_CLIENT_CERT"
    stream = grpc_stdio_pb2_grpc.GRPCStdioStub(plugin.channel).StreamStdio(empty_pb2.Empty())
    # The plugin sends the headers once it has subscribed the stream to its output.
    stream.initial_metadata()
    plugin.kv.Put(kv_pb2.PutRequest(key="k", value=b"v"), timeout=10)
    got = {}
    for data in stream:
        got[data.channel] = got.get(data.channel, b"") + data.data
        if all(
            b"\n" in got.get(ch, b"")
            for ch in (grpc_stdio_pb2.StdioData.STDOUT, grpc_stdio_pb2.StdioData.STDERR)
        ):
            break
    assert got[grpc_stdio_pb2.StdioData.STDOUT] == b"stdout: stored k\n"
    assert got[grpc_stdio_pb2.StdioData.STDERR] == b"stderr: stored k\n"
    stream.cancel()
    assert plugin.shutdown() == 0


def test_reflection_lists_the_plugins_services(tmp_path):
    plugin = Connected(launch(tmp_path), None)
    stub = reflection_pb2_grpc.ServerReflectionStub(plugin.channel)
    responses = stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10
    )
    names = {s.name for s in next(responses).list_services_response.service}
    assert {"proto.KV", "plugin.GRPCController", "plugin.GRPCStdio", "grpc.health.v1.Health"} <= names
    assert plugin.shutdown() == 0


def test_tcp_listens_on_loopback_within_the_hosts_port_range(tmp_path):
    proc = launch(tmp_path, {"PLUGIN_MIN_PORT": "23100", "PLUGIN_MAX_PORT": "23199"}, transport="tcp")
    plugin = Connected(proc, None)
    assert plugin.network == "tcp"
    host, port = plugin.address.rsplit(":", 1)
    assert host == "127.0.0.1" and 23100 <= int(port) <= 23199
    plugin.kv.Put(kv_pb2.PutRequest(key="t", value=b"cp"), timeout=10)
    assert plugin.shutdown() == 0


def test_sigterm_stops_the_plugin_gracefully(tmp_path):
    plugin = Connected(launch(tmp_path, host=(host := generate_identity())), host)
    plugin.kv.Put(kv_pb2.PutRequest(key="s", value=b"1"), timeout=10)
    plugin.proc.send_signal(signal.SIGTERM)
    assert plugin.proc.wait(EXIT_TIMEOUT) == 0
    assert leftovers(tmp_path) == []


def test_the_package_exports_what_the_readme_uses():
    assert callable(tether_plugin.serve)
    assert tether_plugin.HEALTH_SERVICE == "plugin"
    assert tether_plugin.secrets.read is not None and tether_plugin.config.read is not None


def test_the_socket_goes_in_the_hosts_directory_with_its_group_and_is_removed_at_exit(tmp_path):
    sockets = tmp_path / "sockets"
    sockets.mkdir()
    gid = os.getgid()
    proc = launch(tmp_path, {"PLUGIN_UNIX_SOCKET_DIR": str(sockets), "PLUGIN_UNIX_SOCKET_GROUP": str(gid)})
    plugin = Connected(proc, None)
    path = Path(plugin.address)
    assert path.parent == sockets and path.name.startswith("plugin-") and path.suffix == ".sock"
    assert path.stat().st_gid == gid and path.stat().st_mode & 0o777 == 0o660
    plugin.kv.Put(kv_pb2.PutRequest(key="g", value=b"1"), timeout=10)
    assert plugin.shutdown() == 0
    assert list(sockets.iterdir()) == [], "the socket is removed; the host's directory stays"


def test_an_unknown_socket_group_is_a_clear_error(tmp_path):
    proc = launch(tmp_path, {"PLUGIN_UNIX_SOCKET_GROUP": "no-such-group-xyz"})
    out, err = proc.communicate(timeout=EXIT_TIMEOUT)
    assert (proc.returncode, out) == (1, b"")
    assert "PLUGIN_UNIX_SOCKET_GROUP='no-such-group-xyz' is neither a group name" in err.decode()
    assert leftovers(tmp_path) == []
