#!/usr/bin/env python3
"""A plugin that calls another plugin of its host's catalog through the host
(``broker.open_plugin``, docs/PROTOCOL.md §10.3), written with the tether Python SDK.

Serves ``proto.KV`` (app version 1, cookie ``BASIC_PLUGIN=hello``):

- ``Get "PLUGIN:KEY"`` opens a connection to catalog plugin ``PLUGIN`` through the host and
  answers what that plugin's ``proto.KV/Get KEY`` answers. The host relays the call only when
  the operator's grants let this plugin call that one (``calls = ["PLUGIN"]`` under
  ``[plugins.THIS]``); a refusal comes back with the host's status code and message, which
  names the grants line to add.
- ``Put`` stores nothing (``UNIMPLEMENTED``).

``tests/tests/plugin_calls.rs`` runs it as plugin ``a`` of a ``Supervisor``'s catalog.
"""

import os
import sys

import grpc

# Run from a checkout, the example uses the SDK next to it; copied elsewhere, the installed one.
_HERE = os.path.dirname(os.path.realpath(__file__))
_CHECKOUT_SDK = os.path.join(_HERE, os.pardir, "src")
if os.path.isdir(os.path.join(_CHECKOUT_SDK, "tether_plugin")):
    sys.path.insert(0, _CHECKOUT_SDK)
sys.path.insert(0, _HERE)

import kv_pb2  # noqa: E402 (generated from examples/proto/kv.proto)
import kv_pb2_grpc  # noqa: E402

import tether_plugin  # noqa: E402


class Caller(kv_pb2_grpc.KVServicer):
    """Answers ``Get "PLUGIN:KEY"`` with catalog plugin ``PLUGIN``'s answer to ``Get KEY``."""

    def __init__(self, broker: tether_plugin.GRPCBroker) -> None:
        self.broker = broker

    def Get(self, request, context):  # noqa: N802 (gRPC method name)
        plugin, sep, key = request.key.partition(":")
        if not sep:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "expected PLUGIN:KEY")
        try:
            channel = self.broker.open_plugin(plugin)
        except tether_plugin.PluginRefusedError as e:
            context.abort(e.code, e.details)  # e.g. not granted: the grants line to add
        with channel:
            try:
                return kv_pb2_grpc.KVStub(channel).Get(kv_pb2.GetRequest(key=key))
            except grpc.RpcError as e:  # the other plugin's answer, passed on as it is
                context.abort(e.code(), e.details())

    def Put(self, request, context):  # noqa: N802 (gRPC method name)
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "the caller plugin stores nothing")


if __name__ == "__main__":
    plugin = tether_plugin.Plugin("BASIC_PLUGIN", "hello", app_versions=[1])
    plugin.add_service(kv_pb2_grpc.add_KVServicer_to_server, Caller(plugin.broker()))
    plugin.serve()
