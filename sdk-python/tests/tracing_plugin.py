"""A test plugin that says whether the SDK traces it: the KV example, where ``Get("tracing")``
answers ``on`` when the SDK loaded its OpenTelemetry half (``tether_plugin._otel``), else
``off``. Launched by ``test_tracing.py`` with and without the OpenTelemetry packages."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
for _path in (os.path.join(_HERE, os.pardir, "src"), os.path.join(_HERE, os.pardir, "examples")):
    sys.path.insert(0, _path)

import kv_pb2  # noqa: E402
import kv_pb2_grpc  # noqa: E402
from kv_plugin import FileKV  # noqa: E402

import tether_plugin  # noqa: E402


class TracingKV(FileKV):
    def Get(self, request, context):  # noqa: N802
        if request.key != "tracing":
            return super().Get(request, context)
        return kv_pb2.GetResponse(value=b"on" if "tether_plugin._otel" in sys.modules else b"off")


if __name__ == "__main__":
    plugin = tether_plugin.Plugin("BASIC_PLUGIN", "hello", app_versions=[1])
    plugin.add_service(kv_pb2_grpc.add_KVServicer_to_server, TracingKV())
    plugin.serve()
