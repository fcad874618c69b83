#!/usr/bin/env python3
"""KV plugin: go-plugin's ``examples/grpc`` plugin, written with the tether Python SDK.

Serves ``proto.KV`` (app version 1, cookie ``BASIC_PLUGIN=hello``) and keeps each value in a
file ``kv_<key>`` in its working directory — a drop-in for tether's ``kv-plugin`` and
go-plugin's own. ``Get`` of a missing key fails with ``NOT_FOUND``; keys that could name another
file (``/``, ``\\``, NUL, ``.``, ``..``, empty) fail with ``INVALID_ARGUMENT``.

    KV_PLUGIN="python3 sdk-python/examples/kv_plugin.py" target/debug/kv-host put a 1
    KV_PLUGIN="python3 sdk-python/examples/kv_plugin.py" target/debug/kv-host get a   # prints 1
"""

import logging
import os
import sys

import grpc

# Run from a checkout, the example uses the SDK next to it (so it runs without installing
# anything but the dependencies); copied elsewhere, it uses the installed tether-plugin.
_CHECKOUT_SDK = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "src")
if os.path.isdir(os.path.join(_CHECKOUT_SDK, "tether_plugin")):
    sys.path.insert(0, _CHECKOUT_SDK)

import kv_pb2  # noqa: E402 (generated from examples/proto/kv.proto)
import kv_pb2_grpc  # noqa: E402

import tether_plugin  # noqa: E402

log = logging.getLogger("kv")


def path_for(key: str) -> str:
    """The file holding ``key``'s value, or ``ValueError`` if ``key`` could escape the working
    directory or name something other than a plain ``kv_`` file."""
    if key in ("", ".", "..") or any(c in key for c in "/\\\0"):
        raise ValueError(
            f"invalid key {key!r}: keys must be non-empty, not '.' or '..', and contain no '/', '\\' or NUL"
        )
    return f"kv_{key}"


class FileKV(kv_pb2_grpc.KVServicer):
    """Stores each value in ``kv_<key>`` in the working directory."""

    def Get(self, request, context):  # noqa: N802 (gRPC method name)
        path = self._path(request.key, context)
        try:
            with open(path, "rb") as f:
                return kv_pb2.GetResponse(value=f.read())
        except FileNotFoundError:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no value for key {request.key!r}")
        except OSError as e:
            context.abort(grpc.StatusCode.INTERNAL, f"reading {path}: {e.strerror}")

    def Put(self, request, context):  # noqa: N802 (gRPC method name)
        path = self._path(request.key, context)
        try:
            with open(path, "wb") as f:
                f.write(request.value)
        except OSError as e:
            context.abort(grpc.StatusCode.INTERNAL, f"writing {path}: {e.strerror}")
        log.debug("stored a value", extra={"key": request.key, "bytes": len(request.value)})
        return kv_pb2.Empty()

    @staticmethod
    def _path(key, context):
        try:
            return path_for(key)
        except ValueError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))


if __name__ == "__main__":
    tether_plugin.serve(
        "BASIC_PLUGIN",
        "hello",
        [(kv_pb2_grpc.add_KVServicer_to_server, FileKV())],
        app_versions=[1],
    )
