"""The README's "Writing a plugin in Python" snippet is a working plugin."""

import json
import re
from pathlib import Path

import grpc
import kv_pb2
import pytest
from test_plugin import Connected, launch

from tether_plugin import generate_identity

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_snippet() -> str:
    text = README.read_text()
    section = text.split("## Writing a plugin in Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the section has exactly one Python snippet"
    return blocks[0]


def test_the_readme_plugin_serves_the_kv_contract_over_automtls_and_logs_hclog(tmp_path):
    script = tmp_path / "my_plugin.py"
    script.write_text(readme_snippet())
    host = generate_identity()
    plugin = Connected(launch(tmp_path, host=host, script=script), host)
    plugin.kv.Put(kv_pb2.PutRequest(key="a", value=b"1"), timeout=10)
    assert plugin.kv.Get(kv_pb2.GetRequest(key="a"), timeout=10).value == b"1"
    with pytest.raises(grpc.RpcError) as e:
        plugin.kv.Get(kv_pb2.GetRequest(key="b"), timeout=10)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert plugin.shutdown() == 0
    lines = [json.loads(line) for line in plugin.proc.stderr.read().decode().splitlines()]
    stored = [line for line in lines if line["@message"] == "stored a value"]
    assert stored and stored[0]["@level"] == "info" and stored[0]["key"] == "a"
    assert stored[0]["@module"] == "kv"


def test_the_readmes_callback_excerpts_are_the_counter_plugins_code():
    text = README.read_text()
    section = text.split("## Writing a plugin in Python", 1)[1].split("\n## ", 1)[0]
    excerpts = re.findall(r"```py\n(.*?)```", section, re.S)
    assert len(excerpts) == 3
    source = (Path(__file__).resolve().parents[1] / "examples" / "counter_plugin.py").read_text()
    for excerpt in excerpts:
        assert excerpt in source, excerpt
