"""A test plugin that serves a callback to its host: the KV example, where ``Get("serve")``
serves ``grpc.health.v1.Health`` (service ``callback`` = SERVING) on a fresh broker id with
``accept_and_serve`` and answers the id; the host then dials that id. Launched by the interop
tests (``tests/tests/interop_python.rs``) in both broker modes."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
for _path in (os.path.join(_HERE, os.pardir, "src"), os.path.join(_HERE, os.pardir, "examples")):
    sys.path.insert(0, _path)

import kv_pb2  # noqa: E402
import kv_pb2_grpc  # noqa: E402
from grpc_health.v1 import health, health_pb2, health_pb2_grpc  # noqa: E402
from kv_plugin import FileKV  # noqa: E402

import tether_plugin  # noqa: E402


class ServingKV(FileKV):
    def __init__(self, broker: tether_plugin.GRPCBroker) -> None:
        super().__init__()
        self._broker = broker

    def Get(self, request, context):  # noqa: N802
        if request.key != "serve":
            return super().Get(request, context)
        servicer = health.HealthServicer()
        servicer.set("callback", health_pb2.HealthCheckResponse.SERVING)
        served = self._broker.accept_and_serve(
            self._broker.next_id(), [(health_pb2_grpc.add_HealthServicer_to_server, servicer)]
        )
        return kv_pb2.GetResponse(value=str(served.id).encode())


if __name__ == "__main__":
    plugin = tether_plugin.Plugin("BASIC_PLUGIN", "hello", app_versions=[1])
    plugin.add_service(kv_pb2_grpc.add_KVServicer_to_server, ServingKV(plugin.broker()))
    plugin.serve()
