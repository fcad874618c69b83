"""A test plugin: the KV example, plus a Put that prints to stdout and stderr, on the transport
given as argv[1] ("unix" or "tcp")."""

import sys

import kv_pb2_grpc
from kv_plugin import FileKV

import tether_plugin


class PrintingKV(FileKV):
    def Put(self, request, context):  # noqa: N802
        print(f"stdout: stored {request.key}")
        print(f"stderr: stored {request.key}", file=sys.stderr)
        return super().Put(request, context)


if __name__ == "__main__":
    tether_plugin.serve(
        "BASIC_PLUGIN",
        "hello",
        [(kv_pb2_grpc.add_KVServicer_to_server, PrintingKV())],
        app_versions=[1, 2],
        transport=sys.argv[1] if len(sys.argv) > 1 else "unix",
    )
