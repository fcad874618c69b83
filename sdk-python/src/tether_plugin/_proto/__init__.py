"""Generated protobuf and gRPC code for go-plugin's internal services and tether's own. Do not
edit: regenerate with ``python3 sdk-python/tools/regenerate_protos.py``."""
