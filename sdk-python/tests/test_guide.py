"""docs/plugin-python.md is copy-paste complete: its files (each code block after a
``<!-- file: PATH -->`` marker) written into a scratch directory, the commands marked
``<!-- run: sdk-python/tests/test_guide.py -->`` run there in order with bash (generating the
code, then the guide's own pytest file, whose four tests must pass).

The scratch directory finds the SDK the way an installed package would be found: on
``PYTHONPATH`` (``src/`` of this checkout), and its pytest fixtures through ``-p`` (an installed
package registers them by its entry point).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

SDK = Path(__file__).resolve().parents[1]
GUIDE = SDK.parent / "docs" / "plugin-python.md"
THIS = "sdk-python/tests/test_guide.py"

# A marker line, then a fenced block: ``<!-- kind: value -->`` and the block's text.
BLOCK = re.compile(r"^<!-- ([a-z-]+)(?:: (.*?))? -->\n```[a-z]*\n(.*?)^```$", re.M | re.S)


def blocks(kind: str, value: str | None = None) -> list[tuple[str, str]]:
    found = [(v, text) for k, v, text in BLOCK.findall(GUIDE.read_text()) if k == kind]
    return [(v, text) for v, text in found if value is None or v == value]


def test_the_guides_plugin_is_generated_and_passes_its_own_tests(tmp_path):
    files = blocks("file")
    assert [path for path, _ in files] == ["proto/greeter.proto", "greeter_plugin.py", "test_greeter.py"]
    for path, text in files:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    commands = [text for _, text in blocks("run", THIS)]
    assert len(commands) == 2, "the guide's generate and test commands"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SDK / "src"), str(tmp_path)])
    env["PYTEST_ADDOPTS"] = "-p tether_plugin.pytest_plugin -p no:cacheprovider"
    # The guide says python3; run this interpreter (the one with the SDK's dependencies).
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", "\n".join(commands)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "4 passed" in out.stdout, out.stdout + out.stderr
    assert (tmp_path / "greeter_pb2_grpc.py").is_file()
