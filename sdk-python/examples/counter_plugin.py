#!/usr/bin/env python3
"""Counter plugin: go-plugin's ``examples/bidirectional`` plugin, written with the tether Python
SDK — a plugin that calls back into its host through ``plugin.GRPCBroker``.

Serves ``proto.Counter`` (app version 1, cookie ``BASIC_PLUGIN=hello``). ``Put{add_server, key,
value}`` dials the host's ``AddHelper`` on broker id ``add_server``, asks it for
``Sum(current, value)`` and stores the result; ``add_server`` 0 (an id go-plugin never hands
out) means the ``AddHelper`` a tether host registered as a host service, reached without an id.
``Get{key}`` returns the stored number (0 for a key never put). Each number lives in
``kv_<key>`` in the working directory as ``{"Value":N}``, like go-plugin's own example, so the
Go, Rust and Python counter plugins share their files.

    export COUNTER_PLUGIN="python3 sdk-python/examples/counter_plugin.py"
    target/debug/counter-host put c 5 && target/debug/counter-host put c 7
    target/debug/counter-host get c   # prints 12

(with a Python outside the system paths, e.g. pyenv, add ``--allow-exec "$(python3 -c 'import
sys; print(sys.base_prefix)')" --allow-read sdk-python`` so the confined plugin can run).
"""

import json
import logging
import os
import sys

import grpc

_CHECKOUT_SDK = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "src")
if os.path.isdir(os.path.join(_CHECKOUT_SDK, "tether_plugin")):
    sys.path.insert(0, _CHECKOUT_SDK)

import counter_pb2  # noqa: E402 (generated from examples/proto/counter.proto)
import counter_pb2_grpc  # noqa: E402

import tether_plugin  # noqa: E402

log = logging.getLogger("counter")


def path_for(key: str) -> str:
    """The file holding ``key``'s number; ``ValueError`` for keys that could name another file."""
    if key in ("", ".", "..") or any(c in key for c in "/\\\0"):
        raise ValueError(
            f"invalid key {key!r}: keys must be non-empty, not '.' or '..', and contain no '/', '\\' or NUL"
        )
    return f"kv_{key}"


def read(path: str) -> int:
    """The number stored in ``path`` (0 when there is none)."""
    try:
        with open(path) as f:
            return int(json.load(f)["Value"])
    except FileNotFoundError:
        return 0


class FileCounter(counter_pb2_grpc.CounterServicer):
    """Keeps each number in ``kv_<key>``; adds through the host."""

    def __init__(self, broker: tether_plugin.GRPCBroker) -> None:
        self._broker = broker

    def Get(self, request, context):  # noqa: N802 (gRPC method name)
        return counter_pb2.GetResponse(value=read(self._path(request.key, context)))

    def Put(self, request, context):  # noqa: N802 (gRPC method name)
        path = self._path(request.key, context)
        current = read(path)
        try:
            if request.add_server == 0:
                channel = self._broker.host_services()
            else:
                channel = self._broker.dial(request.add_server)
            total = (
                counter_pb2_grpc.AddHelperStub(channel)
                .Sum(counter_pb2.SumRequest(a=current, b=request.value))
                .r
            )
            if request.add_server != 0:
                channel.close()  # a per-call id is served for this call only
        except tether_plugin.GrpcBrokerError as e:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"cannot reach the host's AddHelper: {e}")
        except grpc.RpcError as e:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"the host's AddHelper.Sum failed: {e.details()}")
        with open(path, "w") as f:
            f.write(json.dumps({"Value": total}, separators=(",", ":")))
        log.debug("stored a number", extra={"key": request.key, "value": total})
        return counter_pb2.Empty()

    @staticmethod
    def _path(key, context):
        try:
            return path_for(key)
        except ValueError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))


if __name__ == "__main__":
    plugin = tether_plugin.Plugin("BASIC_PLUGIN", "hello", app_versions=[1])
    plugin.add_service(counter_pb2_grpc.add_CounterServicer_to_server, FileCounter(plugin.broker()))
    plugin.serve()
