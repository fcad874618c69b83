"""The checked-in generated code matches what tools/regenerate_protos.py makes from the
repository's .proto files."""

import importlib.util
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "regenerate_protos.py"


def test_the_checked_in_generated_code_is_up_to_date():
    pytest.importorskip(
        "grpc_tools", reason="grpcio-tools is not installed (pip install -r requirements-dev.txt)"
    )
    spec = importlib.util.spec_from_file_location("regenerate_protos", TOOL)
    tool = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = tool  # dataclasses look their module up there
    spec.loader.exec_module(tool)
    files = tool.generate()
    assert len(files) == 14, sorted(map(str, files))
    stale = [str(p.relative_to(tool.REPO)) for p in tool.stale(files)]
    assert stale == [], "run: python3 sdk-python/tools/regenerate_protos.py"
