#!/usr/bin/env python3
"""Regenerates the checked-in Python code for the repository's .proto files.

    python3 sdk-python/tools/regenerate_protos.py          # rewrite the generated files
    python3 sdk-python/tools/regenerate_protos.py --check  # exit 1 if any is stale

Uses grpcio-tools from PyPI (its bundled protoc and well-known types), so no system protoc is
needed. The .proto sources are the repository's own (go-plugin's internal services in
proto/proto/plugin/, tether's plugin-to-plugin service in proto/proto/tether/, the KV example
contract in examples/proto/); nothing is copied.
tests/test_generated_code.py fails while the checked-in code is stale.
"""

from __future__ import annotations

import argparse
import importlib.resources
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

SDK = Path(__file__).resolve().parent.parent
REPO = SDK.parent


@dataclass(frozen=True)
class Job:
    """One protoc run: `protos` (relative to `include`) into `out`."""

    include: Path
    protos: tuple[str, ...]
    out: Path
    # protoc's grpc plugin imports sibling modules by their proto directory ("from plugin
    # import x_pb2"); inside a package they must be imported by their full name instead.
    rewrite_imports: tuple[tuple[str, str], ...] = ()


JOBS = (
    Job(
        include=REPO / "proto" / "proto",
        protos=(
            "plugin/grpc_broker.proto",
            "plugin/grpc_controller.proto",
            "plugin/grpc_stdio.proto",
        ),
        out=SDK / "src" / "tether_plugin" / "_proto",
        rewrite_imports=(("from plugin import ", "from tether_plugin._proto.plugin import "),),
    ),
    # tether's own host service for plugin-to-plugin calls (docs/PROTOCOL.md §10.3).
    Job(
        include=REPO / "proto" / "proto",
        protos=("tether/plugins/v1/plugins.proto",),
        out=SDK / "src" / "tether_plugin" / "_proto",
        rewrite_imports=(
            ("from tether.plugins.v1 import ", "from tether_plugin._proto.tether.plugins.v1 import "),
        ),
    ),
    Job(
        include=REPO / "examples" / "proto",
        protos=("kv.proto", "agent.proto"),
        out=SDK / "examples",
    ),
    # Its own protoc run: it reuses kv.proto's message names in the same package `proto`.
    Job(
        include=REPO / "examples" / "proto",
        protos=("counter.proto",),
        out=SDK / "examples",
    ),
)


def generate() -> dict[Path, str]:
    """Runs every job in a scratch directory; returns {destination path: file text}."""
    from grpc_tools import protoc  # imported here so --help works without grpcio-tools

    well_known = importlib.resources.files("grpc_tools") / "_proto"
    files: dict[Path, str] = {}
    for job in JOBS:
        with tempfile.TemporaryDirectory() as scratch:
            args = [
                "protoc",
                f"-I{job.include}",
                f"-I{well_known}",
                f"--python_out={scratch}",
                f"--grpc_python_out={scratch}",
                *job.protos,
            ]
            if protoc.main(args) != 0:
                raise SystemExit(f"protoc failed for {job.protos} (see the messages above)")
            for path in sorted(Path(scratch).rglob("*.py")):
                text = path.read_text()
                for old, new in job.rewrite_imports:
                    text = text.replace(old, new)
                files[job.out / path.relative_to(scratch)] = text
    return files


def stale(files: dict[Path, str]) -> list[Path]:
    """The destinations whose checked-in text differs from `files`."""
    return [p for p, text in files.items() if not p.is_file() or p.read_text() != text]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale files")
    args = parser.parse_args()
    files = generate()
    outdated = stale(files)
    if args.check:
        for path in outdated:
            print(f"stale: {path.relative_to(REPO)}", file=sys.stderr)
        return 1 if outdated else 0
    for path in outdated:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[path])
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
